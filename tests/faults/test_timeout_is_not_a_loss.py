"""A slow server is not a lost server, also with ``on_server_loss="restart"``.

docs/reliability.md: a timeout is not a loss. A reply that comes late but within the step
timeout is a normal step; a server that holds a step past the step timeout is slow, not
gone: the env does not restart it and does not report ``server_lost``. (Issue 23, item 1:
the restart path catching ``TimeoutError`` too passed every test before these.)

The server is the counter env whose SLOW step holds the reply until the test creates a
gate file, and says when it is inside the step (``<gate>.entered``): no timing decides
anything here; the step timeout is short only to keep the test short.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_support import (  # noqa: F401
    HANG,
    Proxied,
    Watched,
    counter_servers,
    no_leftovers,
    wait_for,
)
from openenv_gym_fault_envs import ENTERING_SPEC, entered
from openenv_gym_vector_envs import SLOW, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import EnvErrorGroup, RequestTimeoutError, WaitTimeoutError
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

STEP_TIMEOUT = 3.0
TIMEOUTS = {"step": STEP_TIMEOUT, "connect": 5.0, "close": 1.0}


@pytest.fixture
def gates(tmp_path: Path) -> Iterator[list[Path]]:
    """Two gates: one the test opens in time, one it never opens (opened at teardown)."""
    paths = [tmp_path / "in-time", tmp_path / "too-late"]
    yield paths
    for path in paths:
        path.touch()


def open_once_entered(gate: Path) -> threading.Thread:
    """Create ``gate`` once the server is inside the SLOW step (on a thread)."""

    def run() -> None:
        wait_for(entered(gate).exists, "the server starting the SLOW step")
        gate.touch()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_single_env_a_slow_server_is_neither_lost_nor_restarted(gates: list[Path]) -> None:
    in_time, too_late = gates
    provider = Watched(ENTERING_SPEC)
    env = OpenEnvEnv(
        codec=counter_codec(),
        provider=provider,
        protocol="batch",
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        (pid,) = provider.pids
        env.reset(seed=10, options={"gate": str(in_time)})
        opener = open_once_entered(in_time)
        obs, reward, terminated, truncated, info = env.step(SLOW)  # held until the gate
        opener.join(HANG)
        assert (int(obs), reward, terminated, truncated) == (11, 1.0, False, False)
        assert "server_lost" not in info
        assert info["action"] == SLOW  # the step the server held, not a stand-in

        env.reset(seed=20, options={"gate": str(too_late)})
        with pytest.raises(RequestTimeoutError):  # past the step timeout: slow, not lost
            env.step(SLOW)
        assert entered(too_late).exists()  # it was the server holding the step
        assert provider.restarts == []
        assert provider.pids == [pid]
        assert provider.alive(0)
    finally:
        env.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_vector_env_a_slow_server_is_neither_lost_nor_restarted(
    gates: list[Path], protocol: str
) -> None:
    in_time, too_late = gates
    provider = Watched(ENTERING_SPEC, num_servers=2)  # sub-envs 0, 1 on server 0
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        provider=provider,
        protocol=protocol,
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        pids = provider.pids
        envs.reset(seed=10, options={"gate": str(in_time)})
        envs.step_async([SLOW, 0, 0, 0])
        with pytest.raises(WaitTimeoutError):  # the reply is late: the step stays pending
            envs.step_wait(timeout=0.05)
        wait_for(entered(in_time).exists, "the server starting the SLOW step")
        in_time.touch()
        obs, rewards, terminated, truncated, infos = envs.step_wait()
        assert obs.tolist() == [11, 12, 13, 14]
        assert rewards.tolist() == [1.0] * 4
        assert not terminated.any()
        assert not truncated.any()
        assert "server_lost" not in infos
        assert infos["action"].tolist() == [SLOW, 0, 0, 0]

        envs.reset(seed=20, options={"gate": str(too_late)})
        envs.send([SLOW], env_ids=[0])
        # sub-env 1's step reaches server 0 while it holds sub-env 0's (over JSON each has
        # a connection of its own, and the server could otherwise take sub-env 1's first)
        wait_for(entered(too_late).exists, "the server starting the SLOW step")
        envs.send([0, 0, 0], env_ids=[1, 2, 3])
        with pytest.raises(EnvErrorGroup) as caught:  # past the step timeout
            envs.recv(batch_size=4)
        group = caught.value
        assert group.env_indices == [0, 1]  # server 0 held both of its sub-envs
        assert all(isinstance(e, RequestTimeoutError) for e in group.errors.values())
        assert sorted(group.results) == [2, 3]
        for i in (2, 3):
            obs_i, reward_i, terminated_i, truncated_i, info_i = group.results[i]
            assert (int(obs_i), reward_i, terminated_i, truncated_i) == (21 + i, 1.0, False, False)
            assert "server_lost" not in info_i
        assert provider.restarts == []
        assert provider.pids == pids
        assert provider.alive(0)
    finally:
        envs.close()


@pytest.mark.parametrize("restartable", [True, False], ids=["restarted", "not-ours"])
def test_vector_env_a_timeout_beside_a_lost_connection_stays_a_timeout(
    gates: list[Path], restartable: bool
) -> None:
    """Over JSON each sub-env has its own connection: one is cut while the server holds
    the step, the other times out. Only the cut one is a loss (truncated after a restart,
    or the provider's error where the server is not ours to restart); the other is a
    timeout either way."""
    _, gate = gates
    provider = Proxied(ENTERING_SPEC)
    server = None
    if not restartable:  # the same server, reached by URL: the env cannot restart it
        server, provider = provider, None
        server.start()
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=2,
        provider=provider,
        base_url=None if server is None else server.start()[0],
        token=None if server is None else server.token(0),
        protocol="json",
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    proxy = (provider or server).proxies[0]  # type: ignore[union-attr]
    try:
        envs.reset(seed=10, options={"gate": str(gate)})
        assert proxy.connections == 2
        envs.send([SLOW], env_ids=[0])
        wait_for(entered(gate).exists, "the server starting the SLOW step")
        envs.send([0], env_ids=[1])  # held behind it: the server runs one step at a time
        proxy.cut(only=1)  # the first connection the env opened: one sub-env's
        with pytest.raises(EnvErrorGroup) as caught:
            envs.recv(batch_size=2)
        group = caught.value
        if restartable:
            assert provider is not None
            assert provider.restarts == [0]  # lost, and the server did not answer: restarted
            (error,) = group.errors.values()
            assert isinstance(error, RequestTimeoutError)
            ((lost, result),) = group.results.items()
            obs, reward, terminated, truncated, info = result
            assert (int(obs), reward, terminated, truncated) == (10 + lost, 0.0, False, True)
            assert info["server_lost"] is True
        else:
            assert sorted(group.errors) == [0, 1]
            kinds = sorted(type(e).__name__ for e in group.errors.values())
            assert kinds == ["ProviderError", "RequestTimeoutError"]  # only the cut one
            assert group.results == {}
    finally:
        envs.close()
        if server is not None:
            server.close()
