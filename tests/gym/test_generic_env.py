"""openenv/Generic-v0: spaces from a real server's ``GET /schema``, single and vector."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym import ConfigurationError
from openenv_gym.assemble import fetch_schema
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import ExecutionError
from openenv_gym.providers import LocalProvider
from openenv_gym.spaces import codec_for
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

CATCH_ACTION = {"action_id": spaces.Discrete(3)}


@pytest.fixture(scope="module", autouse=True)
def _token() -> Iterator[None]:
    """Our local servers demand a token: these tests reach them by URL, sending it from
    ``OPENENV_GYM_TOKEN`` (which the local provider gives its servers too)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENENV_GYM_TOKEN", "gym-tests")
        yield


@pytest.fixture(scope="module")
def urls() -> Iterator[dict[str, str]]:
    """One running local server per built-in environment."""
    providers = {name: LocalProvider(name) for name in ("echo", "catch", "wordle")}
    try:
        yield {name: provider.start()[0] for name, provider in providers.items()}
    finally:
        for provider in providers.values():
            provider.close()


def test_fetch_schema(urls: dict[str, str]) -> None:
    schema = fetch_schema(urls["echo"])
    assert schema["action"]["required"] == ["message"]
    ws_url = "ws://" + urls["echo"].split("://", 1)[1]
    assert fetch_schema(ws_url) == schema
    with pytest.raises(ConfigurationError, match="answered 404"):
        fetch_schema(urls["echo"] + "/nowhere")


def test_generic_over_echo(urls: dict[str, str]) -> None:
    env = gymnasium.make("openenv/Generic-v0", base_url=urls["echo"], render_mode="ansi")
    try:
        assert isinstance(env.action_space, spaces.Text)
        obs, info = env.reset(seed=0)
        assert obs["echoed_message"] == "Echo environment ready!"
        assert obs["message_length"] == 0
        assert "echoed_message" not in info
        obs, reward, terminated, truncated, info = env.step("hello")
        assert obs["echoed_message"] == "hello"
        assert obs["message_length"] == 5
        assert reward == pytest.approx(0.5)
        assert (terminated, truncated) == (False, False)
        assert info == {"metadata": {"original_message": "hello", "step": 1}}
        assert env.render() == "echoed_message: hello\nmessage_length: 5"
    finally:
        env.close()


def test_generic_over_wordle_keeps_free_form_fields_in_info(urls: dict[str, str]) -> None:
    env = gymnasium.make("openenv/Generic-v0", base_url=urls["wordle"])
    try:
        obs, info = env.reset(seed=1)
        assert obs["prompt"].startswith("You are Playing Wordle")
        assert set(info) <= {"info", "metadata"}
        obs, _, _, _, info = env.step("[crane]")
        assert obs["messages"]
        assert "info" in info
        assert env.observation_space.contains(obs)
    finally:
        env.close()


