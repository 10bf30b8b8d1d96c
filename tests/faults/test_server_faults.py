"""A server dies, freezes, drops the connection or is too slow: what the client sees.

Real local servers (the counter env of tests/vector, whose SLOW action holds the server
until a gate file exists), real sockets, real signals. Each test asserts the typed error,
how long it took to surface (printed with ``pytest -s``; generous bounds only: speed is
measured, not gated), and that no process is left running.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fault_support import CutProxy, counter_servers, detected, no_leftovers  # noqa: F401
from openenv_gym_vector_envs import SLOW, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ConnectionLostError,
    EnvErrorGroup,
    RequestTimeoutError,
    UsageError,
)
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

PROTOCOLS = ["batch", "json"]
STEP_TIMEOUT = 2.0


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """The SLOW action's gate; opened at teardown, whatever happened."""
    path = tmp_path / "gate"
    yield path
    path.touch()


def later(delay: float, action: Callable[[], None]) -> list[float]:
    """Run ``action`` ``delay`` s from now on a timer; the list gets its monotonic time."""
    when: list[float] = []

    def fire() -> None:
        when.append(time.monotonic())
        action()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()
    return when


def single(protocol: str, gate: Path, **kwargs: object) -> OpenEnvEnv:
    env = OpenEnvEnv(
        codec=counter_codec(),
        protocol=protocol,
        timeouts={"step": STEP_TIMEOUT, "close": 1.0},
        **kwargs,  # type: ignore[arg-type]
    )
    env.reset(options={"gate": str(gate)})
    return env


def server_pid(env: OpenEnvEnv | OpenEnvVectorEnv, k: int = 0) -> int:
    return env._provider.pids[k]  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_killed_mid_step(protocol: str, gate: Path) -> None:
    env = single(protocol, gate)
    try:
        pid = server_pid(env)
        killed = later(0.3, lambda: os.kill(pid, signal.SIGKILL))
        with pytest.raises(ConnectionLostError):
            env.step(SLOW)  # the server holds the step until it is killed
        detected(f"kill -9 of the server mid-step ({protocol})", killed[0], STEP_TIMEOUT)
        with pytest.raises(UsageError, match="closed"):  # the session is over
            env.step(0)
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_stopped_mid_step_times_out(protocol: str, gate: Path) -> None:
    env = single(protocol, gate)
    pid = server_pid(env)

    def freeze() -> None:
        os.kill(pid, signal.SIGSTOP)
        gate.touch()  # only the stop keeps the reply from coming now

    try:
        sent = time.monotonic()
        later(0.3, freeze)
        with pytest.raises(RequestTimeoutError) as caught:
            env.step(SLOW)
        assert isinstance(caught.value, TimeoutError)
        took = detected(f"SIGSTOP of the server mid-step ({protocol})", sent, 3 * STEP_TIMEOUT)
        assert took >= STEP_TIMEOUT * 0.9  # not before the step timeout
        with pytest.raises(UsageError, match="closed"):  # a timeout is fatal for the session
            env.step(0)
    finally:
        os.kill(pid, signal.SIGCONT)
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dropped_tcp_connection_mid_step(protocol: str, gate: Path) -> None:
    env = single(protocol, gate)  # only to start a server: clients connect through a proxy
    proxy = CutProxy(("127.0.0.1", int(env.base_url.rsplit(":", 1)[1])))
    token = env._provider.token(0)  # type: ignore[attr-defined]
    through = OpenEnvEnv(
        codec=counter_codec(),
        base_url=proxy.url,
        token=token,
        protocol=protocol,
        timeouts={"step": STEP_TIMEOUT, "close": 1.0},
    )
    try:
        through.reset(options={"gate": str(gate)})
        cut = later(0.3, proxy.cut)
        with pytest.raises(ConnectionLostError):
            through.step(SLOW)
        detected(f"dropped TCP connection mid-step ({protocol})", cut[0], STEP_TIMEOUT)
        with pytest.raises(UsageError, match="closed"):
            through.step(0)
    finally:
        through.close()
        proxy.close()
        gate.touch()
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_slow_env_beyond_the_step_timeout_is_fatal(protocol: str, gate: Path) -> None:
    env = single(protocol, gate)
    try:
        sent = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            env.step(SLOW)
        took = detected(f"env slower than the step timeout ({protocol})", sent, 3 * STEP_TIMEOUT)
        assert took >= STEP_TIMEOUT * 0.9
        gate.touch()  # the server answers now: too late, the session is closed for good
        time.sleep(0.3)
        assert env.session.closed
        with pytest.raises(UsageError, match="closed"):
            env.step(0)
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_server_killed_mid_step(protocol: str, gate: Path) -> None:
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        num_servers=2,
        protocol=protocol,
        timeouts={"step": STEP_TIMEOUT, "close": 1.0},
    )
    try:
        envs.reset(options={"gate": str(gate)})
        victim = server_pid(envs, 0)
        envs.step_async([SLOW, 0, 0, 0])
        killed = later(0.3, lambda: os.kill(victim, signal.SIGKILL))
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step_wait()
        detected(f"kill -9 of one of two servers mid-step, vector ({protocol})", killed[0], 5.0)
        assert caught.value.env_indices == [0, 1]
        assert all(isinstance(e, ConnectionLostError) for e in caught.value.errors.values())
        assert sorted(caught.value.results) == [2, 3]  # the other server's steps are kept
    finally:
        envs.close()
