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
from pathlib import Path

import numpy as np
import pytest
from fault_support import (  # noqa: F401
    HANG,
    Proxied,
    counter_servers,
    detected,
    no_leftovers,
    wait_for,
)
from gymnasium.vector import AutoresetMode
from openenv_gym_fault_envs import ENTERING_SPEC, entered
from openenv_gym_vector_envs import SLOW, SPEC, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import EnvErrorGroup, RequestTimeoutError, UsageError
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

STEP_TIMEOUT = 2.0
BROKEN = (
    r"^the environment is broken: no reply from .* within 2\.0 s; "
    r"the (connection|session) is closed \(its sub-envs can take no more requests\); "
    r"close it and make a new one, or use on_server_loss='restart' to go on with their "
    r"episodes truncated$"
)
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
            with pytest.raises(UsageError, match=BROKEN) as later:
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


def test_single_env_a_reset_timing_out_on_a_stopped_server_does_not_restart_it(
    protocol: str,
) -> None:
    """``restart``: a reset past the step timeout is reconnected to the same server, never
    restarted for being slow; the stopped server does not answer, so the reset raises its
    timeout."""
    env = OpenEnvEnv(
        SPEC,
        codec=counter_codec(),
        protocol=protocol,
        on_server_loss="restart",
        timeouts={"step": STEP_TIMEOUT, "connect": STEP_TIMEOUT},
    )
    try:
        env.reset(seed=0)
        pid = _server(env, 0)
        with frozen(pid), pytest.raises(RequestTimeoutError):
            env.reset(seed=1)
        assert _server(env, 0) == pid
    finally:
        env.close()


def test_single_env_raise_says_the_env_is_broken_after_a_timeout(protocol: str) -> None:
    env = _single(protocol, "raise")
    try:
        with frozen(_server(env, 0)), pytest.raises(RequestTimeoutError):
            env.step(1)
        for call in (lambda: env.step(1), lambda: env.reset(seed=1)):
            with pytest.raises(UsageError, match=BROKEN) as later:
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


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_restart_reports_the_requests_left_on_a_timed_out_connection(
    tmp_path: Path, mode: AutoresetMode
) -> None:
    """send/recv over JSON (a connection per sub-env), two servers, each holding one
    sub-env's step. Each server's other sub-env sends its step later, after the first
    one's timeout has passed, so that request is still in flight on the old connection
    when the env reconnects. Each server answers the reconnect (the test lets it finish
    its held step once the env connects again): the timed-out sub-envs and the ones whose
    request was left behind are each reported lost once (truncated, ``server_lost``), and
    every sub-env steps on over the new connections. No server is restarted."""
    gates = [tmp_path / "gate-0", tmp_path / "gate-1"]
    provider = Proxied(ENTERING_SPEC, num_servers=2)  # sub-envs 0, 1 on server 0; 2, 3 on 1
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        provider=provider,
        protocol="json",
        timeouts={"step": STEP_TIMEOUT, "connect": 30.0, "close": 1.0},
        on_server_loss="restart",
        autoreset_mode=mode,
    )
    try:
        pids = provider.pids
        envs.reset(seed=10, options={"gate": str(gates[0])})
        envs.reset(
            seed=10,
            options={"gate": str(gates[1]), "reset_mask": np.array([False, False, True, True])},
        )
        accepted = [proxy.accepted for proxy in provider.proxies]
        sent = time.monotonic()
        envs.send([SLOW, SLOW], env_ids=[0, 2])  # each server holds its sub-env's step
        for gate in gates:
            wait_for(entered(gate).exists, "each server starting its SLOW step")
        # the order this test is about: the held steps' timeout passes before the others send
        wait_for(lambda: time.monotonic() > sent + STEP_TIMEOUT, "the held steps' timeout")
        envs.send([0, 0], env_ids=[1, 3])

        def let_each_server_answer_the_reconnect() -> None:
            for k, gate in enumerate(gates):  # shards are reconnected one after the other
                wait_for(
                    lambda k=k: provider.proxies[k].accepted > accepted[k],
                    f"the env connecting to server {k} again",
                )
                gate.touch()

        opener = threading.Thread(target=let_each_server_answer_the_reconnect, daemon=True)
        opener.start()
        seen = {}
        for _ in range(2):
            obs, rewards, terminated, truncated, infos = envs.recv(batch_size=2)
            for j, i in enumerate(infos["env_id"].tolist()):
                seen[i] = (
                    int(obs[j]),
                    float(rewards[j]),
                    bool(terminated[j]),
                    bool(truncated[j]),
                    bool(infos["server_lost"][j]),
                )
        opener.join(HANG)
        fresh = mode is AutoresetMode.SAME_STEP  # lost sub-envs reset at once (unseeded: 0)
        assert seen == {i: (0 if fresh else 10 + i, 0.0, False, True, True) for i in range(4)}
        assert provider.restarts == []  # timed out, not lost: the same servers answered
        assert provider.pids == pids
        for _ in range(2):  # then steps as usual, none reported lost again
            obs, _, terminated, truncated, infos = envs.step([0, 0, 0, 0])
            assert not (terminated | truncated).any()
            assert "server_lost" not in infos
        assert obs.tolist() == [2 if fresh else 1] * 4  # reset (unseeded: 0), then counted
    finally:
        envs.close()
