"""Small environments and server harnesses shared by tests/runtime and tests/transport.

Not a test module (no ``test_`` prefix). Subprocess servers import it by name, e.g.
``python -m openenv_gym serve --env openenv_gym_test_envs:PingEnv`` with this directory on
``PYTHONPATH`` (see :func:`subprocess_env`).

* :class:`PingEnv` -- echoes ``message``; special messages: ``"raise"`` (step raises),
  ``"done"`` (episode over), ``"sleep"`` (blocks up to :data:`SLEEP_SECONDS`, printing
  :data:`SLEEP_MARKER` to stderr first, so a test knows the server is busy).
* :class:`FailAfterProbe` -- a factory whose every instance after the first one raises
  (the server builds one instance at start-up to read the metadata).
* :class:`DuckEnv` -- not an ``Environment`` subclass: models read from type hints.
* :class:`OddEnv` -- awkward values: datetime / UUID / Enum fields, NaN and bool rewards,
  a plain-dict state, a ``state`` that can raise, a ``close`` that raises.
* :class:`ServerThread` -- an event loop on its own thread, for in-process servers, so a
  blocking environment never stalls the client's loop.
* :class:`ObservedEnvServer` -- ``EnvServer`` whose ``active`` count can be waited on.

Fixtures (imported by the conftest.py files of tests/runtime and tests/transport):
``env_server`` (factory of in-process :class:`ObservedEnvServer`), ``ping_server``,
``ws_server`` (factory of raw ``websockets`` servers for fakes), ``cli_server`` (factory of
``python -m openenv_gym serve`` subprocesses; each is killed and reaped at teardown).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import psutil
import pytest
from pydantic import Field
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from openenv_gym.runtime.app import EnvServer, ServerConfig
from openenv_gym.runtime.calls import Capacity
from openenv_gym.runtime.environment import (
    Action,
    Environment,
    EnvironmentMetadata,
    Observation,
    State,
)
from openenv_gym.runtime.loader import EnvModels

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
SLEEP_SECONDS = 2.0
SLEEP_MARKER = "PINGENV-SLEEPING"

# Released by test teardown so an in-process sleeping env does not hold the server loop.
SLEEP_RELEASE = threading.Event()


class PingAction(Action):
    """The action: one non-empty message."""

    message: str = Field(..., min_length=1)


class PingObservation(Observation):
    """The echoed message and its length."""

    echoed: str
    length: int = 0


class PingState(State):
    """Base state plus the last message."""

    last: str | None = None


class Lifecycle:
    """Counts instances built and closed (thread-safe; the server runs on another thread)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.created = 0
        self.closed = 0

    def reset(self) -> None:
        """Forget every count."""
        with self._cond:
            self.created = self.closed = 0

    def bump(self, what: str) -> None:
        """Count one ``created`` or ``closed``."""
        with self._cond:
            setattr(self, what, getattr(self, what) + 1)
            self._cond.notify_all()

    def wait_closed(self, n: int, timeout: float = 10.0) -> bool:
        """Wait until ``n`` instances were closed."""
        with self._cond:
            return self._cond.wait_for(lambda: self.closed >= n, timeout)


LIFECYCLE = Lifecycle()


class PingEnv(Environment[PingAction, PingObservation, PingState]):
    """Echoes messages. ``reset`` takes ``seed`` and ``episode_id`` only (no ``**kwargs``)."""

    action_type: ClassVar[type[Action]] = PingAction
    observation_type: ClassVar[type[Observation]] = PingObservation
    state_type: ClassVar[type[State]] = PingState

    def __init__(self) -> None:
        self._episode_id: str | None = None
        self._steps = 0
        self._last: str | None = None
        LIFECYCLE.bump("created")

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> PingObservation:  # type: ignore[override]
        """Reward ``None`` and empty metadata, so the wire shows ``null`` and no ``metadata``."""
        self._episode_id = episode_id
        self._steps = 0
        self._last = None
        return PingObservation(echoed=f"ready seed={seed}", length=0)

    def step(self, action: PingAction) -> PingObservation:
        """Echo; see the module docstring for the special messages."""
        if action.message == "raise":
            raise ValueError("boom: step raised")
        if action.message == "sleep":
            sys.stderr.write(SLEEP_MARKER + "\n")
            sys.stderr.flush()
            SLEEP_RELEASE.wait(SLEEP_SECONDS)
        self._steps += 1
        self._last = action.message
        return PingObservation(
            echoed=action.message,
            length=len(action.message),
            reward=0.5 * len(action.message),
            done=action.message == "done",
            metadata={"step": self._steps},
        )

    @property
    def state(self) -> PingState:
        """Episode id, step count, last message."""
        return PingState(episode_id=self._episode_id, step_count=self._steps, last=self._last)

    def get_metadata(self) -> EnvironmentMetadata:
        """What ``/metadata`` serves."""
        return EnvironmentMetadata(name="PingEnv", description="echoes messages", version="9.9")

    def close(self) -> None:
        """Count the close."""
        LIFECYCLE.bump("closed")


