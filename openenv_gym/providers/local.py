"""Local server processes: the default provider, no Docker and no URL needed.

Each server is ``python -m openenv_gym serve NAME --port 0 --exit-with-stdin``. The server
prints its URL on its first line of output (so no port is ever raced for) and exits when
its standard input closes. We hold the only write end of that pipe, so when this process
ends -- ``close()``, interpreter exit, or SIGKILL -- the kernel closes it and the server
exits too: no orphans.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from typing import IO

from openenv_gym._http import get_json
from openenv_gym.config import env_float, env_str
from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError, ProviderError
from openenv_gym.providers.base import Provider

__all__ = ["LocalProvider", "LocalServer"]

logger = logging.getLogger("openenv_gym.providers")

_live: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_live_lock = threading.Lock()


class LocalServer:
    """One ``openenv-gym serve`` subprocess.

    Args:
        server: Built-in name (``wordle``) or ``module:Class``.
        python: Interpreter to run (default: ``OPENENV_GYM_PYTHON`` or this one).
        extra_args: More ``serve`` options (e.g. ``["--max-sessions", "64"]``).
    """

    def __init__(
        self, server: str, *, python: str | None = None, extra_args: list[str] | None = None
    ) -> None:
        self.server = server
        self.python = python or env_str("OPENENV_GYM_PYTHON") or sys.executable
        self.extra_args = list(extra_args or [])
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    def launch(self) -> None:
        """Start the process (returns at once; :meth:`wait_ready` waits for it)."""
        target = ["--env", self.server] if ":" in self.server else [self.server]
        command = [
            self.python, "-m", "openenv_gym", "serve", *target,
            "--host", "127.0.0.1", "--port", "0", "--exit-with-stdin", *self.extra_args,
        ]  # fmt: skip
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except OSError as exc:
            raise ProviderError(f"cannot start {command[0]}: {exc}") from exc
        with _live_lock:
            _live.add(self)

    def _stderr_tail(self, lines: int = 15) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace")
            return "\n".join(text.strip().splitlines()[-lines:])
        return ""

    def _fail(self, why: str) -> ProviderError:
        tail = self._stderr_tail()
        self.stop()
        return ProviderError(f"local {self.server} server {why}" + (f":\n{tail}" if tail else ""))

    def wait_ready(self, timeout: float) -> str:
        """Wait for the URL line, then for ``GET /health`` to answer 200; return the URL."""
        assert self.process is not None
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        fd = self.process.stdout.fileno()
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"printed no URL within {timeout} s")
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(fd, 1024)
                if not chunk:
                    raise self._fail(f"exited with status {self.process.wait()} before serving")
                line += chunk
        url = line.decode().strip().splitlines()[0]
        while True:
            try:
                status, body = get_json(f"{url}/health", timeout=2.0)
            except OpenEnvGymError:
                status, body = 0, None
            if status == 200 and isinstance(body, dict) and body.get("status") == "healthy":
                self.url = url
                return url
            if time.monotonic() > deadline:
                raise self._fail(f"not healthy at {url}/health within {timeout} s")
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Close its stdin (it exits), then terminate / kill if needed. Idempotent."""
        process = self.process
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(2.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        with _live_lock:
            _live.discard(self)

    @property
    def pid(self) -> int | None:
        """The server's process id (None before launch)."""
        return None if self.process is None else self.process.pid


class LocalProvider(Provider):
    """Start ``num_servers`` local server processes for one environment.

    Args:
        server: Built-in name (``wordle``, ``echo``, ``catch``) or ``module:Class``.
        num_servers: How many processes (a vector env spreads its sub-envs over them).
        start_timeout: Seconds for each to become healthy (``OPENENV_GYM_START_TIMEOUT``,
            default 30).
        python: Interpreter running the servers.
        extra_args: More ``openenv-gym serve`` options.
    """

    def __init__(
        self,
        server: str,
        *,
        num_servers: int = 1,
        start_timeout: float | None = None,
        python: str | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        if not isinstance(num_servers, int) or num_servers < 1:
            raise ConfigurationError(f"num_servers must be a positive integer, got {num_servers!r}")
        self.server = server
        self.num_servers = num_servers
        self.start_timeout = start_timeout or env_float("OPENENV_GYM_START_TIMEOUT", 30.0) or 30.0
        self.servers = [
            LocalServer(server, python=python, extra_args=extra_args) for _ in range(num_servers)
        ]
        self._urls: list[str] | None = None
        self._finalizer = weakref.finalize(self, _stop_all, list(self.servers))

    def start(self) -> list[str]:
        """Start the processes (in parallel) and wait until each is healthy."""
        if self._urls is None:
            try:
                for server in self.servers:
                    server.launch()
                self._urls = [s.wait_ready(self.start_timeout) for s in self.servers]
            except BaseException:
                self.close()
                raise
        return list(self._urls)

    @property
    def pids(self) -> list[int]:
        """Process ids of the servers started."""
        return [s.pid for s in self.servers if s.pid is not None]

    def close(self) -> None:
        """Stop every server process. Idempotent."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"LocalProvider({self.server!r}, num_servers={self.num_servers}, urls={self._urls})"


def _stop_all(servers: list[LocalServer]) -> None:
    for server in servers:  # signal them all first: they shut down in parallel
        process = server.process
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
    for server in servers:
        server.stop()


@atexit.register
def _stop_live_servers() -> None:
    with _live_lock:
        servers = list(_live)
    _stop_all(servers)
