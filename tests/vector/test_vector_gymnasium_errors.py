"""Gymnasium's own vector-env error expectations, held by ``make_vec("openenv/Catch-v0", 8)``.

Ported from Gymnasium's ``tests/vector/test_async_vector_env.py`` (closed env, calls out
of order, ``step_wait`` timeout) and ``tests/vector/test_vector_env.py`` (action count,
random seeding), written against our vector env on a real local Catch server: code that
catches Gymnasium's error types catches ours. Each error is also checked to stay an
:class:`~openenv_gym.OpenEnvGymError` (the one root) of the documented class.

The timeout needs a step that cannot finish in time: the server process is stopped
(``SIGSTOP``) while the step is in flight, then continued, and the same step collected.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator

import gymnasium
import numpy as np
import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.utils import seeding
from gymnasium.vector import SyncVectorEnv

import openenv_gym  # noqa: F401  (registers the ids)
from openenv_gym.exceptions import (
    ActionBatchError,
    ConfigurationError,
    EnvClosedError,
    NoPendingCallError,
    OpenEnvGymError,
    PendingCallError,
    UsageError,
    WaitTimeoutError,
)
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

NUM_ENVS = 8


@pytest.fixture
def envs() -> Iterator[OpenEnvVectorEnv]:
    """``gymnasium.make_vec("openenv/Catch-v0", num_envs=8)``: it starts a local server."""
    made = gymnasium.make_vec("openenv/Catch-v0", num_envs=NUM_ENVS)
    assert isinstance(made, OpenEnvVectorEnv)
    yield made
    made.close()


def server_pid(envs: OpenEnvVectorEnv) -> int:
    (pid,) = envs._provider.pids  # type: ignore[attr-defined]
    return int(pid)


# ------------------------------------------------------------------ closed


def test_calls_after_close_raise_closed_environment_error(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_already_closed_async_vector_env``, for every call."""
    envs.reset(seed=0)
    actions = envs.action_space.sample()
    envs.close()
    calls: dict[str, Callable[[], object]] = {
        "reset": lambda: envs.reset(),
        "step": lambda: envs.step(actions),
        "step_async": lambda: envs.step_async(actions),
        "step_wait": lambda: envs.step_wait(),
        "send": lambda: envs.send(actions),
        "recv": lambda: envs.recv(),
        "call": lambda: envs.call("state"),
        "get_attr": lambda: envs.get_attr("base_url"),
        "set_attr": lambda: envs.set_attr("max_episode_steps", 3),
    }
    for name, call in calls.items():
        with pytest.raises(ClosedEnvironmentError) as caught:
            call()
        assert type(caught.value) is EnvClosedError, name
        assert isinstance(caught.value, UsageError | OpenEnvGymError), name
    envs.close()  # still idempotent


def test_close_from_another_thread_ends_a_waiting_step(envs: OpenEnvVectorEnv) -> None:
    envs.reset(seed=0)
    pid = server_pid(envs)
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            envs.step_wait()
        except BaseException as exc:  # handed to the test thread
            raised.append(exc)

    os.kill(pid, signal.SIGSTOP)  # the step cannot finish until the server continues
    try:
        envs.step_async(envs.action_space.sample())
        waiter = threading.Thread(target=wait)
        waiter.start()
        closer = threading.Thread(target=envs.close)
        closer.start()
        waiter.join(30)
        assert not waiter.is_alive()
    finally:
        os.kill(pid, signal.SIGCONT)
    closer.join(30)
    assert not closer.is_alive()
    assert len(raised) == 1
    assert isinstance(raised[0], ClosedEnvironmentError), repr(raised[0])


# ------------------------------------------------------------------ call order


