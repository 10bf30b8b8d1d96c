"""A hung server whose connection is lost is restarted (``on_server_loss="restart"``).

docs/reliability.md: after a lost connection the env reconnects to the same server if its
process still runs; a server that runs but does not answer (hung) is restarted. A SIGKILLed
server only reaches that path by a race, so here the server is stopped (SIGSTOP: its
process runs, its sockets take connections, nothing answers) and its connections are cut
by a proxy in front of it: the reconnect gets no answer within the connect timeout, and
the env must restart the server (issue 23, item 5).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest
from fault_support import Proxied, counter_servers, no_leftovers, wait_gone  # noqa: F401
from openenv_gym_vector_envs import SPEC, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

TIMEOUTS = {"step": 10.0, "connect": 2.0, "close": 1.0}


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP ``pid``; SIGCONT it on the way out if it still exists."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_single_env_restarts_a_stopped_server_whose_connection_dropped(protocol: str) -> None:
    provider = Proxied(SPEC)
    env = OpenEnvEnv(
        codec=counter_codec(),
        provider=provider,
        protocol=protocol,
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        env.reset(seed=5)
        assert env.step(0)[0] == 6
        (pid,) = provider.pids
        with stopped(pid):
            provider.cut(0)
            obs, reward, terminated, truncated, info = env.step(0)
        assert (obs, reward, terminated, truncated) == (6, 0.0, False, True)
        assert info["server_lost"] is True
        assert provider.restarts == [0]  # alive but deaf: restarted, not waited for
        assert not wait_gone({pid}), "the stopped server was not replaced"
        assert provider.pids != [pid]
        obs, _ = env.reset(seed=7)  # on the new server
        assert obs == 7
        assert env.step(0)[0] == 8
    finally:
        env.close()


def test_vector_env_restarts_a_stopped_server_whose_connections_dropped() -> None:
    provider = Proxied(SPEC, num_servers=2)  # sub-envs 0, 1 on server 0; 2, 3 on server 1
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        provider=provider,
        protocol="batch",
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        envs.reset(seed=10)
        assert envs.step([0] * 4)[0].tolist() == [11, 12, 13, 14]
        pid, other = provider.pids
        with stopped(pid):
            provider.cut(0)
            obs, rewards, terminated, truncated, infos = envs.step([0] * 4)
        assert obs.tolist() == [11, 12, 14, 15]  # the lost ones: their last observation
        assert rewards.tolist() == [0.0, 0.0, 2.0, 2.0]
        assert truncated.tolist() == [True, True, False, False]
        assert not terminated.any()
        assert infos["server_lost"].tolist() == [True, True, False, False]
        assert provider.restarts == [0]
        assert not wait_gone({pid}), "the stopped server was not replaced"
        assert provider.pids[1] == other
        obs, *_ = envs.step([0] * 4)
        assert obs.tolist() == [0, 0, 15, 16]  # autoreset on the new server
    finally:
        envs.close()
