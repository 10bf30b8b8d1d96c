"""Shared helpers of the interop tests: versions, subprocess servers, a failing env.

Not a test module, and importable without ``openenv`` (conftest.py imports it in every
venv). Servers run as subprocesses with this directory on ``PYTHONPATH``:

* :func:`start_openenv_app` -- ``python -m interop_apps NAME ...``: an app built by
  OpenEnv's own factory under uvicorn (see :mod:`interop_apps`);
* :func:`start_our_server` -- ``python -m openenv_gym serve ... --port 0``.

Both return a :class:`Server` once ``GET /health`` answers; :meth:`Server.stop` closes the
child's stdin (both exit on EOF), kills it if needed, reaps it and checks it is gone.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

import psutil

from openenv_gym_servers.echo import EchoEnvironment

__all__ = [
    "HERE",
    "OPENENV_DIST",
    "OPENENV_VERSION",
    "WIRE_METADATA",
    "FailAfterFirst",
    "Server",
    "get_json",
    "spawn_native",
    "spawn_ours",
    "start_native_app",
    "start_openenv_app",
    "start_our_server",
    "started",
]

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 60.0


def _openenv_release() -> tuple[str, tuple[int, ...]]:
    """Which OpenEnv line is installed: (distribution, version), ("", ()) if none."""
    for dist in ("openenv", "openenv-core"):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        return dist, tuple(int(part) for part in version.split(".")[:3] if part.isdigit())
    return "", ()


OPENENV_DIST, OPENENV_VERSION = _openenv_release()
"""``("openenv", (0, 10, 0))`` or ``("openenv-core", (0, 3, 0))``."""

WIRE_METADATA = OPENENV_VERSION >= (0, 4)
"""openenv >= 0.4: ``Observation.metadata`` reaches the wire (inside ``observation`` and at
the top level of the reply), and the client's ``StepResult`` has a ``metadata`` field. In
0.3.x ``serialize_observation`` drops it and ``StepResult`` has no such field."""


class FailAfterFirst(EchoEnvironment):
    """Our Echo, but every instance after the first raises in its constructor.

    Our server builds one instance at start-up (to read ``/metadata``), so it starts; every
    session then fails with FACTORY_ERROR. Runs in the server subprocess: the class-level
    counter is that process's.
    """

    built: ClassVar[int] = 0

    def __init__(self) -> None:
        type(self).built += 1
        if type(self).built > 1:
            raise RuntimeError("constructor exploded")
        super().__init__()


def subprocess_env() -> dict[str, str]:
    """Environment for a child that imports the modules of this directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("ENABLE_WEB_INTERFACE", None)
    env.pop("OPENENV_GYM_MODE", None)  # servers run in their default mode unless told
    return env


def get_json(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    """``GET url`` -> (status, parsed JSON body)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


@dataclass
class Server:
    """A server subprocess and its base URL (its stderr goes to a temporary file)."""

    proc: subprocess.Popen[bytes]
    url: str
    argv: list[str]
    stderr: IO[bytes]

    def stderr_text(self) -> str:
        """Everything the server wrote to stderr so far."""
        with contextlib.suppress(OSError, ValueError):
            self.stderr.seek(0)
            return self.stderr.read().decode("utf-8", "replace")
        return ""

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:PORT/ws``."""
        return self.url.replace("http://", "ws://", 1) + "/ws"

    def signal_stop(self) -> None:
        """Close its stdin: the server starts shutting down (see :meth:`stop`)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def stop(self) -> None:
        """Close stdin (the server exits), kill if it does not; reap; assert it is gone."""
        proc = self.proc
        self.signal_stop()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
        with contextlib.suppress(OSError):
            self.stderr.close()
        assert proc.returncode is not None
        assert not psutil.pid_exists(proc.pid), f"server {proc.pid} outlived stop()"


def _spawn(argv: list[str]) -> Server:
    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by Server.stop
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=subprocess_env(),
        cwd=HERE,
    )
    return Server(proc, "", argv, stderr)


def _first_line(server: Server) -> str:
    assert server.proc.stdout is not None
    line = server.proc.stdout.readline().decode().strip()
    if not line:
        server.proc.wait(10)  # it exited: all it wrote is in the file
        err = server.stderr_text()
        server.stop()
        raise AssertionError(f"{server.argv} printed nothing; stderr:\n{err}")
    return line


def _wait_healthy(server: Server) -> Server:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            status, body = get_json(f"{server.url}/health", timeout=2.0)
        except OSError:
            status, body = 0, None
        if status == 200 and body == {"status": "healthy"}:
            return server
        if server.proc.poll() is not None or time.monotonic() > deadline:
            err = server.stderr_text()
            server.stop()
            raise AssertionError(f"{server.argv}: not healthy at {server.url}/health:\n{err}")
        time.sleep(0.05)


def start_openenv_app(
    name: str, *, factory: str = "create_app", max_concurrent_envs: int = 8
) -> Server:
    """Start ``interop_apps NAME`` (OpenEnv's app factory, uvicorn) and wait until healthy."""
    argv = [
        sys.executable, "-m", "interop_apps", name,
        "--factory", factory, "--max-concurrent-envs", str(max_concurrent_envs),
    ]  # fmt: skip
    server = _spawn(argv)
    try:
        server.url = f"http://127.0.0.1:{int(_first_line(server))}"
    except BaseException:
        server.stop()
        raise
    return _wait_healthy(server)


def start_native_app(module: str, *, cwd: Path, paths: tuple[Path, ...] = ()) -> Server:
    """Serve an app module under uvicorn as upstream's images do (``cd cwd``, ``paths``)."""
    argv = [sys.executable, "-m", "interop_apps", "--module", module, "--cwd", str(cwd)]
    for path in paths:
        argv += ["--path", str(path)]
    return started(_spawn(argv), native=True)


def spawn_native(argv: list[str]) -> Server:
    """Start ``argv`` (an ``interop_apps`` command) without waiting: see :func:`started`."""
    return _spawn(argv)


def spawn_ours(*serve_args: str) -> Server:
    """Start ``openenv-gym serve *serve_args --port 0`` without waiting (:func:`started`)."""
    argv = [
        sys.executable, "-m", "openenv_gym", "serve", *serve_args,
        "--port", "0", "--exit-with-stdin",
    ]  # fmt: skip
    return _spawn(argv)


def started(server: Server, *, native: bool) -> Server:
    """Wait until a spawned server prints where it listens and answers ``/health``.

    Several servers spawned first and then waited for start side by side.
    """
    try:
        line = _first_line(server)
        server.url = f"http://127.0.0.1:{int(line)}" if native else line
        assert server.url.startswith("http://127.0.0.1:"), server.url
    except BaseException:
        server.stop()
        raise
    return _wait_healthy(server)


def start_our_server(*serve_args: str) -> Server:
    """Start ``python -m openenv_gym serve *serve_args --port 0`` and wait until healthy."""
    return started(spawn_ours(*serve_args), native=False)
