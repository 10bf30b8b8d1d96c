"""The asyncio API against real local servers: what only an event loop has.

The shared contract (autoreset traces, seeds, infos, errors) runs in tests/vector's
conformance suite over both the sync and the asyncio vector env; here: ``make`` /
``make_vec`` as Gymnasium's, the single env step for step as the sync one, many envs in
one loop, cancelled calls, one call at a time, closing under a waiting call, uvloop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import gymnasium
import numpy as np
import pytest
import uvloop
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode
from openenv_gym_vector_envs import SLOW, SPEC, counter_codec, subprocess_pythonpath

import openenv_gym
import openenv_gym.aio
from openenv_gym.aio import AsyncOpenEnvEnv, AsyncOpenEnvVectorEnv
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ConfigurationError,
    ConnectionLostError,
    EnvClosedError,
    EnvErrorGroup,
    InvalidActionError,
    PendingCallError,
    ResetNeededError,
    ServerValidationError,
)
from openenv_gym.providers import LocalProvider

pytestmark = pytest.mark.integration

T = TypeVar("T")
PROTOCOLS = ["batch", "json"]


def run(main: Callable[[], Awaitable[T]], *, loop: str = "asyncio") -> T:
    """Run ``main()`` on a fresh loop of the given kind."""
    if loop == "uvloop":
        return uvloop.run(main())  # type: ignore[no-any-return]
    return asyncio.run(main())  # type: ignore[arg-type]


def open_gate(gate: Path) -> None:
    """Let the counter env's SLOW step finish (a file the server waits for)."""
    gate.touch()


# ------------------------------------------------------------------ make, make_vec


def test_make_mirrors_gymnasium_make() -> None:
    sync = gymnasium.make("openenv/Wordle-v0")
    try:
        sync_obs, sync_info = sync.reset(seed=3)
        sync_step = sync.step("[crane]")
    finally:
        sync.close()

    async def main() -> None:
        async with openenv_gym.aio.make("openenv/Wordle-v0") as env:
            assert isinstance(env, AsyncOpenEnvEnv)
            assert env.observation_space == sync.unwrapped.observation_space
            assert env.action_space == sync.unwrapped.action_space
            assert env.spec is not None
            assert env.spec.id == "openenv/Wordle-v0"
            assert env.spec.max_episode_steps == sync.spec.max_episode_steps  # type: ignore[union-attr]
            assert env.max_episode_steps == sync.spec.max_episode_steps  # type: ignore[union-attr]
            obs, info = await env.reset(seed=3)
            assert (obs, info) == (sync_obs, sync_info)
            assert env.np_random_seed == 3
            assert await env.step("[crane]") == sync_step
        assert env.closed
        with pytest.raises(EnvClosedError):
            await env.step("[crane]")

    run(main)


def test_make_vec_mirrors_gymnasium_make_vec() -> None:
    async def main() -> None:
        envs = await openenv_gym.aio.make_vec(
            "openenv_gym:openenv/Catch-v0", num_envs=3, autoreset_mode="same_step"
        )
        try:
            assert isinstance(envs, AsyncOpenEnvVectorEnv)
            assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
            assert envs.spec is not None
            assert envs.spec.kwargs["num_envs"] == 3
            assert envs.spec.kwargs["vectorization_mode"] == "vector_entry_point"
            assert envs.max_episode_steps == gymnasium.spec("openenv/Catch-v0").max_episode_steps
            obs, _ = await envs.reset(seed=0)
            assert obs.shape == (3, 50)
            assert envs.np_random_seed == (0, 1, 2)
            obs, rewards, terminations, truncations, _ = await envs.step(np.ones(3, dtype=np.int64))
            assert rewards.dtype == np.float64
            assert terminations.shape == truncations.shape == (3,)
        finally:
            await envs.close()

    run(main)


