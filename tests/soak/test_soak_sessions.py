"""Soak: many sessions on one real server, stepped without a lost step or a leak.

``gymnasium.make_vec("openenv/Echo-v0", num_envs=N, base_url=...)`` against one
``openenv-gym serve echo --max-sessions N`` subprocess, over each wire protocol (the
batched protocol, ``docs/protocol.md`` section 3, and OpenEnv's JSON ``/ws``, section 2).
Every step sends each sub-env a message never sent before; a step is *lost* for a
sub-env when its observation is not that message, its reward not Echo's for it, or its
``metadata["step"]`` (the server's own step count) not the client's. At the end every
instance's ``state`` must count exactly the steps sent. Then the server must have freed
everything: all N sessions can be opened again (its capacity is exactly N), its file
descriptors are back, and its resident memory grew by less than :data:`RSS_BOUND`
while it stepped.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import psutil
import pytest
from soak_support import SCALE, Closed, Figures, Served, mib, raw_connect, receive, served

import openenv_gym  # noqa: F401  (registers the openenv/* ids)
from openenv_gym.protocol import batch as bp
from openenv_gym_servers.echo.environment import REWARD_PER_CHARACTER

pytestmark = [
    pytest.mark.soak,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(SCALE.timeout),
]

WARMUP = 5
"""Steps before the memory baseline (imports, first allocations, caches)."""
RSS_BOUND = 64 * 2**20
"""Most the server's resident memory may grow while N sessions step (generous: ~0 seen)."""
CLIENT_RSS_BOUND = 256 * 2**20
"""Most this process's resident memory may grow meanwhile."""
FD_SLACK = 8


@pytest.fixture(scope="module")
def echo_server() -> Iterator[Served]:
    """One Echo server whose capacity is exactly the soak's session count."""
    with served("echo", "--max-sessions", str(SCALE.sessions)) as server:
        yield server


def _messages(k: int, n: int) -> tuple[str, ...]:
    """Step ``k``'s message for each of ``n`` sub-envs: unique, all of one length."""
    return tuple(f"{k:07d}:{i:05d}" for i in range(n))


def _lost(
    step: tuple[Any, ...], sent: tuple[str, ...], expected_count: int
) -> tuple[int, set[int]]:
    """Lost steps of one vector step, and the sub-envs that lost them."""
    obs, rewards, terminated, truncated, infos = step
    echoed = np.fromiter(map(operator.ne, obs, sent), bool, len(sent))
    counts = np.asarray(infos["metadata"]["step"])
    bad = (
        echoed
        | (counts != expected_count)
        | ~np.isclose(rewards, REWARD_PER_CHARACTER * len(sent[0]))
        | np.asarray(terminated)
        | np.asarray(truncated)
    )
    where = np.flatnonzero(bad)
    return len(where), set(where.tolist())


def _capacity_free(server: Served, n: int, within: float = 30.0) -> bool:
    """Whether all ``n`` sessions can be opened again (the server freed every one)."""
    deadline = time.monotonic() + within
    while True:
        with raw_connect(server.ws + "/batch", [bp.SUBPROTOCOL]) as ws:
            client = bp.BatchClient("soak-capacity")
            client.send_hello()
            client.send_open(range(n))
            for frame in client.data_to_send():
                ws.send(frame)
            events = []
            while len(events) < 2:
                answer = receive(ws)
                assert not isinstance(answer, Closed), answer
                client.receive_data(answer)
                events += client.events_received()
            opened = events[1]
            assert isinstance(opened, bp.BatchReplyReceived)
            if not opened.errors:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_sessions_step_without_loss_or_leak(
    protocol: str, echo_server: Served, figures: Figures
) -> None:
    n = SCALE.sessions
    steps = SCALE.batch_steps if protocol == "batch" else SCALE.json_steps
    me = psutil.Process()
    server_fds = echo_server.fds()
    started = time.perf_counter()
    envs = gymnasium.make_vec(
        "openenv/Echo-v0", num_envs=n, base_url=echo_server.url, protocol=protocol
    )
    lost, losers = 0, set()
    try:
        assert set(envs.get_attr("protocol")) == {protocol}
        envs.reset(seed=0)
        for k in range(WARMUP):
            sent = _messages(k, n)
            lost_now, where = _lost(envs.step(sent), sent, k + 1)
            lost, losers = lost + lost_now, losers | where
        rss0, client_rss0 = echo_server.rss(), me.memory_info().rss
        peak = rss0
        stepping = time.perf_counter()
        for k in range(WARMUP, WARMUP + steps):
            sent = _messages(k, n)
            lost_now, where = _lost(envs.step(sent), sent, k + 1)
            lost, losers = lost + lost_now, losers | where
            if k % 50 == 0:
                peak = max(peak, echo_server.rss())
        elapsed = time.perf_counter() - stepping
        rss1, client_rss1 = echo_server.rss(), me.memory_info().rss
        counts = [state["step_count"] for state in envs.call("state")]
    finally:
        envs.close()
    freed = _capacity_free(echo_server, n)
    fds_back = _wait_fds(echo_server, server_fds + FD_SLACK)
    figures.values.update(
        sessions=n,
        steps=steps + WARMUP,
        session_steps=n * (steps + WARMUP),
        lost_steps=lost,
        server_rss_mib=round(mib(rss0), 1),
        server_rss_growth_mib=round(mib(rss1 - rss0), 2),
        server_rss_peak_mib=round(mib(peak), 1),
        client_rss_growth_mib=round(mib(client_rss1 - client_rss0), 2),
        session_steps_per_s=round(n * steps / elapsed),
        wall_s=round(time.perf_counter() - started, 1),
    )
    assert lost == 0, f"{lost} lost steps, sub-envs {sorted(losers)[:20]}..."
    assert counts == [steps + WARMUP] * n, "the server's step counts differ from the client's"
    assert rss1 - rss0 < RSS_BOUND, f"server RSS grew {mib(rss1 - rss0):.1f} MiB"
    assert client_rss1 - client_rss0 < CLIENT_RSS_BOUND
    assert freed, f"the server did not free all {n} sessions after close()"
    assert fds_back, f"server file descriptors: {server_fds} before, {echo_server.fds()} after"
    echo_server.assert_alive()


def _wait_fds(server: Served, at_most: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while server.fds() > at_most:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
