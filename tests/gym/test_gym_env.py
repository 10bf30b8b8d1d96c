"""OpenEnvEnv over real local server processes: the Gymnasium contract and bad input."""

from __future__ import annotations

import os
import signal

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import openenv_gym
from openenv_gym import InvalidActionError, TransportError, UsageError
from openenv_gym.env import OpenEnvEnv
from openenv_gym.spaces import Codec, codec_for

pytestmark = pytest.mark.integration

IDS = ["openenv/Wordle-v0", "openenv/Echo-v0", "openenv/Catch-v0"]


def secret(env: gymnasium.Env) -> str:
    return env.unwrapped.state()["raw_state"]["game_state"]["secret_word"]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes(env_id: str) -> None:
    env = gymnasium.make(env_id, disable_env_checker=True)
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_wordle_same_seed_same_secret_different_seeds_differ(wordle: OpenEnvEnv) -> None:
    wordle.reset(seed=7)
    first = secret(wordle)
    wordle.reset(seed=123)
    wordle.reset(seed=7)
    assert secret(wordle) == first
    secrets = set()
    for seed in range(20):
        wordle.reset(seed=seed)
        secrets.add(secret(wordle))
    assert len(secrets) > 1


def catch_episode(env: gymnasium.Env, seed: int) -> list[np.ndarray]:
    obs, _ = env.reset(seed=seed)
    frames = [obs]
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, _ = env.step(1)
        frames.append(obs)
    return frames


def test_catch_same_seed_same_episode_different_seeds_differ() -> None:
    env = gymnasium.make("openenv/Catch-v0")
    try:
        a = catch_episode(env, 3)
        b = catch_episode(env, 3)
        assert len(a) == len(b)
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
        starts = {tuple(catch_episode(env, s)[0]) for s in range(12)}
        assert len(starts) > 1
    finally:
        env.close()


def test_terminated_reward_and_info(wordle: OpenEnvEnv) -> None:
    obs, info = wordle.reset(seed=1)
    assert "You are Playing Wordle" in obs
    assert info["prompt"].startswith("You are Playing Wordle")
    word = secret(wordle)
    obs, reward, terminated, truncated, info = wordle.step(f"[{word}]")
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert isinstance(terminated, bool)
    assert isinstance(truncated, bool)
    assert info["messages"][-1]["sender_id"] != 0 or info["messages"]


def test_action_outside_space_raises_and_env_keeps_stepping() -> None:
    env = gymnasium.make("openenv/Catch-v0")
    try:
        env.reset(seed=0)
        with pytest.raises(InvalidActionError):
            env.unwrapped.step(7)
        obs, *_ = env.unwrapped.step(1)
        assert obs.shape == (50,)
    finally:
        env.close()


def test_action_rejected_by_server_raises_and_env_keeps_stepping() -> None:
    base = codec_for("echo")
    loose = Codec(
        "echo",
        base.observation_space,
        gymnasium.spaces.Text(16, min_length=0),  # admits "", which the server refuses
        base.encode_action,
        base.decode_observation,
        base.render,
    )
    env = OpenEnvEnv("echo", codec=loose)
    try:
        env.reset()
        with pytest.raises(InvalidActionError) as caught:
            env.step("")
        assert isinstance(caught.value, openenv_gym.ServerError)
        assert caught.value.code == "VALIDATION_ERROR"
        obs, reward, *_ = env.step("abc")
        assert obs == "abc"
        assert reward == pytest.approx(0.3)
    finally:
        env.close()


def test_step_before_reset_and_after_episode_end_raise(wordle: OpenEnvEnv) -> None:
    with pytest.raises(UsageError):
        wordle.step("[crane]")
    wordle.reset(seed=2)
    wordle.step(f"[{secret(wordle)}]")
    with pytest.raises(UsageError, match="reset"):
        wordle.step("[crane]")


def test_max_episode_steps_truncates() -> None:
    env = OpenEnvEnv("echo", max_episode_steps=3)
    try:
        env.reset()
        flags = [env.step("x")[2:4] for _ in range(3)]
        assert flags == [(False, False), (False, False), (False, True)]
        with pytest.raises(UsageError):
            env.step("x")
    finally:
        env.close()


def test_make_passes_max_episode_steps_through_time_limit() -> None:
    env = gymnasium.make("openenv/Echo-v0", max_episode_steps=2)
    try:
        env.reset()
        assert env.step("a")[3] is False
        assert env.step("b")[3] is True
    finally:
        env.close()


def test_render_ansi() -> None:
    env = gymnasium.make("openenv/Catch-v0", render_mode="ansi")
    try:
        env.reset(seed=0)
        text = env.render()
        assert isinstance(text, str)
        rows = text.splitlines()
        assert len(rows) == 10
        assert all(len(r) == 5 for r in rows)
        assert text.count("#") == 2
    finally:
        env.close()


def test_close_is_idempotent_and_stops_the_server() -> None:
    psutil = pytest.importorskip("psutil")
    env = gymnasium.make("openenv/Echo-v0")
    pids = env.unwrapped._provider.pids
    assert pids
    env.close()
    env.close()
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with pytest.raises(UsageError):
        env.unwrapped.state()


def test_server_killed_mid_episode_gives_typed_error() -> None:
    env = OpenEnvEnv("wordle", timeouts={"step": 5.0})
    try:
        env.reset(seed=1)
        (pid,) = env._provider.pids
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(TransportError):
            env.step("[crane]")
        with pytest.raises(UsageError):
            env.step("[crane]")
    finally:
        env.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_both_protocols_give_the_same_episode(protocol: str) -> None:
    env = OpenEnvEnv("wordle", protocol=protocol)
    try:
        assert env.protocol == protocol
        _obs, _ = env.reset(seed=5)
        obs2, reward, terminated, _, _ = env.step("[crane]")
        assert "Feedback" in obs2
        assert reward == 0.0
        assert terminated is False
    finally:
        env.close()


def test_bad_configuration_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown environment"):
        OpenEnvEnv("nope")
    with pytest.raises(ValueError, match="render_mode"):
        OpenEnvEnv("echo", render_mode="human")
    with pytest.raises(ValueError, match="provider"):
        OpenEnvEnv("echo", provider="teleport")


def test_set_up_helpers_moved_from_env_warn_and_still_work() -> None:
    import openenv_gym.assemble
    import openenv_gym.env

    for name in ("fetch_schema", "list_tools"):
        with pytest.warns(DeprecationWarning, match=f"openenv_gym.env.{name} moved to"):
            moved = getattr(openenv_gym.env, name)
        assert moved is getattr(openenv_gym.assemble, name)
    with pytest.raises(AttributeError, match="no attribute 'bind_schema'"):
        _ = openenv_gym.env.bind_schema