class FailAfterProbe:
    """Factory: the first call (the server's start-up probe) works, every later one raises."""

    __name__ = "fail_after_probe"
    models = EnvModels(PingAction, PingObservation, PingState)

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> PingEnv:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("constructor exploded")
        return PingEnv()


class DuckEnv:
    """An OpenEnv-style class by duck typing only: models come from the annotations."""

    def reset(self, **kwargs: Any) -> PingObservation:
        """Echo the kwargs' names (all kwargs pass: ``**kwargs``)."""
        return PingObservation(echoed=",".join(sorted(kwargs)), reward=1)

    def step(self, action: PingAction) -> PingObservation:
        """Echo."""
        return PingObservation(echoed=action.message, length=len(action.message))

    @property
    def state(self) -> PingState:
        """Always the default state."""
        return PingState()


class Shade(enum.Enum):
    """A plain (not str) Enum: ``json.dumps`` cannot write it, Pydantic's JSON mode can."""

    DARK = "dark"


WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5)


class OddObservation(Observation):
    """Fields that only Pydantic's JSON mode turns into JSON."""

    when: datetime.datetime | None = None
    shade: Shade | None = None
    ident: uuid.UUID | None = None


class OddEnv(Environment[PingAction, OddObservation, State]):
    """Step messages: ``odd`` (datetime/enum/uuid), ``nan`` / ``true`` (rewards),
    ``break-state`` (``state`` raises from then on); anything else: an empty observation."""

    action_type: ClassVar[type[Action]] = PingAction
    observation_type: ClassVar[type[Observation]] = OddObservation

    def __init__(self) -> None:
        self.state_broken = False
        LIFECYCLE.bump("created")

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> OddObservation:
        """An int reward."""
        return OddObservation(reward=1)

    def step(self, action: PingAction) -> OddObservation:
        """See the class docstring."""
        if action.message == "odd":
            return OddObservation(
                when=WHEN, shade=Shade.DARK, ident=uuid.UUID(int=7), metadata={"at": WHEN}
            )
        if action.message == "nan":
            return OddObservation(reward=float("nan"))
        if action.message == "true":
            return OddObservation(reward=True)
        if action.message == "break-state":
            self.state_broken = True
        return OddObservation()

    @property
    def state(self) -> Any:
        """A plain dict, not a State model."""
        if self.state_broken:
            raise RuntimeError("state is broken")
        return {"plain": True}

    def close(self) -> None:
        """Count the close, then fail."""
        LIFECYCLE.bump("closed")
        raise RuntimeError("close failed")


class ObservedCapacity(Capacity):
    """``Capacity`` whose live-instance count can be waited on from another thread."""

    def __init__(self, limit: int) -> None:
        self.changed = threading.Condition()
        super().__init__(limit)

    @property  # type: ignore[override]
    def active(self) -> int:
        """Live instances (the base class reads and writes this attribute)."""
        return self._active

    @active.setter
    def active(self, value: int) -> None:
        with self.changed:
            self._active = value
            self.changed.notify_all()


class ObservedEnvServer(EnvServer):
    """``EnvServer`` whose live-instance count can be waited on from another thread."""

    @property  # type: ignore[override]
    def capacity(self) -> ObservedCapacity:
        """The live instances (the base class sets this attribute once)."""
        return self._observed

    @capacity.setter
    def capacity(self, value: Capacity) -> None:
        self._observed = ObservedCapacity(value.limit)

    def wait_active(self, n: int, timeout: float = 10.0) -> bool:
        """Wait until exactly ``n`` instances are live."""
        capacity = self.capacity
        with capacity.changed:
            return capacity.changed.wait_for(lambda: capacity.active == n, timeout)


class ServerThread:
    """A plain asyncio loop on a thread of its own; :meth:`stop` joins it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="test-server", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 15.0) -> T:
        """Run ``coro`` on the server loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run a plain function on the server loop."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def stop(self) -> None:
        """Stop the loop, join the thread, close the loop."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(15.0)
        assert not self.thread.is_alive(), "server thread did not stop"
        self.loop.close()


def subprocess_env() -> dict[str, str]:
    """Environment for a subprocess that must import this module."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --------------------------------------------------------------------------- harnesses


@dataclass
class RunningServer:
    """An in-process :class:`ObservedEnvServer` on its :class:`ServerThread`."""

    server: ObservedEnvServer
    thread: ServerThread

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return self.server.url

    def ws(self, path: str = "/ws") -> str:
        """``ws://127.0.0.1:PORT`` + path."""
        return f"ws://127.0.0.1:{self.server.port}{path}"


