"""The ``seed`` check (docs/check.md, 7): same seed, same replies; another seed, others.

Against real servers served in-process (:mod:`seedless_envs`): one that ignores seeds whose
reset always looks alike (only a step shows the secret), our Wordle with its seed ignored
(an invalid move looks alike whatever the secret: only a valid guess tells), a finqa-like
env whose random question lives in the reset's ``metadata``, and ``openenv-gym serve
wordle``, whose seed picks the secret. When no reply changes with the seed the check
cannot tell, and says so (WARN), never PASS. Gymnasium's ``check_env`` meets the same
servers through ``make(..., base_url=...)``.
"""

from __future__ import annotations

import dataclasses

import gymnasium
import pytest
from check_fake_servers import our_server
from gymnasium.utils.env_checker import check_env
from seedless_envs import (
    PROMPT,
    OverAtResetEnv,
    QuestionInMetadataEnv,
    SeedIgnoringWordle,
    SeedlessWordleEnv,
    serve,
)

import openenv_gym  # noqa: F401  (registers the ids)
from openenv_gym.check import Status, check_server

pytestmark = pytest.mark.integration

GUESS = {"message": "[crane]"}
NOT_REPRODUCED = "gave different replies on fresh sessions seeded alike (first difference: "


@pytest.mark.parametrize("action", [None, GUESS], ids=["action-from-schema", "given-guess"])
def test_a_server_that_ignores_seeds_warns(action):
    with serve(SeedlessWordleEnv) as url:
        report = check_server(url, action=action)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    shown = '{"message": "a"}' if action is None else '{"message": "[crane]"}'
    assert seed.detail == (
        f"reset(seed=1) then step {shown} {NOT_REPRODUCED}step: feedback): the seed does not "
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


def test_an_invalid_default_move_does_not_pass_a_seed_ignoring_wordle():
    """The schema's action ``{"message": "a"}`` is an invalid move: its reply is the same
    whatever the secret. The check tries a valid guess (Wordle's example action) next,
    which shows the seed is ignored (a false PASS before)."""
    with serve(SeedIgnoringWordle) as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert seed.detail.startswith(
        f'reset(seed=1) then step {{"message": "[crane]"}} {NOT_REPRODUCED}step: '
    ), seed.detail
    assert seed.info["deterministic"] is False


def test_a_question_in_the_reset_metadata_is_compared():
    """A finqa-like env: the question (in metadata) differs on sessions seeded alike."""
    with serve(QuestionInMetadataEnv) as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert f"{NOT_REPRODUCED}reset: metadata" in seed.detail, seed.detail
    assert "question" in seed.detail
    assert seed.info["deterministic"] is False


def test_our_wordle_passes_with_its_example_guess():
    """No action given: the schema's invalid ``a`` tells nothing, Wordle's guess does."""
    with our_server("wordle") as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.PASS, report.render()
    assert seed.detail.startswith(
        'reset(seed=1) then step {"message": "[crane]"} gave the same observations, metadata, '
        "rewards and done on 3 fresh sessions, and seed 2 gave others (step: "
    ), seed.detail
    assert seed.info == {"compared": ["reset", "step"], "deterministic": True}


def test_one_session_at_a_time_fits_a_server_with_room_for_one():
    with our_server("wordle", "--max-sessions", "1") as url:
        report = check_server(url, action=GUESS)
    assert report["capacity"].info == {"capacity": 1}
    assert report["seed"].status is Status.PASS, report.render()


def test_nothing_random_cannot_tell():
    """Echo has nothing random: the same replies whatever the seed, so no PASS."""
    with our_server("echo") as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert seed.detail.startswith(
        'could not tell whether the seed is used: reset(seed=1) then step {"message": "a"} '
        "gave the same replies on 3 fresh sessions, but so did seeds 2 and 3 (tried: "
        '{"message": "a"}; {"message": "[crane]"}): '
    ), seed.detail
    assert seed.info == {"compared": ["reset", "step"], "deterministic": None}


def test_without_a_step_the_reset_alone_cannot_tell():
    with serve(SeedlessWordleEnv) as url:
        report = check_server(url, action={"wrong": "field"})  # every step is refused
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert seed.detail.startswith(
        "could not tell whether the seed is used: reset(seed=1) gave the same replies on 3 "
        'fresh sessions, but so did seeds 2 and 3 (tried: {"wrong": "field"} (step '
        '{"wrong": "field"} was answered with error VALIDATION_ERROR'
    ), seed.detail
    assert seed.info == {"compared": ["reset"], "deterministic": None}


def test_an_episode_over_at_reset_cannot_tell():
    with serve(OverAtResetEnv) as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.WARN, report.render()
    assert seed.detail.startswith(
        "could not tell whether the seed is used: reset(seed=1) gave the same replies"
    ), seed.detail
    assert seed.info == {"compared": ["reset"], "deterministic": None}


def test_a_reset_that_shows_the_seed_passes_on_it():
    with our_server("catch") as url:
        report = check_server(url)
    seed = report["seed"]
    assert seed.status is Status.PASS, report.render()
    assert "seed 2 gave others (reset: " in seed.detail or "seed 3 gave others" in seed.detail


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