def test_bad_arguments_fail_before_any_server_starts() -> None:
    async def main() -> None:
        with pytest.raises(ConfigurationError, match="doesn't exist"):
            await openenv_gym.aio.make("openenv/Nothing-v0")
        with pytest.raises(ConfigurationError, match="not an openenv-gym env"):
            await openenv_gym.aio.make("CartPole-v1")
        with pytest.raises(ConfigurationError, match="num_envs"):
            await openenv_gym.aio.make_vec("openenv/Echo-v0", num_envs=0)
        with pytest.raises(ConfigurationError, match="vector entry point"):
            await openenv_gym.aio.make_vec("openenv/Echo-v0", vectorization_mode="async")
        with pytest.raises(ConfigurationError, match="protocol"):
            await openenv_gym.aio.make("openenv/Echo-v0", protocol="bogus")

    run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_env_steps_as_the_sync_one(protocol: str) -> None:
    """The same seeds and actions give the same observations, rewards, flags and infos."""
    actions = [1, 2, 0, 1, 1, 2, 0, 0, 1, 2, 1, 1]
    sync = openenv_gym.OpenEnvEnv("catch", protocol=protocol)
    try:
        expected: list[Any] = [sync.reset(seed=5)]
        for action in actions:
            out = sync.step(action)
            expected.append(out)
            if out[2] or out[3]:
                expected.append(sync.reset(seed=6))
    finally:
        sync.close()

    async def main() -> list[Any]:
        async with await AsyncOpenEnvEnv.create("catch", protocol=protocol) as env:
            got: list[Any] = [await env.reset(seed=5)]
            for action in actions:
                out = await env.step(action)
                got.append(out)
                if out[2] or out[3]:
                    got.append(await env.reset(seed=6))
            with pytest.raises(InvalidActionError):
                await env.step(7)
            return got

    got = run(main)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert data_equivalence(a, b, exact=True)


# ------------------------------------------------------------------ many envs in one loop


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_many_envs_step_concurrently_in_one_loop(counter_url: str, loop: str) -> None:
    """32 single envs and a vector env, all stepping at once on one loop."""

    async def one(env: AsyncOpenEnvEnv[Any, Any], start: int) -> list[int]:
        obs, _ = await env.reset(seed=start, options={"episode_length": 100})
        seen = [int(obs)]
        for _ in range(5):
            obs, *_ = await env.step(0)
            seen.append(int(obs))
        return seen

    async def main() -> None:
        envs = await asyncio.gather(
            *(
                AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url)
                for _ in range(32)
            )
        )
        vector = await AsyncOpenEnvVectorEnv.create(
            num_envs=8, codec=counter_codec(), base_url=counter_url
        )
        try:

            async def vector_run() -> list[list[int]]:
                obs, _ = await vector.reset(seed=1000, options={"episode_length": 100})
                rows = [obs.tolist()]
                for _ in range(5):
                    obs, *_ = await vector.step([0] * 8)
                    rows.append(obs.tolist())
                return rows

            *singles, rows = await asyncio.gather(
                *(one(env, 10 * k) for k, env in enumerate(envs)), vector_run()
            )
            for k, seen in enumerate(singles):
                assert seen == list(range(10 * k, 10 * k + 6))
            assert rows == [[1000 + i + t for i in range(8)] for t in range(6)]
        finally:
            await asyncio.gather(*(env.close() for env in envs), vector.close())

    run(main, loop=loop)


# ------------------------------------------------------------------ cancellation