def test_step_wait_without_step_async(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_step_out_of_order_async_vector_env``, first half."""
    with pytest.raises(NoAsyncCallError, match="step_async") as caught:
        envs.step_wait()
    assert isinstance(caught.value, NoPendingCallError)
    assert caught.value.name == "step"
    envs.reset(seed=0)
    with pytest.raises(NoAsyncCallError, match="step_async"):
        envs.step_wait()
    envs.step(envs.action_space.sample())  # nothing went wrong
    with pytest.raises(NoAsyncCallError, match="step_async"):
        envs.step_wait()
    with pytest.raises(NoAsyncCallError, match="send") as caught:
        envs.recv()
    assert caught.value.name == "send"


def test_calls_while_a_step_is_pending(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_reset_out_of_order_async_vector_env`` and
    ``test_step_out_of_order_async_vector_env``, second halves."""
    envs.reset(seed=0)
    actions = envs.action_space.sample()
    envs.step_async(actions)
    for call in (
        lambda: envs.step_async(actions),
        lambda: envs.reset(),
        lambda: envs.send(actions),
        lambda: envs.step(actions),
    ):
        with pytest.raises(AlreadyPendingCallError, match="pending") as caught:
            call()
        assert isinstance(caught.value, PendingCallError)
        assert caught.value.name == "step"
    obs, rewards, terminations, truncations, _ = envs.step_wait()  # the step is intact
    assert obs.shape == (NUM_ENVS, 50)
    assert rewards.shape == terminations.shape == truncations.shape == (NUM_ENVS,)

    envs.send(actions)
    with pytest.raises(AlreadyPendingCallError) as caught:
        envs.step_async(actions)
    assert caught.value.name == "send"
    envs.recv()


# ------------------------------------------------------------------ timeout


def test_step_wait_timeout_is_multiprocessing_timeout_error(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_step_timeout_async_vector_env``; the step then stays pending."""
    actions = np.ones(NUM_ENVS, dtype=np.int64)
    envs.reset(seed=0)
    envs.step(actions)
    pid = server_pid(envs)
    os.kill(pid, signal.SIGSTOP)
    try:
        envs.step_async(actions)
        with pytest.raises(multiprocessing.TimeoutError) as caught:
            envs.step_wait(timeout=0.2)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert isinstance(caught.value, WaitTimeoutError)
    assert isinstance(caught.value, TimeoutError)
    obs, *_ = envs.step_wait()  # the second step, neither lost nor sent twice
    envs.reset(seed=0)
    envs.step(actions)
    np.testing.assert_array_equal(obs, envs.step(actions)[0])


# ------------------------------------------------------------------ actions


def test_action_count_compatibility(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_action_count_compatibility``."""
    envs.reset(seed=0)
    correct = envs.action_space.sample()
    assert len(correct) == NUM_ENVS
    obs, rewards, terminations, truncations, _ = envs.step(correct)
    assert len(obs) == len(rewards) == len(terminations) == len(truncations) == NUM_ENVS

    with pytest.raises(ValueError) as too_few:
        envs.step(correct[: NUM_ENVS - 1])
    with pytest.raises(ValueError) as too_many:
        envs.step(np.concatenate([correct, correct[:1]]))
    with pytest.raises(TypeError) as scalar:
        envs.step(0)
    for caught in (too_few, too_many, scalar):
        assert isinstance(caught.value, ActionBatchError)
        assert isinstance(caught.value, TypeError | ValueError)
    with pytest.raises(TypeError):
        envs.step(np.int64(1))
    envs.step(correct)  # nothing was sent by the refused calls


def test_a_scalar_is_refused_with_one_sub_env_too() -> None:
    """With ``num_envs=1`` a scalar has the right count but is still not a batch."""
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=1)
    try:
        envs.reset(seed=0)
        with pytest.raises(TypeError, match="not a batch"):
            envs.step(1)
        obs, *_ = envs.step([1])
        assert obs.shape == (1, 50)
    finally:
        envs.close()


# ------------------------------------------------------------------ seeding


def test_random_seeding_basics(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_random_seeding_basics``; the seeds ``SyncVectorEnv`` reports, and
    the generators its sub-envs' ``reset(seed=...)`` make."""
    seed = 42
    envs.reset(seed=seed)
    assert envs.np_random_seed == tuple(seed + i for i in range(NUM_ENVS))
    envs.reset(seed=None)  # no seed: they stay
    assert envs.np_random_seed == tuple(seed + i for i in range(NUM_ENVS))
    envs.step(envs.action_space.sample())
    assert envs.np_random_seed == tuple(seed + i for i in range(NUM_ENVS))

    sync = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * NUM_ENVS)
    try:
        sync.reset(seed=seed)
        assert sync.np_random_seed == envs.np_random_seed
    finally:
        sync.close()
    fresh = [seeding.np_random(seed + i)[0].bit_generator.state for i in range(NUM_ENVS)]
    assert [g.bit_generator.state for g in envs.np_random] == fresh
    assert envs.get_attr("np_random_seed") == envs.np_random_seed

    seeds = [7, None, 9, None, 11, None, 13, None]
    envs.reset(seed=seeds)
    assert envs.np_random_seed == (7, 43, 9, 45, 11, 47, 13, 49)
    mask = np.zeros(NUM_ENVS, dtype=np.bool_)
    mask[1] = True
    envs.reset(seed=[0] * NUM_ENVS, options={"reset_mask": mask})
    assert envs.np_random_seed == (7, 0, 9, 45, 11, 47, 13, 49)
    first = envs.np_random[1].random()
    assert first == seeding.np_random(0)[0].random()


def test_random_seeds_set_at_retrieval(envs: OpenEnvVectorEnv) -> None:
    """Gymnasium: ``test_random_seeds_set_at_retrieval``: never seeded, each sub-env still
    has a seed of its own, drawn once."""
    seeds = envs.np_random_seed
    assert len(seeds) == NUM_ENVS
    assert len(set(seeds)) == NUM_ENVS
    assert all(isinstance(s, int) and s >= 0 for s in seeds)
    assert envs.np_random_seed == seeds


def test_a_negative_seed_is_refused_before_anything_is_sent(envs: OpenEnvVectorEnv) -> None:
    envs.reset(seed=5)
    # one seed rule for every env (issue 25): the message names the position, seed[3]
    with pytest.raises(ConfigurationError, match=r"seed\[3\] must be a non-negative"):
        envs.reset(seed=[0, 1, 2, -1, 4, 5, 6, 7])
    assert envs.np_random_seed == tuple(5 + i for i in range(NUM_ENVS))