def test_generic_over_catch_schema_action(urls: dict[str, str]) -> None:
    env = OpenEnvEnv("generic", base_url=urls["catch"])
    try:
        assert isinstance(env.action_space, spaces.Box)  # the schema says only "integer"
        obs, _ = env.reset(seed=2)
        assert len(obs["info_state"]) == 50
        obs, *_ = env.step(np.array(1))
        assert env.observation_space.contains(obs)
        with pytest.raises(ExecutionError, match="illegal action_id 7"):  # the server refuses it
            env.step(np.array(7))
        env.step(np.array(2))  # the session survives
    finally:
        env.close()


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("catch", {"action_fields": CATCH_ACTION}),
        (
            "catch",
            {
                "action_fields": CATCH_ACTION,
                "observation_fields": {"info_state": spaces.Box(0.0, 1.0, (50,), np.float32)},
            },
        ),
        ("echo", {}),
    ],
)
def test_check_env_passes(urls: dict[str, str], name: str, fields: dict[str, object]) -> None:
    env = gymnasium.make(
        "openenv/Generic-v0", base_url=urls[name], disable_env_checker=True, **fields
    )
    try:
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_generic_same_steps_as_catch_codec(urls: dict[str, str]) -> None:
    generic = OpenEnvEnv(
        "generic",
        base_url=urls["catch"],
        action_fields=CATCH_ACTION,
        observation_fields={"info_state": codec_for("catch").observation_space},
    )
    known = OpenEnvEnv("catch", base_url=urls["catch"])
    try:
        a, _ = generic.reset(seed=5)
        b, _ = known.reset(seed=5)
        assert np.array_equal(a["info_state"], b)
        for action in (0, 2, 1, 1):
            a, ra, ta, _, _ = generic.step(action)
            b, rb, tb, _, _ = known.step(action)
            assert np.array_equal(a["info_state"], b)
            assert (ra, ta) == (rb, tb)
    finally:
        generic.close()
        known.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_make_vec_generic_over_catch(urls: dict[str, str], protocol: str) -> None:
    envs = gymnasium.make_vec(
        "openenv/Generic-v0",
        num_envs=3,
        base_url=urls["catch"],
        protocol=protocol,
        action_fields=CATCH_ACTION,
    )
    try:
        assert envs.unwrapped.protocols == (protocol,)
        obs, infos = envs.reset(seed=0)
        assert envs.observation_space.contains(obs)
        assert obs["current_player_id"].shape == (3,)
        assert obs["game_phase"] == ("initial",) * 3
        assert "legal_actions" not in infos
        for _ in range(12):
            obs, _, terminations, _, infos = envs.step(np.array([0, 1, 2]))
            assert envs.observation_space.contains(obs)
        assert terminations.dtype == np.bool_
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_make_vec_generic_over_echo(urls: dict[str, str], protocol: str) -> None:
    envs = gymnasium.make_vec(
        "openenv/Generic-v0", num_envs=2, base_url=urls["echo"], protocol=protocol
    )
    try:
        envs.reset()
        obs, rewards, _, _, infos = envs.step(("hi", "there"))
        assert obs["echoed_message"] == ("hi", "there")
        assert obs["message_length"].tolist() == [2, 5]
        assert rewards.tolist() == pytest.approx([0.2, 0.5])
        assert "echoed_message" not in infos
    finally:
        envs.close()


def test_local_server_by_class_name() -> None:
    env = OpenEnvEnv("generic", server="openenv_gym_servers.echo:EchoEnvironment")
    try:
        env.reset()
        obs, *_ = env.step("local")
        assert obs["echoed_message"] == "local"
    finally:
        env.close()
    envs = OpenEnvVectorEnv(
        "generic",
        num_envs=2,
        server="openenv_gym_servers.catch:CatchEnvironment",
        num_servers=2,
        action_fields=CATCH_ACTION,
    )
    try:
        assert len(envs.base_urls) == 2
        envs.reset(seed=1)
        envs.step(np.array([1, 1]))
    finally:
        envs.close()


def test_configuration_errors(urls: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="needs a server"):
        gymnasium.make("openenv/Generic-v0")
    with pytest.raises(ConfigurationError, match="needs a server"):
        gymnasium.make_vec("openenv/Generic-v0", num_envs=2)
    with pytest.raises(ConfigurationError, match="excludes base_url"):
        OpenEnvEnv("generic", base_url=urls["echo"], server="x:Y")
    with pytest.raises(ConfigurationError, match="do not apply"):
        OpenEnvEnv("catch", base_url=urls["catch"], action_fields=CATCH_ACTION)
    with pytest.raises(ConfigurationError, match="do not apply"):
        OpenEnvVectorEnv(
            "generic",
            base_url=urls["catch"],
            codec=codec_for("catch"),
            observation_fields={"game_phase": None},
        )
    with pytest.raises(ConfigurationError, match="not fields of the server's action"):
        OpenEnvEnv("generic", base_url=urls["catch"], action_fields={"move": None})


def test_codec_overrides_the_schema(urls: dict[str, str]) -> None:
    env = OpenEnvEnv("generic", base_url=urls["catch"], codec=codec_for("catch"))
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (50,)
    finally:
        env.close()
