"""``on_server_loss="restart"``: a lost server is started again and its episodes truncated.

The server process is killed with SIGKILL mid-run (or its connections dropped while it
lives on); the env restarts it if it died, reconnects, and reports the affected episodes
as ``truncated=True`` with ``info["server_lost"]``; the vector env then autoresets them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fault_support import (  # noqa: F401
    CutProxy,
    Proxied,
    Watched,
    counter_servers,
    detected,
    no_leftovers,
    wait_for,
)
from gymnasium.vector import AutoresetMode
from openenv_gym_fault_envs import ENTERING_SPEC, entered
from openenv_gym_vector_envs import SLOW, SPEC, counter_codec

from openenv_gym.aio import AsyncOpenEnvVectorEnv
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ConfigurationError,
    ConnectionLostError,
    EnvErrorGroup,
    ProviderError,
)
from openenv_gym.providers import LocalProvider
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]

PROTOCOLS = ["batch", "json"]
TIMEOUTS = {"step": 10.0, "close": 1.0}


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "gate"
    yield path
    path.touch()


def kill_server(provider: LocalProvider, k: int = 0) -> int:
    pid = provider.pids[k]
    os.kill(pid, signal.SIGKILL)
    return pid


def test_on_server_loss_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="on_server_loss"):
        OpenEnvEnv(codec=counter_codec(), on_server_loss="retry")
    with pytest.raises(ConfigurationError, match="on_server_loss"):
        OpenEnvVectorEnv(codec=counter_codec(), num_envs=2, on_server_loss="ignore")


@pytest.mark.parametrize("call", ["step", "reset"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_default_raises(protocol: str, call: str) -> None:
    """``on_server_loss="raise"`` (the default): the lost connection is the call's error,
    and the env is not broken by it (only a timeout breaks an env)."""
    provider = LocalProvider(SPEC)
    env = OpenEnvEnv(codec=counter_codec(), provider=provider, protocol=protocol, timeouts=TIMEOUTS)
    try:
        env.reset(seed=5)
        kill_server(provider)
        with pytest.raises(ConnectionLostError):
            env.step(0) if call == "step" else env.reset(seed=3)
        assert env.unwrapped._engine.broken is None
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_env_restarts_a_killed_server(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = LocalProvider(SPEC)
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
        old_url = env.base_url
        old = kill_server(provider)
        killed = time.monotonic()
        obs, reward, terminated, truncated, info = env.step(0)
        detected(f"single env: server killed, restarted, new session ({protocol})", killed)
        assert (obs, reward, terminated, truncated) == (6, 0.0, False, True)  # last obs
        assert info["server_lost"] is True
        assert info["count"] == 6
        assert provider.pids[0] != old
        assert env.base_url != old_url
        said = [r.getMessage() for r in caplog.records if r.name == "openenv_gym.env"]
        assert f"lost the server at {old_url}; a new session on {env.base_url}" in said
        with pytest.raises(Exception, match="reset"):  # the episode is over
            env.step(0)
        obs, _ = env.reset(seed=7)  # a fresh env instance on the new server
        assert obs == 7
        assert env.step(0)[0] == 8
    finally:
        env.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_env_reset_resent_after_a_kill(protocol: str) -> None:
    provider = LocalProvider(SPEC)
    env = OpenEnvEnv(
        codec=counter_codec(),
        provider=provider,
        protocol=protocol,
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        env.reset(seed=1)
        kill_server(provider)
        obs, info = env.reset(seed=3)
        assert obs == 3
        assert "server_lost" not in info
    finally:
        env.close()


def restarting(
    provider: LocalProvider, protocol: str = "batch", **options: Any
) -> OpenEnvVectorEnv:
    """Four counter sub-envs on the provider's servers (0, 1 on server 0), ``restart``."""
    return OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=4,
        provider=provider,
        protocol=protocol,
        timeouts=TIMEOUTS,
        on_server_loss="restart",
        **options,
    )


