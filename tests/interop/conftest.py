"""Fixtures of tests/interop (marker ``openenv``): real OpenEnv apps and our servers.

These tests need an OpenEnv line installed (``openenv`` 0.10.x or ``openenv-core`` 0.3.0):
``scripts/test`` builds ``.venv-openenv`` and ``.venv-openenv03`` for them and fails if any
test is skipped there. In a venv without openenv (the main ``.venv``) nothing in this
directory is collected at all -- the main run deselects the marker, and the modules import
openenv -- so that run reports no skips either.

Every server is a subprocess (see :mod:`interop_support`): ``*_app`` fixtures serve an app
made by OpenEnv's own factory under uvicorn, ``*_server`` fixtures run
``python -m openenv_gym serve``. The ``shared_*`` factories keep one server per
configuration (its arguments with their defaults filled in) for the whole session (tests
must leave them as they found them: every session they open is closed); the ``fresh_*``
factories start a server for one test (capacity, factory errors). No server outlives its
fixture, and no test leaves a child process behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
from collections.abc import Callable, Iterator

import psutil
import pytest
from interop_official import FAMILIES, Served, generate, native_argv, our_argv
from interop_support import (
    Server,
    spawn_native,
    spawn_ours,
    start_openenv_app,
    start_our_server,
    started,
)

from openenv_gym.runtime.settings import ServerMode

if importlib.util.find_spec("openenv") is None:
    collect_ignore_glob = ["*.py"]

_SHARED_PIDS: set[int] = set()


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture(scope="session", autouse=True)
def _no_orphans_at_exit() -> Iterator[None]:
    """Set up before, so torn down after, the shared servers: then nothing may be left."""
    yield
    assert not _children(), "child processes outlived the session"


def _shared_family() -> set[int]:
    """The shared servers and their own children (the worker processes they fork)."""
    family = set(_SHARED_PIDS)
    for pid in _SHARED_PIDS:
        with contextlib.suppress(psutil.NoSuchProcess):
            family |= {p.pid for p in psutil.Process(pid).children(recursive=True)}
    return family


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    """No test may leave a child process behind (the shared servers and theirs excepted)."""
    before = _children()
    yield
    left = _children() - before - _shared_family()
    assert not left, f"child processes left behind: {sorted(left)}"


def share(server: Server) -> Server:
    """Count ``server`` (and the processes it forks) as shared: not a test's leftover."""
    _SHARED_PIDS.add(server.proc.pid)
    return server


def _app_key(*args: str, **kwargs: object) -> tuple[object, ...]:
    """``shared_app``'s arguments with its defaults filled in: ``("counter",)`` and
    ``("counter", factory="create_app")`` are one server."""
    bound = inspect.signature(start_openenv_app).bind(*args, **kwargs)
    bound.apply_defaults()
    return tuple(sorted(bound.arguments.items()))


def _server_key(*args: str, **kwargs: object) -> tuple[object, ...]:
    """``shared_server``'s arguments less an explicit ``--mode simulation``, the default
    (OPENENV_GYM_MODE is unset in the servers' environment: ``subprocess_env``); a test
    that asks for it checks the mode the server reports."""
    assert not kwargs
    rest = list(args)
    for k in range(len(rest) - 1):
        if rest[k : k + 2] == ["--mode", ServerMode.SIMULATION.value]:
            del rest[k : k + 2]
            break
    return tuple(rest)


@contextlib.contextmanager
def _shared(
    start: Callable[..., Server], canonical: Callable[..., tuple[object, ...]]
) -> Iterator[Callable[..., Server]]:
    """One server per configuration (``canonical`` tells equal argument sets apart)."""
    servers: dict[tuple[object, ...], Server] = {}

    def get(*args: str, **kwargs: object) -> Server:
        key = canonical(*args, **kwargs)
        if key not in servers:
            server = servers[key] = start(*args, **kwargs)
            _SHARED_PIDS.add(server.proc.pid)
        return servers[key]

    try:
        yield get
    finally:
        for server in servers.values():  # all shut down in parallel
            server.signal_stop()
        for server in servers.values():
            server.stop()


@contextlib.contextmanager
def _fresh(start: Callable[..., Server]) -> Iterator[Callable[..., Server]]:
    with contextlib.ExitStack() as stack:

        def get(*args: str, **kwargs: object) -> Server:
            server = start(*args, **kwargs)
            stack.callback(server.stop)
            return server

        yield get


@pytest.fixture(scope="session")
def shared_app() -> Iterator[Callable[..., Server]]:
    """``shared_app(name, factory="create_app", max_concurrent_envs=8)``: one per session."""
    with _shared(start_openenv_app, _app_key) as get:
        yield get


@pytest.fixture
def fresh_app() -> Iterator[Callable[..., Server]]:
    """``fresh_app(name, factory=..., max_concurrent_envs=...)``: stopped after the test."""
    with _fresh(start_openenv_app) as get:
        yield get


@pytest.fixture(scope="session")
def shared_server() -> Iterator[Callable[..., Server]]:
    """``shared_server(*serve_args)``: ``openenv-gym serve``, one per session."""
    with _shared(start_our_server, _server_key) as get:
        yield get


@pytest.fixture
def fresh_server() -> Iterator[Callable[..., Server]]:
    """``fresh_server(*serve_args)``: ``openenv-gym serve``, stopped after the test."""
    with _fresh(start_our_server) as get:
        yield get


@pytest.fixture(scope="session")
def official(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """Every family of :mod:`interop_official`, natively and by us, for the whole session.

    All of them start side by side (each imports OpenEnv, which takes seconds); the
    ``openenv init`` one is generated first, in a temporary directory.
    """
    families = dict(FAMILIES)
    generated = generate(tmp_path_factory.mktemp("openenv-init"))
    families[generated.name] = generated
    servers: list[Server] = []
    served: dict[str, Served] = {}
    try:
        pairs = {}
        for name, family in families.items():
            native = spawn_native(native_argv(family))
            servers.append(native)
            ours = spawn_ours(*our_argv(family))
            servers.append(ours)
            pairs[name] = (family, native, ours)
        for name, (family, native, ours) in pairs.items():
            served[name] = Served(family, started(native, native=True), started(ours, native=False))
        for server in servers:
            _SHARED_PIDS.add(server.proc.pid)
        yield served
    finally:
        for server in servers:
            server.signal_stop()
        for server in servers:
            server.stop()
