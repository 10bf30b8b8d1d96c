"""Our Gymnasium facades (``OpenEnvEnv``, ``OpenEnvVectorEnv``) against real OpenEnv servers.

The servers are apps made by OpenEnv's own factory (``create_app`` and
``create_fastapi_app``) under uvicorn, hosting (i) :mod:`openenv_counter_env`, written
against OpenEnv's ``Environment`` base, and (ii) our Echo, Wordle and Catch logic through
an adapter (:mod:`interop_apps`). OpenEnv has no ``/batch``: ``protocol="auto"`` must fall
back to its JSON ``/ws``, and ``"json"`` must work as well. ``openenv/Generic-v0`` builds its
spaces from the app's ``GET /schema`` alone.

Version differences asserted here (not skipped):

* ``Observation.metadata`` reaches the wire only from openenv 0.4: ``info["metadata"]`` is
  there on 0.10.0 and absent on openenv-core 0.3.0 (its ``serialize_observation`` drops it).
"""

from __future__ import annotations

import random
import time

import pytest

pytest.importorskip("openenv")

import gymnasium
import numpy as np
from gymnasium import spaces
from interop_support import WIRE_METADATA, Server
from openenv_counter_env import counter_codec, expected_run, target_for

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.config import Timeouts
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    CapacityError,
    EnvErrorGroup,
    ExecutionError,
    FactoryError,
    InvalidActionError,
    ServerValidationError,
    UsageError,
)
from openenv_gym.spaces import codec_for
from openenv_gym.vector import OpenEnvVectorEnv
from openenv_gym_servers.catch import CatchAction, CatchEnvironment
from openenv_gym_servers.wordle import WordleEnvironment

pytestmark = pytest.mark.openenv

TIMEOUTS = Timeouts(connect=10.0, step=30.0, close=5.0)
FACTORIES = ["create_app", "create_fastapi_app"]


