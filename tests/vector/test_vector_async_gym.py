"""gymnasium.vector.AsyncVectorEnv over OpenEnvEnv, with fork and spawn workers.

Each worker builds its own OpenEnvEnv, so it starts its own local server and holds its
own session; closing the vector env stops the workers and, through them, every server.
``shared_memory=False``: Gymnasium 1.4's shared memory returns stale Text observations.
"""

from __future__ import annotations

import multiprocessing

import gymnasium
import psutil
import pytest
from gymnasium.vector import AsyncVectorEnv
from vector_checks import descendants, wait_gone

pytestmark = pytest.mark.integration

NUM_ENVS = 4


def make_wordle() -> gymnasium.Env:
    return gymnasium.make("openenv_gym:openenv/Wordle-v0")


def server_pids(pids: set[int]) -> set[int]:
    """Those of ``pids`` that are ``openenv_gym serve`` processes."""
    found = set()
    for pid in pids:
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if "openenv_gym" in cmdline and "serve" in cmdline:
            found.add(pid)
    return found


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_async_vector_env_workers_each_own_a_session(context: str) -> None:
    if context not in multiprocessing.get_all_start_methods():
        pytest.fail(f"start method {context} is not available here")
    before = descendants()
    envs = AsyncVectorEnv([make_wordle] * NUM_ENVS, shared_memory=False, context=context)
    try:
        started = descendants() - before
        servers = server_pids(started)
        assert len(servers) == NUM_ENVS  # one per worker (the parent's probe env is closed)
        urls = envs.get_attr("base_url")
        assert len(set(urls)) == NUM_ENVS
        obs, _ = envs.reset(seed=[1, 2, 3, 4])
        assert isinstance(obs, tuple)
        assert all(o.startswith("You are Playing Wordle") for o in obs)
        secrets = [s["raw_state"]["game_state"]["secret_word"] for s in envs.call("state")]
        assert len(secrets) == NUM_ENVS
        for guess in ("[crane]", "[slate]", "[pious]"):
            obs, rewards, terminations, truncations, _ = envs.step((guess,) * NUM_ENVS)
            assert isinstance(obs, tuple)
            assert all(isinstance(o, str) for o in obs)
            assert rewards.shape == terminations.shape == truncations.shape == (NUM_ENVS,)
    finally:
        envs.close()
    assert not wait_gone(started), "workers or their servers outlived close()"
