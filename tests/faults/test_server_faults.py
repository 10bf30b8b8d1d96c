"""A server dies, freezes, drops the connection or is too slow: what the client sees.

Real local servers (the counter env of tests/vector, whose SLOW action holds the server
until a gate file exists, and says when it started: ``<gate>.entered``), real sockets, real
signals. Each fault is made while the server is inside the step (an event, not a delay);
each test asserts the typed error, that it came after the fault, and that no process is
left running. How long detection took is printed (``pytest -s``): speed is measured in
``benchmarks/``, never asserted here.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fault_support import (  # noqa: F401
    HANG,
    CutProxy,
    counter_servers,
    detected,
    no_leftovers,
    wait_for,
)
from openenv_gym_fault_envs import ENTERING_SPEC, entered
from openenv_gym_vector_envs import SLOW, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ConnectionLostError,
    EnvErrorGroup,
    RequestTimeoutError,
    UsageError,
)
from openenv_gym.providers import LocalProvider
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

PROTOCOLS = ["batch", "json"]
STEP_TIMEOUT = 2.0
TIMEOUTS = {"step": STEP_TIMEOUT, "close": 1.0}


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """The SLOW action's gate; opened at teardown, whatever happened."""
    path = tmp_path / "gate"
    yield path
    path.touch()


class Fault:
    """``action`` run on a thread once the server is inside the SLOW step.

    ``at`` is when it started (``time.monotonic()``, for the printed figure).
    :meth:`came_first` says whether it had started: an error that surfaces before it came
    from something else.
    """

    def __init__(self, gate: Path, action: Callable[[], None]) -> None:
        self.at = 0.0
        self._started = threading.Event()

        def run() -> None:
            wait_for(entered(gate).exists, "the server starting the SLOW step")
            self.at = time.monotonic()
            self._started.set()
            action()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def came_first(self) -> bool:
        """Whether the fault had started; waits for it to finish (a hang fails)."""
        started = self._started.is_set()
        self._thread.join(HANG)
        assert not self._thread.is_alive(), "the fault never finished"
        return started


def single(protocol: str, gate: Path) -> tuple[OpenEnvEnv, LocalProvider]:
    provider = LocalProvider(ENTERING_SPEC)
    env = OpenEnvEnv(codec=counter_codec(), provider=provider, protocol=protocol, timeouts=TIMEOUTS)
    env.reset(options={"gate": str(gate)})
    return env, provider


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_killed_mid_step(protocol: str, gate: Path) -> None:
    env, provider = single(protocol, gate)
    try:
        (pid,) = provider.pids
        kill = Fault(gate, lambda: os.kill(pid, signal.SIGKILL))
        with pytest.raises(ConnectionLostError):
            env.step(SLOW)  # the server holds the step until it is killed
        assert kill.came_first()  # the error is the kill's
        detected(f"kill -9 of the server mid-step ({protocol})", kill.at)
        with pytest.raises(UsageError, match="closed"):  # the session is over
            env.step(0)
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_server_stopped_mid_step_times_out(protocol: str, gate: Path) -> None:
    env, provider = single(protocol, gate)
    (pid,) = provider.pids

    def freeze() -> None:
        os.kill(pid, signal.SIGSTOP)
        gate.touch()  # only the stop keeps the reply from coming now

    try:
        sent = time.monotonic()
        stop = Fault(gate, freeze)
        with pytest.raises(RequestTimeoutError) as caught:
            env.step(SLOW)
        assert isinstance(caught.value, TimeoutError)
        assert stop.came_first()  # the server was stopped, then the step timed out
        took = detected(f"SIGSTOP of the server mid-step ({protocol})", sent)
        assert took >= STEP_TIMEOUT * 0.9  # not before the step timeout
        with pytest.raises(UsageError, match="closed"):  # a timeout is fatal for the session
            env.step(0)
    finally:
        os.kill(pid, signal.SIGCONT)
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dropped_tcp_connection_mid_step(protocol: str, gate: Path) -> None:
    provider = LocalProvider(ENTERING_SPEC)  # the server; the client connects through a proxy
    (url,) = provider.start()
    proxy = CutProxy(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    through = OpenEnvEnv(
        codec=counter_codec(),
        base_url=proxy.url,
        token=provider.token(0),
        protocol=protocol,
        timeouts=TIMEOUTS,
    )
    try:
        through.reset(options={"gate": str(gate)})
        cut = Fault(gate, proxy.cut)
        with pytest.raises(ConnectionLostError):
            through.step(SLOW)
        assert cut.came_first()
        detected(f"dropped TCP connection mid-step ({protocol})", cut.at)
        with pytest.raises(UsageError, match="closed"):
            through.step(0)
    finally:
        through.close()
        proxy.close()
        gate.touch()
        provider.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_slow_env_beyond_the_step_timeout_is_fatal(protocol: str, gate: Path) -> None:
    env, provider = single(protocol, gate)
    try:
        sent = time.monotonic()
        with pytest.raises(RequestTimeoutError):
            env.step(SLOW)
        took = detected(f"env slower than the step timeout ({protocol})", sent)
        assert took >= STEP_TIMEOUT * 0.9  # not before the step timeout
        gate.touch()  # the server answers now: too late, the session is closed for good
        other = OpenEnvEnv(  # a new session is served: the server is past the held step
            codec=counter_codec(),
            base_url=provider.start()[0],
            token=provider.token(0),
            protocol=protocol,
            timeouts=TIMEOUTS,
        )
        try:
            assert other.reset(seed=3)[0] == 3
        finally:
            other.close()
        assert env.session.closed
        with pytest.raises(UsageError, match="closed"):
            env.step(0)
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_server_killed_mid_step(protocol: str, gate: Path) -> None:
    provider = LocalProvider(ENTERING_SPEC, num_servers=2)  # sub-envs 0, 1 on server 0
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        provider=provider,
        protocol=protocol,
        timeouts=TIMEOUTS,
    )
    try:
        envs.reset(seed=10, options={"gate": str(gate)})
        victim = provider.pids[0]
        envs.step_async([SLOW, 0, 0, 0])
        kill = Fault(gate, lambda: os.kill(victim, signal.SIGKILL))
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step_wait()
        assert kill.came_first()
        detected(f"kill -9 of one of two servers mid-step, vector ({protocol})", kill.at)
        assert caught.value.env_indices == [0, 1]
        assert all(isinstance(e, ConnectionLostError) for e in caught.value.errors.values())
        results = caught.value.results  # the other server's steps are kept, whole
        assert sorted(results) == [2, 3]
        for i in (2, 3):
            obs, reward, terminated, truncated, info = results[i]
            assert (int(obs), reward, terminated, truncated) == (11 + i, 1.0, False, False)
            assert info == {"count": 11 + i, "steps": 1, "action": 0, "episode_length": 3}
    finally:
        envs.close()