async def started(env: Any) -> None:
    """Until ``env``'s call runs: it sent its requests in its first slice and now waits.

    The env has no event for "a call started" (the engine sends synchronously, then
    awaits its sockets), so this yields to the loop until the task got its first slice.
    """
    while env._calls.running is None:  # noqa: ASYNC110 (no event to wait on)
        await asyncio.sleep(0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancelled_step_leaves_the_single_env_consistent(
    counter_url: str, gate: Path, protocol: str
) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(
            codec=counter_codec(), base_url=counter_url, protocol=protocol
        ) as env:
            await env.reset(seed=10, options={"gate": str(gate), "episode_length": 100})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(env.step(SLOW), 0.3)  # the server holds it
            open_gate(gate)
            # the cancelled step reached the server: its reply is taken first, not
            # mistaken for this step's
            obs, reward, *_ = await env.step(0)
            assert (int(obs), reward) == (12, 2.0)
            assert (await env.state())["step_count"] == 2

    run(main)


def test_a_reset_after_a_cancelled_step_takes_that_steps_reply_first(
    counter_url: str, gate: Path
) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url) as env:
            await env.reset(seed=10, options={"gate": str(gate), "episode_length": 100})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(env.step(SLOW), 0.3)  # the server holds it
            open_gate(gate)
            obs, _ = await env.reset(seed=20)  # not the cancelled step's reply (11)
            assert int(obs) == 20
            obs, reward, *_ = await env.step(0)
            assert (int(obs), reward) == (21, 1.0)

    run(main)


def test_a_cancelled_step_ending_the_episode_counts(counter_url: str, gate: Path) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url) as env:
            await env.reset(seed=0, options={"gate": str(gate), "episode_length": 1})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(env.step(SLOW), 0.3)
            open_gate(gate)
            with pytest.raises(ResetNeededError):  # that step ended the episode
                await env.step(0)
            obs, _ = await env.reset(seed=7)
            assert int(obs) == 7

    run(main)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cancelled_vector_step_stays_pending(counter_url: str, gate: Path, protocol: str) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvVectorEnv.create(
            num_envs=3, codec=counter_codec(), base_url=counter_url, protocol=protocol
        ) as envs:
            await envs.reset(seed=0, options={"gate": str(gate), "episode_length": 100})
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(envs.step([SLOW, 0, 0]), 0.3)
            with pytest.raises(PendingCallError, match="step_wait"):
                await envs.step([0, 0, 0])
            open_gate(gate)
            obs, *_ = await envs.step_wait()  # the cancelled step, as it was sent
            assert obs.tolist() == [1, 2, 3]
            obs, *_ = await envs.step([0, 0, 0])
            assert obs.tolist() == [2, 3, 4]

    run(main)


def test_a_cancelled_reset_is_taken_by_the_next_call(counter_url: str) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvVectorEnv.create(
            num_envs=2, codec=counter_codec(), base_url=counter_url
        ) as envs:
            await envs.reset(seed=0, options={"episode_length": 100})
            reset = asyncio.ensure_future(envs.reset(seed=50))
            await started(envs)  # it sent its requests and waits for the replies
            reset.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reset
            obs, _ = await envs.reset(seed=70)  # takes the cancelled reset's replies first
            assert obs.tolist() == [70, 71]
            obs, *_ = await envs.step([0, 0])
            assert obs.tolist() == [71, 72]

    run(main)


# ------------------------------------------------------------------ one call at a time, close


def test_one_call_at_a_time(counter_url: str, gate: Path) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url) as env:
            await env.reset(options={"gate": str(gate), "episode_length": 100})
            slow = asyncio.ensure_future(env.step(SLOW))
            await started(env)
            with pytest.raises(PendingCallError, match="step"):
                await env.step(0)
            open_gate(gate)
            obs, *_ = await slow
            assert int(obs) == 1

    run(main)


@pytest.mark.parametrize("vector", [False, True])
def test_close_ends_a_waiting_call(counter_url: str, gate: Path, vector: bool) -> None:
    async def main() -> None:
        env: Any
        if vector:
            env = await AsyncOpenEnvVectorEnv.create(
                num_envs=2, codec=counter_codec(), base_url=counter_url
            )
            await env.reset(options={"gate": str(gate), "episode_length": 100})
            waiting = asyncio.ensure_future(env.step([SLOW, 0]))
        else:
            env = await AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url)
            await env.reset(options={"gate": str(gate), "episode_length": 100})
            waiting = asyncio.ensure_future(env.step(SLOW))
        await started(env)
        await env.close()
        with pytest.raises(EnvClosedError):
            await waiting
        await env.close()  # idempotent
        open_gate(gate)

    run(main)


