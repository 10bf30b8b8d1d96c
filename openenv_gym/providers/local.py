"""Local server processes: the default provider, no Docker and no URL needed.

Each server is ``python -m openenv_gym serve NAME --port 0 --exit-with-stdin``. The
server prints its URL on its first line of output (so no port is ever raced for) and
demands a bearer token, given in its ``OPENENV_GYM_TOKEN`` (:meth:`LocalProvider.token`):
ours when set, else a fresh one per server. It dies with this process, however this
process ends -- ``close()``, interpreter exit, or SIGKILL:

* it exits when its standard input closes, and we hold the only write end of that pipe:
  the pipe is close-on-exec, and a child this process forks closes it at once
  (``os.register_at_fork``), so neither keeps a server alive;
* on Linux it also gets SIGTERM when the thread that started it ends
  (``PR_SET_PDEATHSIG``, set between fork and exec), and every server is started from one
  thread that lives as long as this process: even a child forked outside Python, which
  keeps the pipe, cannot keep a server alive;
* a server that cannot take either (it is stopped: SIGSTOP) or does not exit is woken and
  killed by a watcher process (:mod:`~openenv_gym.providers.reaper`) once this process
  is gone.

Each server runs in a session (and process group) of its own, so an interrupt meant for
this process -- Ctrl-C in a terminal, a notebook's "interrupt kernel", both signal the
whole foreground process group -- never reaches the servers: the client catches its
``KeyboardInterrupt`` and its environments go on.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import ctypes
import logging
import os
import queue
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import IO, Any

from openenv_gym._http import get_json
from openenv_gym.config import check_seconds, env_float, env_str, resolve_token
from openenv_gym.envs import serve_target
from openenv_gym.exceptions import (
    AuthenticationError,
    ConfigurationError,
    OpenEnvGymError,
    ProviderError,
)
from openenv_gym.providers.base import Provider
from openenv_gym.providers.reaper import Reaper

__all__ = ["LocalProvider", "LocalServer", "app_target"]

logger = logging.getLogger("openenv_gym.providers")

_live: weakref.WeakSet[LocalServer] = weakref.WeakSet()
_live_lock = threading.Lock()

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal to get when the parent thread ends (``linux/prctl.h``)."""


def _death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks Linux for SIGTERM when our forking thread ends.

    Built here, in the parent: between fork and exec the child only calls it (no import,
    no lock). None where there is no ``prctl``.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    signum = int(signal.SIGTERM)

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return arm


_ARM_DEATH_SIGNAL = _death_signal()


class _Spawner:
    """Runs ``Popen`` calls on one daemon thread that lives as long as this process.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked a child ends, not the
    process: a server started from a short-lived thread (a pool's worker) would get SIGTERM
    when that thread exits.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._jobs = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def run(self, job: Callable[[], Any]) -> Any:
        """``job()`` on the spawner thread; its result (or exception)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="openenv-gym-spawner", daemon=True
                )
                self._thread.start()
        self._jobs.put((job, future))
        return future.result()

    def _loop(self) -> None:
        while True:
            job, future = self._jobs.get()
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)


_spawner = _Spawner()
_reaper = Reaper()


def _after_fork_in_child() -> None:
    """A forked child owns no server: close its copies of their pipes, forget them."""
    global _spawner, _live, _live_lock
    _spawner = _Spawner()
    _reaper.forget_all()
    _live_lock = threading.Lock()  # another thread may have held it at the fork
    for server in list(_live):
        server.forget()
    _live = weakref.WeakSet()


os.register_at_fork(after_in_child=_after_fork_in_child)