def restarting_at(url: str, server: LocalProvider, protocol: str) -> OpenEnvEnv:
    """A counter single env at ``url`` (the server's own, or a proxy's), ``restart``."""
    return OpenEnvEnv(
        codec=counter_codec(),
        base_url=url,
        token=server.token(0),
        protocol=protocol,
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_env_reconnects_when_only_the_connection_dropped(protocol: str, gate: Path) -> None:
    server = LocalProvider(SPEC)
    proxy = CutProxy(("127.0.0.1", int(server.start()[0].rsplit(":", 1)[1])))
    env = restarting_at(proxy.url, server, protocol)
    try:
        env.reset(seed=10)
        proxy.cut()
        obs, _, _, truncated, info = env.step(0)
        assert (obs, truncated, info["server_lost"]) == (10, True, True)
        assert env.reset(seed=20)[0] == 20  # the same server, a new session
        assert env.step(0)[0] == 21
    finally:
        env.close()
        proxy.close()
        server.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_restarts_a_killed_server(
    protocol: str, mode: AutoresetMode, caplog: pytest.LogCaptureFixture
) -> None:
    provider = LocalProvider(SPEC, num_servers=2)  # sub-envs 0, 1 on server 0; 2, 3 on 1
    envs = restarting(provider, protocol, autoreset_mode=mode)
    try:
        envs.reset(seed=10)
        assert envs.step([0] * 4)[0].tolist() == [11, 12, 13, 14]
        survivor = provider.pids[1]
        old_url = envs.engine.urls[0]
        kill_server(provider, 0)
        killed = time.monotonic()
        obs, rewards, terminated, truncated, infos = envs.step([0] * 4)
        detected(f"vector env: one server killed, restarted ({protocol}, {mode.value})", killed)
        assert truncated.tolist() == [True, True, False, False]
        assert terminated.tolist() == [False, False, False, False]
        assert rewards.tolist() == [0.0, 0.0, 2.0, 2.0]
        assert infos["server_lost"].tolist() == [True, True, False, False]
        assert infos["_server_lost"].tolist() == [True, True, False, False]
        assert provider.pids[1] == survivor
        said = [r.getMessage() for r in caplog.records if r.name == "openenv_gym.vector"]
        new_url = envs.engine.urls[0]
        assert f"lost server 0 ({old_url}): 2 sub-envs now on {new_url}" in said
        # the new connection speaks the protocol the env was made with (not a fresh "auto")
        assert [shard.protocol for shard in envs.engine.dispatcher.shards] == [protocol] * 2
        if mode is AutoresetMode.NEXT_STEP:
            assert obs.tolist() == [11, 12, 14, 15]  # the lost ones: their last observation
            obs, rewards, terminated, truncated, _ = envs.step([0] * 4)
            assert obs.tolist() == [0, 0, 15, 16]  # autoreset on the new server
            assert rewards.tolist() == [0.0, 0.0, 3.0, 3.0]
        else:
            assert obs.tolist() == [0, 0, 14, 15]  # already reset on the new server
            assert [int(o) for o in infos["final_obs"][:2]] == [11, 12]
            obs, _, _, truncated, _ = envs.step([0] * 4)
            assert obs.tolist() == [1, 1, 0, 0]
        assert not truncated.any()
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_server_killed_mid_step(protocol: str, gate: Path) -> None:
    provider = LocalProvider(ENTERING_SPEC, num_servers=2)
    envs = restarting(provider, protocol)
    try:
        envs.reset(seed=0, options={"gate": str(gate)})
        envs.step_async([SLOW, 0, 0, 0])  # server 0 is busy in the env when it dies
        wait_for(entered(gate).exists, "server 0 starting the SLOW step")
        kill_server(provider, 0)
        obs, _, _, truncated, infos = envs.step_wait()
        assert obs.tolist() == [0, 1, 3, 4]
        assert truncated.tolist() == [True, True, False, False]
        assert infos["server_lost"].tolist() == [True, True, False, False]
        obs, *_ = envs.step([0] * 4)
        assert obs.tolist() == [0, 0, 4, 5]
    finally:
        envs.close()


def test_vector_env_send_recv_reports_idle_sub_envs_at_their_next_step() -> None:
    provider = LocalProvider(SPEC, num_servers=2)
    envs = restarting(provider)
    try:
        envs.reset(seed=0)
        kill_server(provider, 0)
        envs.send([0], env_ids=[0])  # sub-env 1, on the same server, stays idle
        *_, truncated, infos = envs.recv(batch_size=1)
        assert infos["env_id"].tolist() == [0]
        assert truncated.tolist() == [True]
        envs.send([0, 0, 0], env_ids=[1, 2, 3])
        obs, _, _, truncated, infos = envs.recv(batch_size=3)
        order = np.argsort(infos["env_id"])
        assert infos["env_id"][order].tolist() == [1, 2, 3]
        assert truncated[order].tolist() == [True, False, False]  # 1 learns it now
        assert obs[order].tolist() == [1, 3, 4]
        assert infos["server_lost"][order].tolist() == [True, False, False]
    finally:
        envs.close()


def test_url_provider_cannot_restart_a_dead_server() -> None:
    server = LocalProvider(SPEC)
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=2,
        base_url=server.start()[0],
        token=server.token(0),
        timeouts=TIMEOUTS,
        on_server_loss="restart",
    )
    try:
        envs.reset()
        kill_server(server)
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step([0, 0])
        assert caught.value.env_indices == [0, 1]  # not ours to restart: it says so
        assert all(isinstance(e, ProviderError) for e in caught.value.errors.values())
    finally:
        envs.close()
        server.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_single_env_a_failed_recovery_leaves_the_lost_session_closed(protocol: str) -> None:
    """A server that cannot be started again (not ours: a URL): the step raises, and the
    lost session is closed (its socket released), not left open behind the env."""
    server = LocalProvider(SPEC)
    env = restarting_at(server.start()[0], server, protocol)
    try:
        env.reset(seed=1)
        lost = env.session
        kill_server(server)
        with pytest.raises(ProviderError):
            env.step(0)
        assert lost.closed
    finally:
        env.close()
        server.close()