def test_errors_are_the_sync_envs(counter_url: str) -> None:
    async def main() -> None:
        async with await AsyncOpenEnvVectorEnv.create(
            num_envs=3, codec=counter_codec(), base_url=counter_url
        ) as envs:
            with pytest.raises(ResetNeededError):
                await envs.step([0, 0, 0])
            await envs.reset()
            with pytest.raises(EnvErrorGroup) as caught:
                await envs.step([0, 9, 0])
            assert caught.value.env_indices == [1]
            obs, *_ = await envs.step([0, 0, 0])  # nothing was sent
            assert obs.tolist() == [1, 1, 1]

    run(main)


# ------------------------------------------------------------------ refused actions, lost servers


def test_an_action_the_server_refuses_raises_and_the_single_env_steps_on(counter_url: str) -> None:
    """The asyncio single env, and the sync one beside it (its lean step path)."""
    # a codec that sends value - 1: action 0 goes out as -1, which the server's action
    # model refuses (``ge=0``), though it is in the client's action space
    codec = dataclasses.replace(
        counter_codec(), encode_action=lambda action: {"value": int(action) - 1}
    )

    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(codec=codec, base_url=counter_url) as env:
            await env.reset(seed=5, options={"episode_length": 100})
            with pytest.raises(ServerValidationError):
                await env.step(0)
            obs, reward, terminated, truncated, _ = await env.step(2)
            assert (int(obs), reward, terminated, truncated) == (6, 1.0, False, False)
            assert (await env.state())["step_count"] == 1  # the refused step did not count

    run(main)
    sync = OpenEnvEnv(codec=codec, base_url=counter_url)
    try:
        sync.reset(seed=5, options={"episode_length": 100})
        with pytest.raises(ServerValidationError):
            sync.step(0)
        obs, reward, terminated, truncated, _ = sync.step(2)
        assert (int(obs), reward, terminated, truncated) == (6, 1.0, False, False)
    finally:
        sync.close()


def test_a_reset_the_server_refuses_raises_and_the_single_env_resets_again(
    counter_url: str,
) -> None:
    """The counter env checks ``episode_length`` with pydantic: the server refuses "x"
    (``VALIDATION_ERROR`` over both protocols: the asyncio env batched, the sync one JSON)."""

    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(codec=counter_codec(), base_url=counter_url) as env:
            with pytest.raises(ServerValidationError):
                await env.reset(seed=1, options={"episode_length": "x"})
            obs, _ = await env.reset(seed=2)
            assert int(obs) == 2

    run(main)
    with OpenEnvEnv(codec=counter_codec(), base_url=counter_url, protocol="json") as sync:
        with pytest.raises(ServerValidationError):
            sync.reset(seed=1, options={"episode_length": "x"})
        obs, _ = sync.reset(seed=2)
        assert int(obs) == 2


@pytest.mark.parametrize("on_server_loss", ["raise", "restart"])
def test_single_env_whose_server_dies(monkeypatch: pytest.MonkeyPatch, on_server_loss: str) -> None:
    monkeypatch.setenv("PYTHONPATH", subprocess_pythonpath())
    provider = LocalProvider(SPEC)

    async def main() -> None:
        async with await AsyncOpenEnvEnv.create(
            codec=counter_codec(), provider=provider, on_server_loss=on_server_loss
        ) as env:
            await env.reset(seed=5, options={"episode_length": 100})
            os.kill(provider.pids[0], signal.SIGKILL)
            if on_server_loss == "raise":
                with pytest.raises(ConnectionLostError):
                    await env.step(0)
                return
            obs, reward, terminated, truncated, info = await env.step(0)
            assert (int(obs), reward, terminated, truncated) == (5, 0.0, False, True)
            assert info["server_lost"] is True
            obs, _ = await env.reset(seed=9)  # on the new server
            assert int(obs) == 9

    run(main)
