"""What ``env.spec.nondeterministic`` says (registry.py, issue 12), and Gymnasium's error
types from the single env.

Wordle, Echo and Catch are registered deterministic because our servers replay an episode
from its seed, and ``check_env`` (which then runs its determinism checks) passes on them;
Generic-v0 is registered nondeterministic. Gymnasium's flag is per id, so an env made with
``base_url=`` carries a spec copy marked nondeterministic: its server may ignore seeds.
"""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium
import pytest
from gymnasium.error import ClosedEnvironmentError, ResetNeeded
from gymnasium.utils.env_checker import check_env

import openenv_gym  # noqa: F401  (registers the ids)
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    AuthenticationError,
    ConfigurationError,
    EnvClosedError,
    ResetNeededError,
    UsageError,
)
from openenv_gym.providers import LocalProvider

pytestmark = pytest.mark.integration

SHIPPED = {"openenv/Wordle-v0": "wordle", "openenv/Echo-v0": "echo", "openenv/Catch-v0": "catch"}


@pytest.fixture(scope="module", autouse=True)
def _token() -> Iterator[None]:
    """Our local servers demand a token: these tests reach them by URL, sending it from
    ``OPENENV_GYM_TOKEN`` (which the local provider gives its servers too)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENENV_GYM_TOKEN", "gym-tests")
        yield


@pytest.fixture(scope="module")
def catch_url() -> Iterator[str]:
    """One of our own Catch servers, reached by URL."""
    provider = LocalProvider("catch")
    try:
        yield provider.start()[0]
    finally:
        provider.close()


def test_registered_flags() -> None:
    for env_id in SHIPPED:
        assert gymnasium.spec(env_id).nondeterministic is False, env_id
    assert gymnasium.spec("openenv/Generic-v0").nondeterministic is True


@pytest.mark.parametrize("env_id", list(SHIPPED))
def test_check_env_runs_the_determinism_checks_and_passes(env_id: str) -> None:
    env = gymnasium.make(env_id, disable_env_checker=True)
    try:
        assert env.spec is not None
        assert env.spec.nondeterministic is False  # so check_env compares steps, too
        assert env.unwrapped.spec is not None
        assert env.unwrapped.spec.nondeterministic is False
        check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()


def test_base_url_marks_the_env_spec_nondeterministic(catch_url: str) -> None:
    env = gymnasium.make("openenv/Catch-v0", base_url=catch_url, disable_env_checker=True)
    try:
        assert env.spec is not None
        assert env.spec.nondeterministic is True
        assert env.spec.kwargs["base_url"] == catch_url
        assert gymnasium.spec("openenv/Catch-v0").nondeterministic is False  # the id keeps it
        check_env(env.unwrapped, skip_render_check=False)  # its re-made envs are marked too
    finally:
        env.close()


def test_make_vec_specs(catch_url: str) -> None:
    ours = gymnasium.make_vec("openenv/Catch-v0", num_envs=2)
    remote = gymnasium.make_vec("openenv/Catch-v0", num_envs=2, base_url=catch_url)
    try:
        assert ours.spec is not None
        assert ours.spec.nondeterministic is False
        assert remote.spec is not None
        assert remote.spec.nondeterministic is True
        assert remote.spec.kwargs["num_envs"] == 2
    finally:
        ours.close()
        remote.close()


@pytest.mark.parametrize(
    ("kwargs", "nondeterministic"),
    [
        ({}, False),
        ({"provider": "local"}, False),
        ({"server": "openenv_gym_servers.catch.environment:CatchEnvironment"}, True),
    ],
)
def test_what_counts_as_our_server(kwargs: dict[str, str], nondeterministic: bool) -> None:
    env = gymnasium.make("openenv/Catch-v0", disable_env_checker=True, **kwargs)
    try:
        assert env.spec is not None
        assert env.spec.nondeterministic is nondeterministic
    finally:
        env.close()


def test_the_single_env_after_close_raises_closed_environment_error() -> None:
    env = gymnasium.make("openenv/Catch-v0")
    env.reset(seed=0)
    env.close()
    for call in (lambda: env.step(1), lambda: env.reset(seed=0), env.unwrapped.state):
        with pytest.raises(ClosedEnvironmentError) as caught:
            call()
        assert isinstance(caught.value, EnvClosedError)
        assert isinstance(caught.value, UsageError)
    env.close()


def test_a_closed_env_says_closed_even_when_its_episode_was_over() -> None:
    env = OpenEnvEnv("catch", max_episode_steps=1)
    env.reset(seed=0)
    env.step(1)  # truncated: the episode is over
    env.close()
    with pytest.raises(ClosedEnvironmentError):
        env.step(1)


def test_a_made_env_closed_before_any_reset_says_closed() -> None:
    env = gymnasium.make("openenv/Catch-v0")
    env.close()
    for call in (lambda: env.step(1), lambda: env.reset(seed=0), env.unwrapped.state):
        with pytest.raises(EnvClosedError):
            call()  # not Gymnasium's "Cannot call env.step() before calling env.reset()"


def test_step_before_reset_is_gymnasiums_reset_needed() -> None:
    env = gymnasium.make("openenv/Catch-v0")
    try:
        with pytest.raises(ResetNeeded) as caught:
            env.step(1)
        assert isinstance(caught.value, ResetNeededError)
        assert isinstance(caught.value, UsageError)
        env.reset(seed=0)
        env.step(1)
    finally:
        env.close()


def test_make_sends_token_and_reads_openenv_gym_token(
    catch_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENENV_GYM_TOKEN")  # the module's servers demand "gym-tests"
    with pytest.raises(AuthenticationError, match="401"):  # GET /schema, first
        gymnasium.make("openenv/Catch-v0", base_url=catch_url)
    with pytest.raises(AuthenticationError):
        gymnasium.make("openenv/Catch-v0", base_url=catch_url, token="wrong")
    env = gymnasium.make("openenv/Catch-v0", base_url=catch_url, token="gym-tests")
    env.reset(seed=0)
    env.close()
    envs = gymnasium.make_vec(
        "openenv/Catch-v0", num_envs=2, base_url=[catch_url, catch_url], token=["gym-tests"] * 2
    )
    envs.reset(seed=0)
    envs.close()
    with pytest.raises(ConfigurationError, match="one per base_url"):
        gymnasium.make_vec("openenv/Catch-v0", num_envs=2, base_url=catch_url, token=["a", "b"])