def test_vector_env_recovery_leaves_other_servers_requests_in_flight(gate: Path) -> None:
    """send/recv: server 0 dies while server 1 is still in a step. Recovering server 0 must
    not abandon server 1's request: its sub-env gets its real result later, not a loss."""
    provider = LocalProvider(ENTERING_SPEC, num_servers=2)
    envs = restarting(provider)
    try:
        envs.reset(seed=0, options={"gate": str(gate)})
        kill_server(provider, 0)
        envs.send([0, SLOW], env_ids=[0, 2])  # sub-env 2 holds server 1 in its step
        *_, truncated, infos = envs.recv(batch_size=1)
        assert infos["env_id"].tolist() == [0]
        assert truncated.tolist() == [True]  # server 0's sub-env: lost
        gate.touch()  # server 1 finishes its step
        *_, truncated, infos = envs.recv(batch_size=1)
        assert infos["env_id"].tolist() == [2]
        assert truncated.tolist() == [False]
        assert not infos.get("server_lost", np.zeros(1, dtype=bool)).any()
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_both_servers_killed_report_each_loss_once(protocol: str) -> None:
    """Every server lost in one step (an outcome per server, recovered together): each
    lost sub-env is truncated in that step only, never again at its next step (SAME_STEP
    resets them at once, so nothing else clears their loss)."""
    provider = LocalProvider(SPEC, num_servers=2)
    envs = restarting(provider, protocol, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        envs.reset(seed=10)
        kill_server(provider, 0)
        kill_server(provider, 1)
        obs, _, _, truncated, infos = envs.step([0] * 4)
        assert truncated.tolist() == [True] * 4
        assert infos["server_lost"].tolist() == [True] * 4
        assert obs.tolist() == [0, 0, 0, 0]  # reset at once on the new servers
        obs, _, _, truncated, infos = envs.step([0] * 4)
        assert obs.tolist() == [1, 1, 1, 1]
        assert not truncated.any()
        assert "server_lost" not in infos
    finally:
        envs.close()


def test_vector_env_a_siblings_real_end_in_a_loss_step_stays_terminated() -> None:
    """Server 0 lost in the step where the episodes on server 1 end: those end terminated
    (not truncated), the lost ones truncated (not terminated)."""
    provider = LocalProvider(SPEC, num_servers=2)
    envs = restarting(provider)
    try:
        envs.reset(seed=0, options={"episode_length": 1})  # every episode ends at its step
        kill_server(provider, 0)
        _, _, terminated, truncated, infos = envs.step([0] * 4)
        assert terminated.tolist() == [False, False, True, True]
        assert truncated.tolist() == [True, True, False, False]
        assert infos["server_lost"].tolist() == [True, True, False, False]
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_server_lost_in_an_autoreset_step(protocol: str) -> None:
    """NEXT_STEP: server 0 dies just as its sub-envs are to autoreset. Their autoreset is
    lost: they are reported truncated from their last observation (``server_lost``) and
    autoreset at their next step, on the new server; server 1's autoreset as usual."""
    provider = LocalProvider(SPEC, num_servers=2)
    envs = restarting(provider, protocol)
    try:
        envs.reset(seed=10, options={"episode_length": 1})
        _, _, terminated, _, _ = envs.step([0] * 4)
        assert terminated.all()  # every sub-env autoresets at its next step
        kill_server(provider, 0)
        obs, rewards, terminated, truncated, infos = envs.step([0] * 4)
        assert obs.tolist() == [11, 12, 0, 0]  # the last observations; fresh episodes
        assert rewards.tolist() == [0.0] * 4
        assert terminated.tolist() == [False] * 4
        assert truncated.tolist() == [True, True, False, False]
        assert infos["server_lost"].tolist() == [True, True, False, False]
        assert infos["_server_lost"].tolist() == [True, True, False, False]
        obs, rewards, terminated, truncated, infos = envs.step([0] * 4)
        assert obs.tolist() == [0, 0, 1, 1]  # their autoreset now, on the new server
        assert rewards.tolist() == [0.0, 0.0, 1.0, 1.0]
        assert not truncated.any()
        assert "server_lost" not in infos
    finally:
        envs.close()


class FirstCannotRestart(Watched):
    """Local servers, but server 0 cannot be started again (as a server that is not ours)."""

    def restart(self, index: int) -> str:
        """Refuse server 0; restart the others."""
        if index == 0:
            raise ProviderError("server 0 cannot be started again here")
        return super().restart(index)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_a_server_that_cannot_restart_does_not_stop_the_others(protocol: str) -> None:
    """Both servers die in one step; server 0 cannot be started again. Its sub-envs get
    the provider's error, and server 1 is still restarted: its sub-envs truncated, then
    stepping on."""
    provider = FirstCannotRestart(SPEC, num_servers=2)
    envs = restarting(provider, protocol)
    try:
        envs.reset(seed=10)
        kill_server(provider, 0)
        kill_server(provider, 1)
        with pytest.raises(EnvErrorGroup) as caught:
            envs.step([0] * 4)
        group = caught.value
        assert group.env_indices == [0, 1]
        assert all(isinstance(e, ProviderError) for e in group.errors.values())
        assert provider.restarts == [1]
        for i in (2, 3):
            obs, reward, terminated, truncated, info = group.results[i]
            assert (int(obs), reward, terminated, truncated) == (10 + i, 0.0, False, True)
            assert info["server_lost"] is True
    finally:
        envs.close()


def test_vector_env_an_idle_sub_envs_loss_is_reported_once_same_step() -> None:
    """SAME_STEP: a sub-env idle when its server was lost learns it at its next step (and
    is reset at once); its step after that is a normal one, not the loss again."""
    provider = LocalProvider(SPEC, num_servers=2)
    envs = restarting(provider, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        envs.reset(seed=0)
        kill_server(provider, 0)
        envs.send([0], env_ids=[0])  # sub-env 1, on the same server, stays idle
        envs.recv(batch_size=1)
        for truncated_now in (True, False):
            envs.send([0], env_ids=[1])
            obs, _, _, truncated, infos = envs.recv(batch_size=1)
            assert truncated.tolist() == [truncated_now]
            assert infos.get("server_lost", np.zeros(1, dtype=bool)).tolist() == [truncated_now]
        assert obs.tolist() == [1]  # reset at the loss, then one step
    finally:
        envs.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_vector_env_restarts_a_server_that_died_after_its_step_timed_out(protocol: str) -> None:
    """The network to server 0 goes silent (its proxy forwards nothing more, and passes no
    close on), then the server dies: the env sees a timeout, not a lost connection. A
    timed-out server is only reconnected to, never restarted for being slow, but this one
    is gone: the env starts it again, and its sub-envs are truncated and step on."""
    provider = Proxied(SPEC)
    envs = OpenEnvVectorEnv(
        codec=counter_codec(),
        num_envs=2,
        provider=provider,
        protocol=protocol,
        timeouts={"step": 2.0, "connect": 30.0, "close": 1.0},
        on_server_loss="restart",
    )
    try:
        envs.reset(seed=10)
        provider.proxies[0].stall()
        os.kill(provider.pids[0], signal.SIGKILL)
        wait_for(lambda: not provider.alive(0), "server 0 gone")
        obs, rewards, terminated, truncated, infos = envs.step([0, 0])
        assert provider.restarts == [0]
        assert obs.tolist() == [10, 11]  # the last observations
        assert rewards.tolist() == [0.0, 0.0]
        assert truncated.tolist() == [True, True]
        assert not terminated.any()
        assert infos["server_lost"].tolist() == [True, True]
        envs.step([0, 0])  # autoreset on the new server
        obs, _, terminated, truncated, infos = envs.step([0, 0])
        assert obs.tolist() == [1, 1]
        assert not (terminated | truncated).any()
        assert "server_lost" not in infos
    finally:
        envs.close()


def test_async_vector_env_closes_a_reconnection_its_cancelled_step_left(gate: Path) -> None:
    """asyncio: a step whose connection was lost is cancelled while the env connects to
    the server again (the server holds a step, so the new connection waits for it). The
    connection made after the cancel is closed once it comes, not left open on the server."""
    provider = Proxied(ENTERING_SPEC)

    async def main() -> None:
        async with await AsyncOpenEnvVectorEnv.create(
            codec=counter_codec(),
            num_envs=2,
            provider=provider,
            protocol="batch",
            timeouts={"step": 30.0, "connect": 30.0, "close": 1.0},
            on_server_loss="restart",
        ) as envs:
            await envs.reset(seed=0, options={"gate": str(gate)})
            proxy = provider.proxies[0]
            accepted = proxy.accepted
            step = asyncio.ensure_future(envs.step([SLOW, 0]))
            await asyncio.to_thread(wait_for, entered(gate).exists, "the server in its step")
            proxy.cut()  # lost while the server holds the step: the env connects again
            await asyncio.to_thread(
                wait_for, lambda: proxy.accepted > accepted, "the env connecting again"
            )
            step.cancel()
            with pytest.raises(asyncio.CancelledError):
                await step
            assert proxy.connections == 1  # the new connection, still waiting for the server
            await asyncio.to_thread(gate.touch)  # the server answers it: nobody will use it
            await asyncio.to_thread(
                wait_for, lambda: proxy.connections == 0, "the unused connection closed"
            )
        assert provider.restarts == []  # it answered: reconnected, not restarted

    asyncio.run(main())
