"""Fixtures of tests/vector: shared local server processes, vector env factories, leak checks.

Starting a server process costs about half a second, so the tests that do not test
process lifetimes share a small pool of local servers (started once per session by the
local provider, on first use) and connect to them with ``base_url=``: every vector env
still opens fresh sessions, so every sub-env is a fresh environment instance. Tests of
lifetimes (``make_vec``, killed servers, ``AsyncVectorEnv`` workers) start their own.

Every test is checked for leaked processes: a descendant of this process that appeared
during the test, and is not a pool server, must be gone at teardown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv_gym_vector_envs import SPEC, counter_codec, subprocess_pythonpath
from vector_checks import Awaited, descendants, wait_gone

from openenv_gym.aio import AsyncOpenEnvVectorEnv
from openenv_gym.providers import LocalProvider
from openenv_gym.vector import OpenEnvVectorEnv


class ServerPool:
    """Local server processes shared by the tests, per server name, started on demand."""

    def __init__(self) -> None:
        self._servers: dict[str, list[LocalProvider]] = {}

    def urls(self, server: str, count: int = 1) -> list[str]:
        """URLs of ``count`` distinct running servers of ``server`` (built-in name or spec)."""
        started = self._servers.setdefault(server, [])
        while len(started) < count:
            provider = LocalProvider(server)
            started.append(provider)
            provider.start()
        return [provider.start()[0] for provider in started[:count]]

    @property
    def pids(self) -> set[int]:
        """Process ids of every pool server."""
        return {pid for group in self._servers.values() for p in group for pid in p.pids}

    def close(self) -> None:
        """Stop every pool server."""
        for group in self._servers.values():
            for provider in group:
                provider.close()
        self._servers.clear()


@pytest.fixture(scope="session")
def _pythonpath() -> Iterator[None]:
    """Server processes import :mod:`openenv_gym_vector_envs` from this directory."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", subprocess_pythonpath())
        yield


@pytest.fixture(scope="module")
def _token() -> Iterator[None]:
    """Pool servers demand this token (``OPENENV_GYM_TOKEN``); clients send it by default."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENENV_GYM_TOKEN", "vector-tests")
        yield


@pytest.fixture(scope="module")
def pool(_pythonpath: None, _token: None) -> Iterator[ServerPool]:
    """The shared local servers (stopped at the end of the module)."""
    servers = ServerPool()
    yield servers
    servers.close()


@pytest.fixture(autouse=True)
def _no_leaked_processes(pool: ServerPool) -> Iterator[None]:
    before = descendants()
    yield
    new = descendants() - before - pool.pids
    assert not wait_gone(new), f"processes left behind: {sorted(wait_gone(new, 0))}"


def _factory(pool: ServerPool, build: Callable[..., Any]) -> tuple[Callable[..., Any], list[Any]]:
    made: list[Any] = []

    def make(env: str = "counter", num_envs: int = 4, servers: int = 1, **kwargs: Any) -> Any:
        if env == "counter":
            kwargs.setdefault("codec", counter_codec())
            urls = pool.urls(SPEC, servers)
        else:
            urls = pool.urls(env, servers)
        envs = build(env, num_envs, base_url=urls, **kwargs)
        made.append(envs)
        return envs

    return make, made


@pytest.fixture
def make_vector(pool: ServerPool) -> Iterator[Callable[..., OpenEnvVectorEnv]]:
    """Factory of vector envs on pool servers, closed at teardown.

    ``make_vector(env="catch", num_envs=4, servers=1, **kwargs)``; ``env="counter"``
    (the default) means :class:`~openenv_gym_vector_envs.CounterEnv` with its codec.
    """
    make, made = _factory(pool, OpenEnvVectorEnv)
    yield make
    for envs in made:
        envs.close()


@pytest.fixture
def make_async_vector(pool: ServerPool) -> Iterator[Callable[..., Any]]:
    """:func:`make_vector`'s factory for the asyncio vector env, behind sync calls
    (:class:`~vector_checks.Awaited`, on a loop of its own)."""
    loop = asyncio.new_event_loop()

    def build(env: str, num_envs: int, **kwargs: Any) -> Awaited:
        made = AsyncOpenEnvVectorEnv.create(env, num_envs, **kwargs)
        return Awaited(loop.run_until_complete(made), loop)

    make, made = _factory(pool, build)
    yield make
    for envs in made:
        envs.close()
    loop.close()


@pytest.fixture
def gate(tmp_path: Path, make_vector: Callable[..., OpenEnvVectorEnv]) -> Iterator[Path]:
    """A gate file for the counter env's SLOW action; opened at teardown whatever happened.

    (Set up after ``make_vector``, so it is opened before the vector envs are closed.)
    """
    path = tmp_path / "gate"
    yield path
    path.touch()


@pytest.fixture(params=["batch", "json"])
def protocol(request: pytest.FixtureRequest) -> str:
    """Each wire protocol."""
    return str(request.param)
