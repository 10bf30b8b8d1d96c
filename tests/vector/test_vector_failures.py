"""Bad input and failures: every failed sub-env reported with its index, typed errors, no leaks."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError
from openenv_gym_vector_envs import RAISE, SLOW, counter_codec
from vector_checks import wait_gone

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transport"))
from blocked import wait_until_blocked

from openenv_gym.exceptions import (
    EnvClosedError,
    EnvErrorGroup,
    ExecutionError,
    InvalidActionError,
    OpenEnvGymError,
    RemoteProtocolError,
    RequestTimeoutError,
    ServerError,
    ServerValidationError,
    TransportError,
    UsageError,
)
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

MakeVector = Callable[..., OpenEnvVectorEnv]


def test_actions_outside_the_space_in_several_envs(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    envs.reset()
    with pytest.raises(EnvErrorGroup) as caught:
        envs.step([0, 7, 1, -1])
    group = caught.value
    assert group.env_indices == [1, 3]
    assert all(isinstance(e, InvalidActionError) for e in group.errors.values())
    assert "env 1" in str(group)
    assert "env 3" in str(group)
    # nothing was sent: every env steps exactly once now
    assert envs.step([0, 0, 0, 0])[0].tolist() == [1, 1, 1, 1]


def test_server_errors_in_several_envs(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    envs.reset()
    with pytest.raises(EnvErrorGroup) as caught:
        envs.step([0, RAISE, 0, RAISE])
    group = caught.value
    assert group.env_indices == [1, 3]
    assert str(group).startswith("2 sub-environment(s) failed: ")
    for error in group.errors.values():
        assert isinstance(error, ExecutionError)
        assert isinstance(error, ServerError)
        assert error.code == "EXECUTION_ERROR"
        assert "action 4 raises" in error.message
    # the sessions survive and the vector env steps on (envs 0 and 2 stepped in the failed call)
    obs, rewards, *_ = envs.step([0, 0, 0, 0])
    assert obs.tolist() == [2, 1, 2, 1]
    assert rewards.tolist() == [2, 1, 2, 1]


def test_a_reply_the_codec_cannot_read_beside_a_failed_sub_env_raises_that_error(
    make_vector: MakeVector, protocol: str
) -> None:
    """Sub-env 0 fails and sub-env 1's reply cannot be decoded: the typed decode error is
    raised, not an EnvErrorGroup (whose results would need that reply decoded)."""
    base = counter_codec()

    def decode(obs: Mapping[str, Any]) -> Any:
        if obs["count"] == 2:
            raise RemoteProtocolError(f"expected an odd count, got {obs['count']}")
        return base.decode_observation(obs)

    codec = dataclasses.replace(base, decode_observation=decode, decode_columns=None)
    envs = make_vector(num_envs=2, protocol=protocol, codec=codec)
    envs.reset(seed=0)  # counts 0 and 1
    with pytest.raises(RemoteProtocolError, match="expected an odd count, got 2"):
        envs.step([RAISE, 0])


def test_reset_errors_in_every_env(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol)
    with pytest.raises(EnvErrorGroup) as caught:
        envs.reset(options={"episode_length": "not a number"})  # the env's model refuses it
    assert caught.value.env_indices == [0, 1, 2]
    assert all(isinstance(e, ServerValidationError) for e in caught.value.errors.values())
    obs, _ = envs.reset(seed=3)
    assert obs.tolist() == [3, 4, 5]


def test_step_timeout_is_fatal_for_those_sessions(
    make_vector: MakeVector, protocol: str, gate: Path
) -> None:
    envs = make_vector(num_envs=2, protocol=protocol, timeouts={"step": 0.5})
    envs.reset(options={"gate": str(gate)})
    with pytest.raises(EnvErrorGroup) as caught:
        # the gate never opens: the server never answers in time. Both act SLOW: over
        # JSON the two sessions' steps reach the server on two sockets, in either order,
        # and a quick one read first would be answered before the slow one blocks
        envs.step([SLOW, SLOW])
    assert caught.value.env_indices == [0, 1]
    for error in caught.value.errors.values():
        assert isinstance(error, RequestTimeoutError)
        assert isinstance(error, TimeoutError)
    # the connection that missed its reply is gone: the env says it is broken (issue 22,
    # item 5: a UsageError to close it, not the stale timeout again, nor a group)
    with pytest.raises(UsageError, match="close it") as later:
        envs.step([0, 0])
    assert not isinstance(later.value, TimeoutError)


def own_servers(protocol: str) -> OpenEnvVectorEnv:
    """Four counter envs on two local servers of their own (envs 0, 1 on server 0)."""
    return OpenEnvVectorEnv(
        codec=counter_codec(), num_envs=4, num_servers=2, protocol=protocol, timeouts={"step": 5}
    )


def check_lost(group: EnvErrorGroup) -> None:
    assert group.env_indices == [0, 1]
    assert all(isinstance(e, TransportError) for e in group.errors.values())


@pytest.mark.parametrize("mode", ["idle", "mid-step"])
def test_server_killed(protocol: str, mode: str, tmp_path: Path) -> None:
    envs = own_servers(protocol)
    pids = set(envs._provider.pids)  # type: ignore[attr-defined]
    assert len(pids) == 2
    gate = tmp_path / "gate"
    try:
        envs.reset(options={"gate": str(gate)})
        envs.step([0, 0, 0, 0])
        victim = envs._provider.pids[0]  # type: ignore[attr-defined]
        if mode == "idle":
            os.kill(victim, signal.SIGKILL)
            with pytest.raises(EnvErrorGroup) as caught:
                envs.step([0, 0, 0, 0])
        else:
            envs.step_async([SLOW, 0, 0, 0])  # server 0 is busy when it dies
            os.kill(victim, signal.SIGKILL)
            with pytest.raises(EnvErrorGroup) as caught:
                envs.step_wait()
        check_lost(caught.value)
        # the dead sub-envs keep failing with a typed error; nothing hangs
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step([0, 0, 0, 0])
        assert caught.value.env_indices == [0, 1]
        assert all(isinstance(e, OpenEnvGymError) for e in caught.value.errors.values())
        with pytest.raises(EnvErrorGroup) as caught:
            envs.reset()
        assert caught.value.env_indices == [0, 1]
    finally:
        gate.touch()
        envs.close()
    envs.close()
    assert not wait_gone(pids), "a server process outlived close()"


def test_closing_with_a_step_in_flight_stops_the_servers(gate: Path) -> None:
    envs = own_servers("batch")
    pids = set(envs._provider.pids)  # type: ignore[attr-defined]
    envs.reset(options={"gate": str(gate)})
    envs.step_async(np.array([SLOW, 0, 0, 0]))
    envs.close()  # the step is abandoned; server 0 is still blocked in the env
    gate.touch()
    assert not wait_gone(pids), "a server process outlived close()"


@pytest.mark.parametrize("servers", [1, 2])
def test_close_from_another_thread_ends_a_waiting_step(
    protocol: str, servers: int, tmp_path: Path
) -> None:
    envs = OpenEnvVectorEnv(
        codec=counter_codec(), num_envs=4, num_servers=servers, protocol=protocol
    )
    pids = set(envs._provider.pids)  # type: ignore[attr-defined]
    gate = tmp_path / "gate"
    caught: list[BaseException] = []

    def step() -> None:
        try:
            envs.step([SLOW, 0, 0, SLOW])  # the servers hold the step until the gate opens
        except BaseException as exc:
            caught.append(exc)

    try:
        envs.reset(options={"gate": str(gate)})
        worker = threading.Thread(target=step)
        worker.start()
        wait_until_blocked(worker)  # waiting for the servers: the path under test
        envs.close()
        worker.join(10)
        assert not worker.is_alive()
        (error,) = caught
        assert isinstance(error, EnvClosedError)
        assert isinstance(error, ClosedEnvironmentError)
        for call in (envs.step_wait, envs.reset, lambda: envs.step([0] * 4), envs.recv):
            with pytest.raises(EnvClosedError, match="closed"):
                call()
    finally:
        gate.touch()
        envs.close()
    assert not wait_gone(pids), "a server process outlived close()"


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05])
def test_close_from_another_thread_while_stepping_in_a_loop(
    make_vector: MakeVector, protocol: str, delay: float
) -> None:
    envs = make_vector(num_envs=8, servers=2, protocol=protocol)
    caught: list[BaseException] = []

    def loop() -> None:
        try:
            while True:
                envs.step([0] * 8)
        except BaseException as exc:
            caught.append(exc)

    envs.reset()
    worker = threading.Thread(target=loop)
    worker.start()
    time.sleep(delay)
    envs.close()
    worker.join(10)
    assert not worker.is_alive()
    (error,) = caught
    assert isinstance(error, EnvClosedError), repr(error)
