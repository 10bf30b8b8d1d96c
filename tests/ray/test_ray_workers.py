"""A class not marked concurrent on Ray: the actor's server forks a worker per session.

``provider="ray", server="openenv_gym_worker_envs:LoneEnv"`` (tests/runtime's class with
``SUPPORTS_CONCURRENT_SESSIONS = False``): the server inside the Ray actor hosts every
session in a worker process of its own (a zygote it starts, from the actor's thread), the
vector env still steps them batched, and the workers go with the actor.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium
import psutil
import pytest
from ray_checks import TwoNodes, wait_until

import openenv_gym  # noqa: F401 - registers the openenv/* ids

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(240)]

RUNTIME_TESTS = Path(__file__).resolve().parent.parent / "runtime"


def test_sessions_of_a_class_not_marked_concurrent_get_workers_in_the_actor(
    cluster: TwoNodes,
) -> None:
    envs = gymnasium.make_vec(
        "openenv/Generic-v0",
        num_envs=4,
        provider="ray",
        server="openenv_gym_worker_envs:LoneEnv",
        runtime_env={"env_vars": {"PYTHONPATH": str(RUNTIME_TESTS)}},
    )
    try:
        assert envs.unwrapped.protocols == ("batch",)
        obs, _ = envs.reset(seed=[0, 1, 2, 3])
        pids = obs["pid"].tolist()
        actor = envs.unwrapped._provider.servers[0].pid
        assert len(set(pids)) == 4
        assert actor not in pids
        assert set(pids) <= {p.pid for p in psutil.Process(actor).children(recursive=True)}
        obs, *_ = envs.step(("count",) * 4)
        assert obs["count"].tolist() == [1] * 4  # one process, one counter, each
    finally:
        envs.close()
    assert wait_until(lambda: not any(_running(p) for p in pids))


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