@contextlib.contextmanager
def running_env_server(
    factory: Callable[[], Any] = PingEnv,
    *,
    models: EnvModels | None = None,
    name: str | None = None,
    server_cls: type[ObservedEnvServer] = ObservedEnvServer,
    **config: Any,
) -> Iterator[RunningServer]:
    """Serve ``factory`` on 127.0.0.1, port 0, on a thread of its own; stop it on exit."""
    server = server_cls(factory, ServerConfig(**config), models=models, name=name)
    thread = ServerThread()
    try:
        thread.run(server.start())
        LIFECYCLE.reset()  # forget the instance the server built (and closed) at start-up
        yield RunningServer(server, thread)
    finally:
        SLEEP_RELEASE.set()  # a sleeping env would hold the server loop
        try:
            thread.run(server.aclose())
        finally:
            thread.stop()
            SLEEP_RELEASE.clear()


@contextlib.contextmanager
def running_ws_server(handler: Callable[..., Any], **serve_kwargs: Any) -> Iterator[str]:
    """A raw ``websockets`` server (for fakes) on its own thread; yields its http:// URL."""
    thread = ServerThread()

    async def start() -> Any:
        return await serve(handler, "127.0.0.1", 0, **serve_kwargs)

    async def stop(server: Any) -> None:
        server.close()
        await server.wait_closed()

    try:
        server = thread.run(start())
        try:
            port = next(iter(server.sockets)).getsockname()[1]
            yield f"http://127.0.0.1:{port}"
        finally:
            thread.run(stop(server))
    finally:
        thread.stop()


@dataclass
class CliServer:
    """A ``python -m openenv_gym serve`` subprocess and the URL it printed."""

    proc: subprocess.Popen[str]
    url: str

    def wait_for_stderr(self, marker: str) -> None:
        """Read the server's stderr until a line contains ``marker``."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if marker in line:
                return
        raise AssertionError(f"server exited before printing {marker!r}")


def spawn_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m openenv_gym *args`` with this directory importable (and ``env``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "openenv_gym", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**subprocess_env(), **(env or {})},
    )


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if still running, wait for it, close its pipes; assert it is gone."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(15)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    assert proc.returncode is not None
    assert not psutil.pid_exists(proc.pid)


@contextlib.contextmanager
def running_cli_server(
    spec: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[CliServer]:
    """``serve --env spec --port 0 *args`` in a subprocess; killed and reaped on exit."""
    proc = spawn_cli("serve", "--env", spec, "--port", "0", *args, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("http://"):
            proc.kill()
            _, err = proc.communicate(timeout=15)
            raise AssertionError(f"server did not print its URL: {line!r}; stderr: {err}")
        yield CliServer(proc, line.strip())
    finally:
        reap(proc)


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _fresh_lifecycle() -> Iterator[None]:
    """Reset the counters; afterwards, check no server thread or process outlived its test."""
    LIFECYCLE.reset()
    SLEEP_RELEASE.clear()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    SLEEP_RELEASE.clear()
    assert not [t for t in threading.enumerate() if t.name == "test-server"]
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == []


@pytest.fixture
def env_server() -> Iterator[Callable[..., RunningServer]]:
    """Factory: ``env_server(factory=PingEnv, **ServerConfig fields)`` -> RunningServer."""
    with contextlib.ExitStack() as stack:

        def start(factory: Callable[[], Any] = PingEnv, **kwargs: Any) -> RunningServer:
            return stack.enter_context(running_env_server(factory, **kwargs))

        yield start


@pytest.fixture
def ping_server(env_server: Callable[..., RunningServer]) -> RunningServer:
    """A :class:`PingEnv` server, default config."""
    return env_server()


def quietly(handler: Callable[[ServerConnection], Any]) -> Callable[[ServerConnection], Any]:
    """``handler``, ending quietly when the client goes.

    websockets logs the traceback of a handler that raises, from the server's thread; on
    Python 3.11.7 that may race with pytest rendering a traceback (both parse source with
    ``ast``, which is not thread-safe there: "AST constructor recursion depth mismatch").
    """

    async def run(ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            await handler(ws)

    return run


@pytest.fixture
def ws_server() -> Iterator[Callable[..., str]]:
    """Factory: ``ws_server(handler, **serve_kwargs)`` -> http:// URL of a raw server."""
    with contextlib.ExitStack() as stack:

        def start(handler: Callable[..., Any], **kwargs: Any) -> str:
            return stack.enter_context(running_ws_server(handler, **kwargs))

        yield start


@pytest.fixture
def cli_server() -> Iterator[Callable[..., CliServer]]:
    """Factory: ``cli_server(spec, *args, env=)`` -> CliServer (killed and reaped at teardown)."""
    with contextlib.ExitStack() as stack:

        def start(
            spec: str = "openenv_gym_test_envs:PingEnv",
            *args: str,
            env: dict[str, str] | None = None,
        ) -> CliServer:
            return stack.enter_context(running_cli_server(spec, *args, env=env))

        yield start
