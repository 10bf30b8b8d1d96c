"""The ``seed`` check compares a reset and a step across two sessions (docs/check.md, 7).

Against a real server that ignores seeds (:class:`~seedless_envs.SeedlessWordleEnv` on
our ``EnvServer``: a constant reset observation, a secret the seed does not choose) the
check must WARN; against ``openenv-gym serve wordle``, whose seed picks the secret, it
must PASS with a guess whose feedback depends on the secret. Gymnasium's ``check_env``
meets the same servers through ``make(..., base_url=...)``.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import pytest
from check_fake_servers import our_server
from gymnasium.utils.env_checker import check_env
from seedless_envs import PROMPT, OverAtResetEnv, SeedlessWordleEnv, serve

import openenv_gym  # noqa: F401  (registers the ids)
from openenv_gym.check import Status, check_server

pytestmark = pytest.mark.integration

GUESS = {"message": "[crane]"}


@pytest.mark.parametrize("action", [None, GUESS], ids=["action-from-schema", "given-guess"])
def test_a_server_that_ignores_seeds_warns(action):
    with serve(SeedlessWordleEnv) as url:
        report = check_server(url, action=action)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    shown = '{"message": "a"}' if action is None else '{"message": "[crane]"}'
    assert seed.detail == (
        f"reset(seed=1) gave the same observation on two fresh sessions, but step {shown} "
        "then gave different observations (first difference: feedback): the seed does not "
        "fix the episode (allowed by OpenEnv)"
    )
    assert seed.info == {"compared": ["reset", "step"], "deterministic": False}
    assert report["session"].status is Status.PASS  # nothing else is wrong with it


def test_the_seedless_env_is_what_the_check_says():
    """The premise: same seed, same reset observation, yet different secrets."""
    with serve(SeedlessWordleEnv) as url:
        envs = [gymnasium.make("openenv/Generic-v0", base_url=url) for _ in range(2)]
        try:
            resets = [env.reset(seed=1)[0] for env in envs]
            steps = [env.step("crane")[0] for env in envs]
        finally:
            for env in envs:
                env.close()
    assert resets[0] == resets[1] == {"feedback": PROMPT}
    assert steps[0] != steps[1]


def test_our_wordle_passes_with_a_guess_that_depends_on_the_secret():
    with our_server("wordle") as url:
        report = check_server(url, action=GUESS)
    seed = report["seed"]
    assert seed.status is Status.PASS, report.render()
    assert seed.detail == (
        'reset(seed=1) then step {"message": "[crane]"} gave the same observations, rewards '
        "and done on two fresh sessions"
    )
    assert seed.info == {"compared": ["reset", "step"], "deterministic": True}


def test_one_session_at_a_time_fits_a_server_with_room_for_one():
    with our_server("wordle", "--max-sessions", "1") as url:
        report = check_server(url, action=GUESS)
    assert report["capacity"].info == {"capacity": 1}
    assert report["seed"].status is Status.PASS, report.render()


def test_without_a_step_the_reset_alone_only_warns():
    with serve(SeedlessWordleEnv) as url:
        report = check_server(url, action={"wrong": "field"})  # every step is refused
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert seed.detail.startswith(
        "reset(seed=1) gave the same observation on two fresh sessions, but no step was "
        'compared (step {"wrong": "field"} was answered with error VALIDATION_ERROR'
    )
    assert seed.info == {"compared": ["reset"], "deterministic": None}


def test_an_episode_over_at_reset_passes_on_its_reset():
    with serve(OverAtResetEnv) as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.PASS, report.render()
    assert seed.detail == (
        "reset(seed=1) gave the same observation on two fresh sessions (the episode ended at reset)"
    )
    assert seed.info == {"compared": ["reset"], "deterministic": True}


def test_check_env_on_a_seed_ignoring_server_trusts_the_spec():
    """``base_url=`` makes the env's spec nondeterministic, so ``check_env`` passes; with
    the flag forced off, Gymnasium's determinism check catches this very server."""
    with serve(SeedlessWordleEnv) as url:
        env = gymnasium.make("openenv/Generic-v0", base_url=url, disable_env_checker=True)
        try:
            assert env.spec is not None
            assert env.spec.nondeterministic is True
            check_env(env.unwrapped, skip_render_check=False)
            # what a per-id nondeterministic=False would claim (the setter would mark it)
            env.unwrapped._spec = dataclasses.replace(env.unwrapped.spec, nondeterministic=False)
            with pytest.raises(AssertionError, match="Deterministic step observations"):
                check_env(env.unwrapped, skip_render_check=True, skip_close_check=True)
        finally:
            env.close()
