"""After a step timeout the env recovers or says it is broken; close() never hangs (issue 22, 5).

Real local servers of the counter env of tests/vector, one of them frozen with SIGSTOP past
the step timeout, then resumed with SIGCONT, as the issue's attack did:

* ``on_server_loss="restart"``: the step goes on, the sub-envs of the frozen server
  ``truncated`` (their connection was replaced), the others untouched; later steps work;
* ``on_server_loss="raise"``: the step raises the timeout, and every later call says the
  env is broken and must be closed (a ``UsageError``), never the stale timeout again;
* ``close()`` returns within about a second while a server is still stopped.

The single env (one sub-env of the same engine) does the same.

The transport side (a timed-out connection is dropped, a shard replaced without waiting
on a frozen server, one close deadline for every socket) is in ``openenv_gym.transport``;
the facade side of the first two is the stepping engine's (``openenv_gym/vector/``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fault_support import counter_servers, detected, no_leftovers  # noqa: F401
from openenv_gym_vector_envs import SPEC, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import EnvErrorGroup, RequestTimeoutError, UsageError
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

STEP_TIMEOUT = 2.0
N = 8
FROZEN = np.arange(N // 2)  # the sub-envs of server 0 (split_evenly: 0..3 on server 0)


@pytest.fixture(params=["batch", "json"])
def protocol(request: pytest.FixtureRequest) -> str:
    """Each wire protocol."""
    return str(request.param)


def _vector(protocol: str, on_server_loss: str) -> OpenEnvVectorEnv:
    envs = OpenEnvVectorEnv(
        SPEC,
        N,
        codec=counter_codec(),
        num_servers=2,
        protocol=protocol,
        on_server_loss=on_server_loss,
        timeouts={"step": STEP_TIMEOUT},
    )
    envs.reset(seed=0, options={"episode_length": 1000})
    return envs


@contextlib.contextmanager
def frozen(pid: int, resume_after: float | None = None) -> Iterator[None]:
    """Server ``pid`` stopped (SIGSTOP); resumed ``resume_after`` s later, and at exit."""
    os.kill(pid, signal.SIGSTOP)
    timer = None
    if resume_after is not None:
        timer = threading.Timer(resume_after, os.kill, (pid, signal.SIGCONT))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)


def _single(protocol: str, on_server_loss: str) -> OpenEnvEnv:
    env = OpenEnvEnv(
        SPEC,
        codec=counter_codec(),
        protocol=protocol,
        on_server_loss=on_server_loss,
        timeouts={"step": STEP_TIMEOUT},
    )
    env.reset(seed=0, options={"episode_length": 1000})
    return env


def _server(envs: OpenEnvVectorEnv | OpenEnvEnv, k: int) -> int:
    return envs._provider.pids[k]  # type: ignore[attr-defined,no-any-return]


def test_restart_steps_on_with_the_frozen_servers_sub_envs_truncated(protocol: str) -> None:
    envs = _vector(protocol, "restart")
    try:
        # resumed after the timeout, while the env reconnects: its server answers again
        with frozen(_server(envs, 0), resume_after=STEP_TIMEOUT * 1.5):
            _, _, terminated, truncated, _ = envs.step(np.ones(N, dtype=np.int64))
        assert truncated[FROZEN].all()
        assert not truncated[N // 2 :].any()
        assert not terminated.any()
        for _ in range(3):  # autoreset of the truncated ones, then steps as usual
            obs, _, terminated, truncated, _ = envs.step(np.ones(N, dtype=np.int64))
            assert not (terminated | truncated).any()
        # untouched: sub-env i was reset to seed 0 + i, then stepped four times
        assert np.asarray(obs)[N // 2 :].tolist() == [i + 4 for i in range(N // 2, N)]
    finally:
        envs.close()


def test_raise_says_the_env_is_broken_after_a_timeout(protocol: str) -> None:
    envs = _vector(protocol, "raise")
    try:
        with frozen(_server(envs, 0)):
            with pytest.raises(EnvErrorGroup) as caught:
                envs.step(np.ones(N, dtype=np.int64))
            assert all(isinstance(caught.value.errors[i], RequestTimeoutError) for i in FROZEN)
        for call in (lambda: envs.step(np.ones(N, dtype=np.int64)), lambda: envs.reset(seed=1)):
            with pytest.raises(UsageError, match="close") as later:
                call()
            assert not isinstance(later.value, TimeoutError)
    finally:
        envs.close()


def test_single_env_restart_reconnects_to_the_same_server(protocol: str) -> None:
    env = _single(protocol, "restart")
    try:
        pid = _server(env, 0)
        with frozen(pid, resume_after=STEP_TIMEOUT * 1.5):
            obs, _, terminated, truncated, info = env.step(1)
        assert (int(obs), terminated, truncated) == (0, False, True)  # the last observation
        assert info["server_lost"] is True
        assert _server(env, 0) == pid  # reconnected, never restarted
        env.reset(seed=7)
        obs, *_ = env.step(1)
        assert int(obs) == 8
    finally:
        env.close()


def test_single_env_raise_says_the_env_is_broken_after_a_timeout(protocol: str) -> None:
    env = _single(protocol, "raise")
    try:
        with frozen(_server(env, 0)), pytest.raises(RequestTimeoutError):
            env.step(1)
        for call in (lambda: env.step(1), lambda: env.reset(seed=1)):
            with pytest.raises(UsageError, match="close") as later:
                call()
            assert not isinstance(later.value, TimeoutError)
    finally:
        env.close()


@pytest.mark.parametrize("after_a_timeout", [False, True], ids=["idle", "timed-out"])
def test_close_returns_promptly_while_a_server_is_stopped(
    protocol: str, after_a_timeout: bool
) -> None:
    envs = _vector(protocol, "raise")
    pid = _server(envs, 0)
    with frozen(pid):
        if after_a_timeout:
            with pytest.raises(EnvErrorGroup):
                envs.step(np.ones(N, dtype=np.int64))
        started = time.monotonic()
        envs.close()  # server 0 still stopped: its sockets never answer the close
        detected(f"close() with a stopped server ({protocol})", started)  # a figure only
