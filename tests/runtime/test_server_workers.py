"""Environments not marked concurrent: one worker process per session, one batched endpoint.

``openenv-gym serve --env openenv_gym_worker_envs:LoneEnv`` (a class with
``SUPPORTS_CONCURRENT_SESSIONS = False``): every session lives in a worker process of its
own, every sub-env of a vector env is still stepped in one batched frame, a worker that
dies fails its slot alone, and no worker outlives the server. ``--concurrent`` hosts them
all in the server's process.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading

import gymnasium
import psutil
import pytest
from openenv_gym_test_envs import running_cli_server
from websockets.sync.client import connect

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym._http import get_json, post_json
from openenv_gym.exceptions import EnvErrorGroup

pytestmark = pytest.mark.integration

LONE = "openenv_gym_worker_envs:LoneEnv"
N = 4


def _actions(*messages: str) -> tuple[str, ...]:
    return messages  # one text field: the action space is Text


def _vector(url: str, n: int = N) -> gymnasium.vector.VectorEnv:
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=n, base_url=url)
    assert envs.unwrapped.protocols == ("batch",)
    return envs


def _descendants(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def _gone(*pids: int) -> None:
    """Wait until the processes are gone (a zombie waiting for its reaper counts)."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(procs, timeout=30)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"still running: {[p.pid for p in alive]}"


@pytest.fixture
def lone():
    with running_cli_server(LONE) as server:
        yield server


def test_each_session_has_a_process_of_its_own(lone):
    envs = _vector(lone.url)
    try:
        obs, _ = envs.reset(seed=list(range(N)))
        pids = obs["pid"].tolist()
        assert len(set(pids)) == N  # N sessions, N processes
        assert lone.proc.pid not in pids
        assert set(pids) <= _descendants(lone.proc.pid)
        # the counter is per process: each session counts on its own
        obs, *_ = envs.step(_actions(*["count"] * N))
        assert obs["count"].tolist() == [1] * N
        assert obs["pid"].tolist() == pids  # the same worker for the whole session
    finally:
        envs.close()


def test_concurrent_hosts_every_session_in_the_server_process():
    with running_cli_server(LONE, "--concurrent") as server:
        envs = _vector(server.url)
        try:
            obs, _ = envs.reset(seed=list(range(N)))
            assert obs["pid"].tolist() == [server.proc.pid] * N
            assert not _descendants(server.proc.pid)  # no worker, no zygote
            obs, *_ = envs.step(_actions(*["count"] * N))
            assert obs["count"].tolist() == [1, 2, 3, 4]  # one process, one counter
        finally:
            envs.close()


def test_a_worker_that_dies_fails_its_slot_alone_and_reset_starts_over(lone):
    envs = _vector(lone.url)
    try:
        obs, _ = envs.reset(seed=list(range(N)))
        before = obs["pid"].tolist()
        with pytest.raises(EnvErrorGroup) as failed:
            envs.step(_actions("count", "crash", "count", "count"))
        assert failed.value.env_indices == [1]
        assert "worker process" in str(failed.value.errors[1])
        assert sorted(failed.value.results) == [0, 2, 3]
        _gone(before[1])
        obs, _ = envs.reset(seed=list(range(N)))  # the lost session starts over elsewhere
        after = obs["pid"].tolist()
        assert after[1] != before[1]
        assert [after[k] for k in (0, 2, 3)] == [before[k] for k in (0, 2, 3)]
        obs, *_ = envs.step(_actions(*["count"] * N))
        assert obs["count"].tolist() == [2, 1, 2, 2]
    finally:
        envs.close()


def test_a_busy_worker_does_not_hold_up_other_connections(lone, tmp_path):
    flag = tmp_path / "go"
    ws_url = lone.url.replace("http://", "ws://") + "/ws"
    replies: list[dict] = []
    with connect(ws_url, proxy=None, open_timeout=10) as slow:
        slow.send('{"type":"reset"}')
        json.loads(slow.recv(timeout=30))
        slow.send(json.dumps({"type": "step", "data": {"message": f"wait:{flag}"}}))
        reader = threading.Thread(target=lambda: replies.append(json.loads(slow.recv(timeout=60))))
        reader.start()
        try:
            # while that worker waits, another session is served, start to end
            with connect(ws_url, proxy=None, open_timeout=10) as other:
                other.send('{"type":"reset"}')
                json.loads(other.recv(timeout=30))
                other.send('{"type":"step","data":{"message":"count"}}')
                answered = json.loads(other.recv(timeout=30))
            assert answered["type"] == "observation"
            assert get_json(lone.url + "/health", timeout=10) == (200, {"status": "healthy"})
            assert not replies  # the slow step is still running
        finally:
            flag.touch()
            reader.join(60)
    assert replies[0]["type"] == "observation"


def test_max_workers_is_the_capacity():
    with running_cli_server(LONE, "--max-workers", "2") as server:
        ws_url = server.url.replace("http://", "ws://") + "/ws"
        with connect(ws_url, proxy=None) as first, connect(ws_url, proxy=None) as second:
            for ws in (first, second):
                ws.send('{"type":"reset"}')
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
            with connect(ws_url, proxy=None) as third:
                reply = json.loads(third.recv(timeout=30))
        assert reply["data"]["code"] == "CAPACITY_REACHED"
        assert reply["data"]["max_sessions"] == 2


def test_http_reset_and_step_run_in_a_worker(lone):
    status, body = post_json(lone.url + "/reset", {}, 30)
    assert status == 200
    assert body["observation"]["pid"] != lone.proc.pid
    status, body = post_json(lone.url + "/step", {"action": {"message": "count"}}, 30)
    assert (status, body["observation"]["count"]) == (200, 1)
    assert get_json(lone.url + "/metadata", timeout=10)[1]["name"] == "LoneEnv"


def test_workers_die_with_the_server_however_it_ends():
    with running_cli_server(LONE) as server:
        envs = _vector(server.url)
        try:
            obs, _ = envs.reset(seed=list(range(N)))
            family = _descendants(server.proc.pid)  # the zygote and its workers
            assert set(obs["pid"].tolist()) < family
            os.kill(server.proc.pid, signal.SIGKILL)
            _gone(*family)
        finally:
            envs.close()
