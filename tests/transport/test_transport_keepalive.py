"""A pause longer than the server's idle timeout loses nothing while the client lives.

Issue 22, finding 6: a training loop that checkpoints for 20 minutes lost every episode,
because the server (900 s idle timeout) does not count pings as activity. Our servers now
do for a client that asks on its upgrade (``OpenEnv-Gym-Keepalive: ping``), and say their
idle timeout (``OpenEnv-Gym-Idle-Timeout``); the client's keepalive thread pings its idle
connections a few times per idle timeout.

A real ``openenv-gym serve echo --idle-timeout 1.5``; the pause lasts until a plain
WebSocket opened after the env's last step (one that does not ask for the keepalive) has
been closed by the server for idleness, twice over: the env's connections were idle at
least as long, and must still step.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import gymnasium
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.exceptions import ConnectionLostError, EnvErrorGroup
from openenv_gym.transport import handshake

IDLE = 1.5
"""The server's idle timeout in these tests, s."""

SOON = 30.0
"""Seconds a wait may take before the test calls it hung."""


@pytest.fixture(scope="module")
def idle_server() -> Iterator[str]:
    """``openenv-gym serve echo`` with a short idle timeout and no token: its URL."""
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_GYM_TOKEN"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv_gym",
            "serve",
            "echo",
            "--port",
            "0",
            "--idle-timeout",
            str(IDLE),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.kill()
        proc.wait(SOON)


def _pause_past_the_idle_timeout(url: str, times: int = 2) -> None:
    """Return once a connection that sends nothing was closed for idleness, ``times`` over.

    Each such connection is opened after the previous one closed, so the pause lasts at
    least ``times`` idle timeouts.
    """
    for _ in range(times):
        with connect(url.replace("http", "ws") + "/ws", ping_interval=None) as idle:
            with pytest.raises(ConnectionClosed) as closed:
                idle.recv(timeout=SOON)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.reason == "idle timeout"


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_a_pause_past_the_idle_timeout_keeps_every_session(idle_server: str, protocol: str) -> None:
    envs = gymnasium.make_vec(
        "openenv/Echo-v0", num_envs=3, base_url=idle_server, protocol=protocol
    )
    try:
        envs.reset(seed=0)
        envs.step(["[before]"] * 3)
        _pause_past_the_idle_timeout(idle_server)  # the checkpoint
        obs, *_ = envs.step(["[after]"] * 3)
        assert all("after" in str(o) for o in obs)
    finally:
        envs.close()


def test_a_single_env_keeps_its_session_too(idle_server: str) -> None:
    env = gymnasium.make("openenv/Echo-v0", base_url=idle_server)
    try:
        env.reset(seed=0)
        _pause_past_the_idle_timeout(idle_server)
        obs, *_ = env.step("[after]")
        assert "after" in str(obs)
    finally:
        env.close()


def test_without_the_opt_in_the_server_still_closes_idle_sessions(
    idle_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the client pings all the same, but the server does not count them: what this
    # module's other tests would meet without the opt-in
    monkeypatch.setattr(handshake, "KEEPALIVE_PING", "no")
    envs = gymnasium.make_vec("openenv/Echo-v0", num_envs=2, base_url=idle_server)
    try:
        envs.reset(seed=0)
        _pause_past_the_idle_timeout(idle_server)
        with pytest.raises(EnvErrorGroup) as lost:
            envs.step(["[after]"] * 2)
        assert all(isinstance(e, ConnectionLostError) for e in lost.value.errors.values())
        assert "idle timeout" in str(lost.value)
    finally:
        envs.close()