@pytest.fixture(params=["auto", "json"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=FACTORIES)
def counter_app(request: pytest.FixtureRequest, shared_app) -> Server:
    return shared_app("counter", factory=request.param)


def counter_env(url: str, protocol: str = "auto", **kwargs) -> OpenEnvEnv:
    kwargs.setdefault("codec", counter_codec())
    return OpenEnvEnv(base_url=url, protocol=protocol, timeouts=TIMEOUTS, **kwargs)


def open_when_free(make, deadline: float = 10.0):
    """Open and reset an env as soon as the server has freed a slot (close is async)."""
    end = time.monotonic() + deadline
    while True:
        env = make()
        try:
            env.reset()
            return env
        except CapacityError:
            env.close()
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


# ------------------------------------------------------------- an OpenEnv-native env


def test_counter_episode(counter_app, protocol):
    env = counter_env(counter_app.url, protocol)
    try:
        assert env.protocol == "json"  # OpenEnv serves no /batch: "auto" fell back
        obs, info = env.reset(seed=5, options={"episode_id": "ep-5"})
        target = target_for(5)
        assert obs.tolist() == [0, target]
        assert obs in env.observation_space
        assert info == (
            {"count": 0, "target": target} | ({"metadata": {"seed": 5}} if WIRE_METADATA else {})
        )
        assert env.state() == {"episode_id": "ep-5", "step_count": 0, "count": 0, "target": target}
        for k in range(1, target + 1):
            obs, reward, terminated, truncated, info = env.step(1)
            assert obs.tolist() == [k, target]
            assert (reward, terminated, truncated) == (float(k == target), k == target, False)
            assert info["count"] == k
            # openenv 0.3.x drops Observation.metadata on the wire; >= 0.4 sends it
            assert info.get("metadata") == ({"step": k} if WIRE_METADATA else None)
        assert env.state()["step_count"] == target
        with pytest.raises(UsageError):
            env.step(1)  # the episode is over: reset first
    finally:
        env.close()


def test_counter_seeds_and_reset_kwargs(counter_app, protocol):
    first, second = counter_env(counter_app.url, protocol), counter_env(counter_app.url, protocol)
    try:
        for seed in (0, 1, 2, 3):
            assert first.reset(seed=seed)[0].tolist() == [0, target_for(seed)]
            assert second.reset(seed=seed)[0].tolist() == [0, target_for(seed)]
        # an unseeded reset continues the stream the last seed started
        rng = random.Random(3)
        rng.randint(1, 5)
        assert first.reset()[0].tolist() == [0, rng.randint(1, 5)]
        # env-specific reset kwargs travel in options
        obs, _ = second.reset(seed=9, options={"start": 4})
        assert obs.tolist() == [4, target_for(9)]
    finally:
        first.close()
        second.close()


def test_counter_errors_keep_the_session(counter_app, protocol):
    # a codec wider than the server's action model (delta in -2..2)
    env = counter_env(counter_app.url, protocol, codec=counter_codec(max_delta=3))
    try:
        env.reset(seed=1)
        with pytest.raises(InvalidActionError) as refused:
            env.step(3)  # in our action space; the server's model refuses it
        assert isinstance(refused.value, ServerValidationError)
        assert refused.value.code == "VALIDATION_ERROR"
        assert refused.value.session_closed is False
        assert refused.value.details["errors"][0]["loc"][-1] == "delta"
        with pytest.raises(ExecutionError, match=r"within 0\.\.50") as failed:
            env.step(-1)  # the environment raises: EXECUTION_ERROR
        assert failed.value.session_closed is False
        with pytest.raises(InvalidActionError):
            env.step(4)  # outside our action space: refused before sending
        with pytest.raises(ServerValidationError):
            env.session.step({"delta": 1, "extra": True})  # extra="forbid"
        # the session survived all of it, with nothing applied
        assert env.state()["step_count"] == 0
        obs, *_ = env.step(1)
        assert obs[0] == 1
        assert env.state()["step_count"] == 1
    finally:
        env.close()


@pytest.mark.parametrize("factory", FACTORIES)
def test_counter_capacity(fresh_app, factory):
    app = fresh_app("counter", factory=factory, max_concurrent_envs=1)
    holder = counter_env(app.url)
    try:
        holder.reset(seed=0)
        refused = counter_env(app.url)  # the upgrade is accepted ...
        try:
            with pytest.raises(CapacityError) as full:  # ... then CAPACITY_REACHED is pushed
                refused.reset()
            assert full.value.session_closed is True
            assert full.value.details["active_sessions"] == 1
            assert full.value.details["max_sessions"] == 1
            with pytest.raises(UsageError):
                refused.reset()  # that session is over
        finally:
            refused.close()
        assert holder.step(1)[0][0] == 1  # the holder is unaffected
    finally:
        holder.close()
    open_when_free(lambda: counter_env(app.url)).close()  # the slot was freed


def test_counter_vector_capacity(fresh_app):
    app = fresh_app("counter", max_concurrent_envs=1)
    envs = OpenEnvVectorEnv(num_envs=2, base_url=app.url, codec=counter_codec(), timeouts=TIMEOUTS)
    try:
        with pytest.raises(EnvErrorGroup) as group:
            envs.reset(seed=0)
        # which of the two sessions got the slot is up to the server
        assert len(group.value.errors) == 1
        assert isinstance(next(iter(group.value.errors.values())), CapacityError)
    finally:
        envs.close()


def test_factory_error(shared_app):
    app = shared_app("broken")
    env = counter_env(app.url)
    try:
        with pytest.raises(FactoryError, match="failed to create instance") as failed:
            env.reset()  # OpenEnv's message names the factory, not the cause
        assert failed.value.session_closed is True
        assert failed.value.details["factory_name"] == "BrokenCounter"
    finally:
        env.close()


def test_counter_vector(counter_app, protocol):
    envs = OpenEnvVectorEnv(
        num_envs=3,
        base_url=counter_app.url,
        protocol=protocol,
        codec=counter_codec(),
        timeouts=TIMEOUTS,
    )
    try:
        assert envs.protocols == ("json",)
        runs = expected_run(seed=10, num_envs=3, rounds=8)
        obs, infos = envs.reset(seed=10)
        assert obs.tolist() == runs[0][0]
        assert ("metadata" in infos) is WIRE_METADATA
        for expected_obs, expected_rewards, expected_dones in runs[1:]:
            obs, rewards, terminations, truncations, infos = envs.step(np.ones(3, np.int64))
            assert obs.tolist() == expected_obs
            assert rewards.tolist() == expected_rewards
            assert terminations.tolist() == expected_dones
            assert not truncations.any()
    finally:
        envs.close()


def test_generic_id_reads_the_openenv_schema(counter_app, protocol):
    """``openenv/Generic-v0``: spaces from the OpenEnv app's ``GET /schema``, no codec."""
    env = gymnasium.make("openenv/Generic-v0", base_url=counter_app.url, protocol=protocol)
    try:
        assert env.unwrapped.protocol == "json"
        assert env.action_space == spaces.Discrete(5, start=-2)  # delta: Field(ge=-2, le=2)
        assert set(env.observation_space.spaces) == {"count", "target"}
        obs, info = env.reset(seed=5)
        target = target_for(5)
        assert (int(obs["count"]), int(obs["target"])) == (0, target)
        assert info == ({"metadata": {"seed": 5}} if WIRE_METADATA else {})
        for k in range(1, target + 1):
            obs, reward, terminated, truncated, info = env.step(1)
            assert int(obs["count"]) == k
            assert (reward, terminated, truncated) == (float(k == target), k == target, False)
    finally:
        env.close()


def test_generic_id_vector(counter_app, protocol):
    envs = gymnasium.make_vec(
        "openenv/Generic-v0", num_envs=3, base_url=counter_app.url, protocol=protocol
    )
    try:
        assert envs.unwrapped.protocols == ("json",)
        runs = expected_run(seed=40, num_envs=3, rounds=6)
        obs, _ = envs.reset(seed=40)
        assert np.stack([obs["count"], obs["target"]], 1).tolist() == runs[0][0]
        for expected_obs, expected_rewards, expected_dones in runs[1:]:
            obs, rewards, terminations, _, _ = envs.step(np.ones(3, np.int64))
            assert np.stack([obs["count"], obs["target"]], 1).tolist() == expected_obs
            assert rewards.tolist() == expected_rewards
            assert terminations.tolist() == expected_dones
    finally:
        envs.close()


# ------------------------------------------------- our env logic inside OpenEnv apps


def test_echo(shared_app, protocol):
    app = shared_app("echo")
    env = gymnasium.make("openenv/Echo-v0", base_url=app.url, protocol=protocol)
    try:
        assert env.unwrapped.protocol == "json"
        obs, info = env.reset(seed=1, options={"episode_id": "e-1"})
        assert obs == "Echo environment ready!"
        obs, reward, terminated, truncated, info = env.step("hello")
        assert (obs, terminated, truncated) == ("hello", False, False)
        assert reward == pytest.approx(0.5)
        assert info["message_length"] == 5
        expected = {"original_message": "hello", "step": 1}
        assert info.get("metadata") == (expected if WIRE_METADATA else None)
        assert env.unwrapped.state() == {"episode_id": "e-1", "step_count": 1}
        with pytest.raises(ServerValidationError):
            env.unwrapped.session.step({"message": ""})  # min_length=1, checked by the server
        with pytest.raises(InvalidActionError):
            env.step("")  # and by our action space
        assert env.step("again")[0] == "again"
        assert env.unwrapped.state()["step_count"] == 2
    finally:
        env.close()


def test_wordle(shared_app, protocol):
    app = shared_app("wordle")
    local = WordleEnvironment()
    local_obs = local.reset(seed=7)
    secret = local.state.raw_state["game_state"]["secret_word"]
    env = gymnasium.make("openenv/Wordle-v0", base_url=app.url, protocol=protocol)
    try:
        obs, _ = env.reset(seed=7)
        assert obs == codec_for("wordle").decode_observation(local_obs.model_dump(mode="json"))
        state = env.unwrapped.state()
        assert state["raw_state"]["game_state"]["secret_word"] == secret
        assert state["env_id"] == "Wordle-v0"
        _, reward, terminated, truncated, _ = env.step(f"[{secret}]")
        assert (reward, terminated, truncated) == (1.0, True, False)
    finally:
        env.close()


def test_catch(shared_app, protocol):
    app = shared_app("catch")
    local = CatchEnvironment()
    expected = local.reset(seed=3)
    env = OpenEnvEnv("catch", base_url=app.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        obs, info = env.reset(seed=3)
        np.testing.assert_array_equal(obs, np.asarray(expected.info_state, np.float32))
        assert info["game_phase"] == "initial"
        with pytest.raises(ExecutionError, match="illegal action_id"):
            env.session.step({"action_id": 7})
        for move in [0, 2, 1, 1, 0, 2, 1, 2, 0]:
            expected = local.step(CatchAction(action_id=move))
            obs, reward, terminated, _, info = env.step(move)
            np.testing.assert_array_equal(obs, np.asarray(expected.info_state, np.float32))
            assert (reward, terminated) == (expected.reward, expected.done)
        assert terminated
        assert reward in (-1.0, 1.0)
        assert env.state()["step_count"] == 9
    finally:
        env.close()


def test_catch_vector(shared_app, protocol):
    app = shared_app("catch")
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=2, base_url=app.url, protocol=protocol)
    try:
        assert envs.unwrapped.protocols == ("json",)
        locals_ = [CatchEnvironment(), CatchEnvironment()]
        obs, _ = envs.reset(seed=[3, 4])
        for row, local, seed in zip(obs, locals_, [3, 4], strict=True):
            np.testing.assert_array_equal(row, np.asarray(local.reset(seed=seed).info_state))
        obs, _, terminations, _, _ = envs.step(np.array([0, 2]))
        for row, local, move in zip(obs, locals_, [0, 2], strict=True):
            expected = local.step(CatchAction(action_id=move))
            np.testing.assert_array_equal(row, np.asarray(expected.info_state))
        assert not terminations.any()
    finally:
        envs.close()
