"""One seed rule, ``except*`` on a group, arguments checked before any server starts, and a
hint when an id does not match its server (issue 25, items 3 and 4).

Each of these failed on ``b51bec2``: vector ``reset(seed=1.5)`` raised a bare
``TypeError``, ``seed="a"`` spoke of a list of length 1, ``seed=True`` was taken by the
vector env and refused by the single env, ``np.int64(3)`` the reverse, single
``reset(seed=-1)`` raised a plain ``gymnasium.error.Error``; ``EnvErrorGroup`` was no
``ExceptionGroup``; ``protocol="bogus"`` started a server before refusing; Wordle-v0 at a
Catch server said ``Invalid message`` and nothing else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import openenv_gym.aio
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    EnvErrorGroup,
    ExecutionError,
    InvalidActionError,
    RemoteProtocolError,
    ServerValidationError,
)
from openenv_gym.providers import LocalProvider, Provider
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

RULE = "must be a non-negative integer"


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[str, str | None]]]:
    """Local servers: name -> (url, token)."""
    started = {name: LocalProvider(name) for name in ("echo", "catch")}
    try:
        yield {name: (p.start()[0], p.token(0)) for name, p in started.items()}
    finally:
        for provider in started.values():
            provider.close()


def _envs(
    servers: dict[str, tuple[str, str | None]], name: str = "echo"
) -> Iterator[tuple[str, Any]]:
    """The single and the vector env (two sub-envs), each with a reset taking ``seed``."""
    url, token = servers[name]
    single = OpenEnvEnv(name, base_url=url, token=token)
    vector = OpenEnvVectorEnv(name, 2, base_url=url, token=token)
    try:
        yield "single", single
        yield "vector", vector
    finally:
        single.close()
        vector.close()


# ------------------------------------------------------------------ one seed rule


@pytest.mark.parametrize(
    ("seed", "kind"),
    [
        (1.5, ArgumentTypeError),
        ("a", ArgumentTypeError),
        (True, ArgumentTypeError),
        (np.bool_(True), ArgumentTypeError),
        (-1, ConfigurationError),
        (np.int64(-3), ConfigurationError),
    ],
    ids=["float", "str", "bool", "numpy-bool", "negative", "numpy-negative"],
)
def test_a_bad_seed_is_refused_alike_by_both_envs(
    servers: dict[str, tuple[str, str | None]], seed: Any, kind: type[Exception]
) -> None:
    for which, env in _envs(servers):
        with pytest.raises(kind, match=RULE) as caught:
            env.reset(seed=seed)
        assert isinstance(caught.value, ConfigurationError), which  # an OpenEnvGymError
        assert "\n" not in str(caught.value)
        env.reset(seed=0)  # nothing was sent: the env is as it was


def test_numpy_ints_seed_both_envs(servers: dict[str, tuple[str, str | None]]) -> None:
    for which, env in _envs(servers):
        env.reset(seed=np.int64(3))
        seeds = env.np_random_seed
        assert seeds == (3 if which == "single" else (3, 4)), which


def test_a_vector_env_takes_a_list_of_seeds_under_the_same_rule(
    servers: dict[str, tuple[str, str | None]],
) -> None:
    url, token = servers["echo"]
    with OpenEnvVectorEnv("echo", 2, base_url=url, token=token) as envs:
        envs.reset(seed=[np.int64(5), None])
        assert envs.np_random_seed[0] == 5
        with pytest.raises(ConfigurationError, match=r"seed\[1\] must be a non-negative"):
            envs.reset(seed=[0, -1])
        with pytest.raises(ArgumentTypeError, match=r"seed\[0\] must be a non-negative"):
            envs.reset(seed=[False, 1])
        with pytest.raises(ConfigurationError, match="length must match num_envs=2"):
            envs.reset(seed=[1, 2, 3])  # Gymnasium's words, as SyncVectorEnv's


def test_the_asyncio_envs_keep_the_same_rule(servers: dict[str, tuple[str, str | None]]) -> None:
    url, token = servers["echo"]

    async def main() -> None:
        async with openenv_gym.aio.make("openenv/Echo-v0", base_url=url, token=token) as env:
            with pytest.raises(ArgumentTypeError, match=RULE):
                await env.reset(seed=True)
            with pytest.raises(ConfigurationError, match=RULE):
                await env.reset(seed=-1)
            await env.reset(seed=np.int64(2))
            assert env.np_random_seed == 2
        async with openenv_gym.aio.make_vec(
            "openenv/Echo-v0", num_envs=2, base_url=url, token=token
        ) as envs:
            with pytest.raises(ArgumentTypeError, match=RULE):
                await envs.reset(seed=1.5)

    asyncio.run(main())


# ------------------------------------------------------------------ EnvErrorGroup


def test_env_error_group_is_an_exception_group(
    servers: dict[str, tuple[str, str | None]],
) -> None:
    url, token = servers["catch"]
    with OpenEnvVectorEnv("catch", 4, base_url=url, token=token) as envs:
        envs.reset(seed=0)
        actions = np.array([1, 7, 1, -1])  # 7 and -1 are outside Discrete(3)
        with pytest.raises(EnvErrorGroup) as caught:  # existing handlers keep working
            envs.step(actions)
        group = caught.value
        assert isinstance(group, ExceptionGroup)
        assert group.exceptions == tuple(group.errors.values())
        assert group.env_indices == [1, 3]
        assert "env 1" in str(group)
        seen: list[EnvErrorGroup] = []
        try:
            envs.step(actions)
        except* InvalidActionError as matched:
            seen.append(matched)  # type: ignore[arg-type]
        except* ExecutionError:  # pragma: no cover - not raised here
            pytest.fail("no execution error was raised")
        (matched,) = seen
        assert isinstance(matched, EnvErrorGroup)
        assert matched.env_indices == [1, 3]
        assert all(isinstance(e, InvalidActionError) for e in matched.exceptions)


def test_except_star_splits_a_group_by_type() -> None:
    group = EnvErrorGroup(
        "2 sub-environment(s) failed",
        {3: ExecutionError("boom"), 1: InvalidActionError("bad")},
        {0: ("obs", 0.0, False, False, {})},
    )
    caught: dict[str, EnvErrorGroup] = {}
    try:
        raise group
    except* InvalidActionError as invalid:
        caught["invalid"] = invalid  # type: ignore[assignment]
    except* ExecutionError as failed:
        caught["failed"] = failed  # type: ignore[assignment]
    assert caught["invalid"].env_indices == [1]
    assert caught["failed"].env_indices == [3]
    assert caught["failed"].results == group.results  # the others' results travel along


# ------------------------------------------------------------------ checked before servers start


async def _made(making: Any) -> Any:
    return await making


class _Spy(Provider):
    """A provider that records being started (it must not be)."""

    def __init__(self) -> None:
        self.started = 0

    def start(self) -> list[str]:
        self.started += 1
        return ["http://127.0.0.1:1"]

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    "make",
    [
        lambda spy: OpenEnvEnv("echo", provider=spy, protocol="bogus"),
        lambda spy: OpenEnvVectorEnv("echo", 2, provider=spy, protocol="bogus"),
        lambda spy: OpenEnvVectorEnv("echo", 2, provider=spy, batch_size=3),
        lambda spy: OpenEnvEnv("echo", provider=spy, max_episode_steps=0),
        lambda spy: asyncio.run(
            _made(openenv_gym.aio.make("openenv/Echo-v0", provider=spy, protocol="x"))
        ),
    ],
    ids=["env-protocol", "vector-protocol", "vector-batch-size", "env-steps", "aio-protocol"],
)
def test_arguments_are_checked_before_any_server_starts(make: Callable[[Any], Any]) -> None:
    spy = _Spy()
    with pytest.raises(ConfigurationError):
        make(spy)
    assert spy.started == 0


# ------------------------------------------------------------------ a wrong id


def test_a_wrong_id_gets_a_hint(servers: dict[str, tuple[str, str | None]]) -> None:
    catch_url, catch_token = servers["catch"]
    with OpenEnvEnv("wordle", base_url=catch_url, token=catch_token) as env:
        env.reset(seed=0)
        with pytest.raises(ServerValidationError, match="Invalid message") as caught:
            env.step("[crane]")  # Catch's server wants an action id, not a word
        assert f"is {catch_url} a wordle server?" in str(caught.value)
        assert "openenv/Generic-v0" in str(caught.value)
    echo_url, echo_token = servers["echo"]
    with OpenEnvVectorEnv("catch", 2, base_url=echo_url, token=echo_token) as envs:
        with pytest.raises(RemoteProtocolError, match="a catch server") as later:
            envs.reset(seed=0)  # Echo's replies are no Catch board
        assert isinstance(later.value.__cause__, RemoteProtocolError)


def test_a_wrong_id_gets_a_hint_on_a_reply_the_single_env_cannot_read(
    servers: dict[str, tuple[str, str | None]],
) -> None:
    echo_url, echo_token = servers["echo"]
    with OpenEnvEnv("catch", base_url=echo_url, token=echo_token) as env:
        with pytest.raises(RemoteProtocolError, match="a catch server") as caught:
            env.reset(seed=0)  # Echo's reply is no Catch board
        assert f"is {echo_url} a catch server?" in str(caught.value)
        assert type(caught.value.__cause__) is RemoteProtocolError


def test_a_single_envs_request_headers_carry_its_token(
    servers: dict[str, tuple[str, str | None]],
) -> None:
    url, token = servers["echo"]
    assert token
    with OpenEnvEnv("echo", base_url=url, token=token) as env:
        assert env.request_headers() == env.request_headers(0)
        assert env.request_headers(0)["Authorization"] == f"Bearer {token}"
        with pytest.raises(IndexError, match=r"one server \(0\), not 1"):
            env.request_headers(1)


def test_no_hint_for_our_own_servers() -> None:
    with OpenEnvEnv("catch") as env:  # started by us: a catch server for sure
        env.reset(seed=0)
        with pytest.raises(InvalidActionError) as caught:
            env.step(7)
        assert "server?" not in str(caught.value)