class LocalServer:
    """One ``openenv-gym serve`` subprocess.

    Args:
        server: Built-in name (``wordle``) or ``module:Class``.
        python: Interpreter to run (default: ``OPENENV_GYM_PYTHON`` or this one).
        extra_args: More ``serve`` options (e.g. ``["--max-sessions", "64"]``).
        token: The bearer token the server demands (None: none).
        target: The ``serve`` arguments naming what to host instead of ``server``
            (``["--app", "echo_env.server.app:app"]``).
    """

    def __init__(
        self,
        server: str,
        *,
        python: str | None = None,
        extra_args: list[str] | None = None,
        token: str | None = None,
        target: list[str] | None = None,
    ) -> None:
        self.server = server
        self.target = target
        self.python = python or env_str("OPENENV_GYM_PYTHON") or sys.executable
        self.extra_args = list(extra_args or [])
        self.token = token
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._owner = os.getpid()

    @property
    def headers(self) -> dict[str, str]:
        """What every request to this server must carry."""
        return {} if self.token is None else {"Authorization": f"Bearer {self.token}"}

    def launch(self) -> None:
        """Start the process (returns at once; :meth:`wait_ready` waits for it)."""
        served, root = serve_target(self.server)
        target = self.target or (["--env", served] if ":" in served else [served])
        command = [
            self.python, "-m", "openenv_gym", "serve", *target,
            "--host", "127.0.0.1", "--port", "0", "--exit-with-stdin", *self.extra_args,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("OPENENV_GYM_TOKEN", None)
        if root is not None and not self.target:  # registered in this process: its package
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        if self.token is not None:
            env["OPENENV_GYM_TOKEN"] = self.token
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        stderr = self._stderr
        try:
            self.process = _spawner.run(
                lambda: subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,  # the lifeline: close-on-exec, as every pipe here
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=env,
                    start_new_session=True,  # Ctrl-C, for the client's process group, skips it
                    preexec_fn=_ARM_DEATH_SIGNAL,  # calls prctl only: no lock, no import
                )
            )
        except OSError as exc:
            raise ProviderError(f"cannot start {command[0]}: {exc}") from exc
        _reaper.watch(self.process.pid)
        self._owner = os.getpid()
        with _live_lock:
            _live.add(self)

    def forget(self) -> None:
        """In a forked child: close the inherited pipes; the parent's server lives on."""
        process = self.process
        if process is not None:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError, ValueError):
                        pipe.close()
        self._owner = -1

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
        """Wait for the URL line, then for ``GET /health`` to answer 200; return the URL.

        Raises:
            ProviderError: No URL, not healthy in time, or it refused our token.
        """
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
                status, body = get_json(f"{url}/health", timeout=2.0, headers=self.headers)
            except AuthenticationError as exc:
                raise self._fail(f"refused the token it was given ({exc})") from exc
            except OpenEnvGymError:
                status, body = 0, None
            if status == 200 and isinstance(body, dict) and body.get("status") == "healthy":
                self.url = url
                logger.info(
                    "local server started: %s at %s (pid %d)", self.server, url, self.process.pid
                )
                return url
            if time.monotonic() > deadline:
                raise self._fail(f"not healthy at {url}/health within {timeout} s")
            time.sleep(0.05)

    @property
    def alive(self) -> bool:
        """Whether the process runs (a stopped one -- SIGSTOP -- counts as running)."""
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL it (a hung or stopped server too) and reap it. Idempotent."""
        process = self.process
        if process is not None and self._owner == os.getpid() and process.poll() is None:
            with contextlib.suppress(OSError):
                process.kill()
        self.stop(timeout=5.0)

    def stop(self, timeout: float = 5.0) -> None:
        """Close its stdin (it exits), then terminate / kill if needed. Idempotent."""
        process = self.process
        if process is not None and self._owner != os.getpid():  # a forked child's copy
            self.forget()
        elif process is not None:
            _close_lifeline(process)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(2.0)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            _reaper.forget(process.pid)
            if process.stdout is not None and not process.stdout.closed:
                process.stdout.close()
                logger.info(
                    "local server stopped: %s at %s (pid %d, exit status %s)",
                    self.server,
                    self.url,
                    process.pid,
                    process.returncode,
                )
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
        token: The bearer token of every server (default: ``OPENENV_GYM_TOKEN``, else a
            fresh random one each); a client sends :meth:`token` of its server.
        app: An OpenEnv app module to host, ``MODULE:ATTR`` (an env package installed
            with ``pip install -e envs/echo_env``: ``echo_env.server.app:app``);
            ``server`` is then only its name. ``docs/official-envs.md``.
        app_dir: An OpenEnv env directory to host (``openenv.yaml``'s ``app:``).
        concurrent: Host every session of the app in one process even when its class is
            not marked ``SUPPORTS_CONCURRENT_SESSIONS`` (default: a worker process each).
    """

    def __init__(
        self,
        server: str,
        *,
        num_servers: int = 1,
        start_timeout: float | None = None,
        python: str | None = None,
        extra_args: list[str] | None = None,
        token: str | None = None,
        app: str | None = None,
        app_dir: str | os.PathLike[str] | None = None,
        concurrent: bool = False,
    ) -> None:
        if not isinstance(num_servers, int) or num_servers < 1:
            raise ConfigurationError(f"num_servers must be a positive integer, got {num_servers!r}")
        self._target = app_target(app, app_dir)
        if concurrent:
            extra_args = [*(extra_args or []), "--concurrent"]
        self.server = server
        self.num_servers = num_servers
        self.start_timeout = (
            check_seconds(start_timeout, "start_timeout")
            or env_float("OPENENV_GYM_START_TIMEOUT", 30.0)
            or 30.0
        )
        self._token = resolve_token(token)
        self._python = python
        self._extra_args = extra_args
        self.servers = [self._new_server() for _ in range(num_servers)]
        self._urls: list[str] | None = None
        # the list itself, not a copy: a restarted server replaces its entry
        self._finalizer = weakref.finalize(self, _stop_all, self.servers)

    def _new_server(self) -> LocalServer:
        token = self._token or secrets.token_urlsafe(32)
        return LocalServer(
            self.server,
            python=self._python,
            extra_args=self._extra_args,
            token=token,
            target=self._target,
        )

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

    def token(self, index: int) -> str | None:
        """The bearer token server ``index`` demands (a restarted server has a new one)."""
        return self.servers[index].token

    def alive(self, index: int) -> bool:
        """Whether server ``index`` still runs."""
        return self.servers[index].alive

    def restart(self, index: int) -> str:
        """Kill server ``index`` (if it still runs) and start a fresh one; its URL.

        Raises:
            ProviderError: The provider is closed or not started, or the new server failed.
        """
        if self._urls is None or not self._finalizer.alive:
            raise ProviderError("the local provider is closed (or was never started)")
        self.servers[index].kill()
        fresh = self.servers[index] = self._new_server()
        fresh.launch()
        url = fresh.wait_ready(self.start_timeout)
        self._urls[index] = url
        logger.warning("restarted local %s server %d at %s", self.server, index, url)
        return url

    @property
    def pids(self) -> list[int]:
        """Process ids of the servers started."""
        return [s.pid for s in self.servers if s.pid is not None]

    def close(self) -> None:
        """Stop every server process. Idempotent."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"LocalProvider({self.server!r}, num_servers={self.num_servers}, urls={self._urls})"


def app_target(app: str | None, app_dir: str | os.PathLike[str] | None) -> list[str] | None:
    """The ``serve`` arguments of ``app=`` / ``app_dir=`` (None when neither is given).

    Raises:
        ConfigurationError: Both given, or one that is not a non-empty string (or path).
    """
    if app is not None and app_dir is not None:
        raise ConfigurationError("app= and app_dir= exclude each other: give one")
    if app is not None:
        if not isinstance(app, str) or not app:
            raise ConfigurationError(f"app must be MODULE:ATTR, got {app!r}")
        return ["--app", app]
    if app_dir is not None:
        if not isinstance(app_dir, str | os.PathLike) or not os.fspath(app_dir):
            raise ConfigurationError(f"app_dir must be a directory, got {app_dir!r}")
        return ["--app-dir", os.path.abspath(app_dir)]
    return None


def _close_lifeline(process: subprocess.Popen[bytes]) -> None:
    """Close a server's stdin (it exits), waking it first should it be stopped."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    if process.poll() is None:
        with contextlib.suppress(OSError):
            process.send_signal(signal.SIGCONT)  # stopped (SIGSTOP): it reads the end now


def _stop_all(servers: list[LocalServer]) -> None:
    for server in servers:  # signal them all first: they shut down in parallel
        process = server.process
        if process is not None and server._owner == os.getpid():
            _close_lifeline(process)
    for server in servers:
        server.stop()


@atexit.register
def _stop_live_servers() -> None:
    with _live_lock:
        servers = list(_live)
    _stop_all(servers)
