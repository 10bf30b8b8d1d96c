"""The Ray provider on a real two-node Ray cluster: placement, games, lifetimes, failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any

import gymnasium
import numpy as np
import pytest
import ray
from ray_checks import TwoNodes, gone, live_placement_groups, server_actors, wait_until

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym._http import get_json
from openenv_gym.exceptions import (
    AuthenticationError,
    CapacityError,
    ConnectionLostError,
    EnvErrorGroup,
    ProviderError,
)
from openenv_gym.providers.ray import RayProvider

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(240)]

GUESSES = ["crane", "slate", "pilot", "mound", "bucky", "fight"]  # six valid words: a game


def play_games(envs: Any, reference: Any, seed: int) -> None:
    """Reset both on ``seed``, play six guesses in every sub-env; every result must match."""
    obs, _ = envs.reset(seed=seed)
    want, _ = reference.reset(seed=seed)
    assert obs == want
    for turn, word in enumerate(GUESSES):
        actions = np.array([f"[{word}]"] * envs.num_envs)
        got = envs.step(actions)
        ref = reference.step(actions)
        for mine, theirs in zip(got[:4], ref[:4], strict=True):
            np.testing.assert_equal(mine, theirs)
        if turn < len(GUESSES) - 1:
            assert not got[3].any()
    # six guesses end every game; a win earns 1.0, a loss the completion in [0, 1)
    assert got[2].all()
    assert not got[3].any()
    assert ((got[1] >= 0.0) & (got[1] <= 1.0)).all()
    assert len(set(got[0])) > 1  # different secrets per sub-env


def test_64_envs_on_4_servers_spread_2_per_node(cluster: TwoNodes) -> None:
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0", num_envs=64, provider="ray", num_servers=4, placement="spread"
    )
    reference = gymnasium.make_vec("openenv/Wordle-v0", num_envs=64)  # a local server
    try:
        provider = envs.unwrapped._provider
        assert isinstance(provider, RayProvider)
        actor_nodes = ray.get([actor.describe.remote() for actor in provider.actors])
        per_node = Counter(cluster.labels[info["node_id"]] for info in actor_nodes)
        assert per_node == {"a": 2, "b": 2}
        assert provider.node_ids == [info["node_id"] for info in actor_nodes]
        urls = envs.unwrapped.base_urls
        assert len(set(urls)) == 4
        assert all(url.startswith("http://127.0.0.1:") for url in urls)
        assert envs.unwrapped.protocols == ("batch",) * 4
        play_games(envs, reference, seed=11)
        play_games(envs, reference, seed=12)  # the next games, after the autoreset
        pids = [server.pid for server in provider.servers]
        names = [server.name for server in provider.servers]
        assert set(names) <= set(server_actors())
        assert len(live_placement_groups()) == 1
    finally:
        envs.close()
        reference.close()
    assert wait_until(lambda: not set(names) & set(server_actors()))
    assert wait_until(lambda: not live_placement_groups())
    assert wait_until(lambda: gone(pids)), "a server process outlived close()"


def test_pack_puts_every_server_on_one_node(cluster: TwoNodes) -> None:
    with RayProvider("echo", num_servers=2, placement="pack", num_cpus=2) as provider:
        urls = provider.start()
        assert len(set(provider.node_ids)) == 1
        assert len(set(urls)) == 2


def test_the_token_guards_each_server(cluster: TwoNodes) -> None:
    with RayProvider("echo", placement=None, token="s3cret-token") as provider:
        (url,) = provider.start()
        assert provider.client_headers() == {"Authorization": "Bearer s3cret-token"}
        with pytest.raises(AuthenticationError):
            get_json(f"{url}/health", 5.0)
        with pytest.raises(AuthenticationError):
            get_json(f"{url}/health", 5.0, headers={"Authorization": "Bearer nope"})
        assert get_json(f"{url}/health", 5.0, headers=provider.client_headers()) == (
            200,
            {"status": "healthy"},
        )


def test_single_env_custom_resources_and_runtime_env(cluster: TwoNodes) -> None:
    env = gymnasium.make(
        "openenv/Catch-v0",
        provider="ray",
        resources={"node_b": 1},
        runtime_env={"env_vars": {"OPENENV_GYM_MAX_SESSIONS": "1"}},
    )
    try:
        provider = env.unwrapped._provider
        assert [cluster.labels[node] for node in provider.node_ids] == ["b"]
        env.reset(seed=0)
        env.step(env.action_space.sample())
        # the runtime_env's variable reached the server: it holds one session at most
        with pytest.raises(CapacityError):
            gymnasium.make(
                "openenv/Catch-v0",
                base_url=env.unwrapped.base_url,
                headers=provider.client_headers(),
            )
    finally:
        env.close()


def test_killed_actor_fails_its_envs_only(cluster: TwoNodes) -> None:
    step_timeout = 10.0
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0",
        num_envs=4,
        provider="ray",
        num_servers=2,
        timeouts={"step": step_timeout},
    )
    try:
        envs.reset(seed=0)
        envs.step(np.array(["[crane]"] * 4))
        provider = envs.unwrapped._provider
        envs.step_async(np.array(["[slate]"] * 4))
        os.kill(provider.servers[0].pid, signal.SIGKILL)  # server 0's process dies mid-step
        try:
            envs.step_wait()
        except EnvErrorGroup as group:
            caught: EnvErrorGroup | None = group
        else:  # both replies were out before the kill: the next step meets the dead server
            caught = None
        if caught is None:
            with pytest.raises(EnvErrorGroup) as info:
                envs.step(np.array(["[pilot]"] * 4))
            caught = info.value
        assert caught.env_indices == [0, 1]
        # a lost connection, not the step timeout running out
        assert all(isinstance(e, ConnectionLostError) for e in caught.errors.values())
        assert sorted(caught.results) == [2, 3]  # the live server's envs did step
        for word in ("mound", "bucky"):  # and keep stepping
            envs.unwrapped.send(np.array([f"[{word}]"] * 2), env_ids=[2, 3])
            _, rewards, *_ = envs.unwrapped.recv()
            assert rewards.shape == (2,)
        # the provider tells which server is lost, and starts a new one in its place
        assert wait_until(lambda: not provider.alive(0))
        assert provider.alive(1)
        old_url = provider.servers[0].url
        new_url = provider.restart(0)
        assert new_url != old_url
        assert provider.alive(0)
        assert get_json(f"{new_url}/health", 5.0, headers=provider.client_headers())[0] == 200
        restarted = provider.servers[0]
        assert restarted.name in server_actors()
    finally:
        envs.close()
    assert wait_until(lambda: restarted.name not in server_actors())
    assert wait_until(lambda: gone([restarted.pid]))


def test_on_server_loss_restart_truncates_the_lost_envs_and_goes_on(cluster: TwoNodes) -> None:
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0",
        num_envs=4,
        provider="ray",
        num_servers=2,
        on_server_loss="restart",
        timeouts={"step": 10.0},
    )
    try:
        envs.reset(seed=3)
        envs.step(np.array(["[crane]"] * 4))
        provider = envs.unwrapped._provider
        lost = provider.servers[0]
        os.kill(lost.pid, signal.SIGKILL)
        _, _, terminated, truncated, info = envs.step(np.array(["[slate]"] * 4))
        assert truncated.tolist() == [True, True, False, False]
        assert not terminated.any()
        assert info["server_lost"].tolist() == [True, True, False, False]
        restarted = provider.servers[0]
        assert restarted.pid != lost.pid
        assert restarted.name != lost.name
        assert envs.unwrapped.base_urls[0] == restarted.url
        # NEXT_STEP: the truncated envs reset on the next step, the others play on
        truncated = envs.step(np.array(["[pilot]"] * 4))[3]
        assert not truncated.any()
        envs.step(np.array(["[mound]"] * 4))
    finally:
        envs.close()
    assert wait_until(lambda: restarted.name not in server_actors())
    assert wait_until(lambda: gone([restarted.pid]))


def test_unplaceable_servers_fail_and_leave_nothing(cluster: TwoNodes) -> None:
    provider = RayProvider("echo", resources={"no_such_resource": 1}, start_timeout=2.0)
    with pytest.raises(ProviderError, match="cannot place 1 servers"):
        provider.start()
    assert not live_placement_groups()


def test_bad_server_class_fails_with_its_error(cluster: TwoNodes) -> None:
    provider = RayProvider("no_such_module:Env", placement=None, start_timeout=60.0)
    with pytest.raises(ProviderError, match="no_such_module"):
        provider.start()


CLIENT = textwrap.dedent(
    """
    import sys, time
    import ray
    from openenv_gym.providers.ray import RayProvider

    provider = RayProvider("echo", num_servers=2, ray_address=sys.argv[1])
    provider.start()
    print(" ".join(s.name for s in provider.servers), flush=True)
    time.sleep(600)
    """
)


def test_a_client_that_dies_leaves_no_actor(cluster: TwoNodes) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT, cluster.address],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    try:
        assert child.stdout is not None
        names = child.stdout.readline().split()
        assert len(names) == 2
        assert set(names) <= set(server_actors())
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        # Ray ends the actors and the placement group of a driver that is gone
        assert wait_until(lambda: not set(names) & set(server_actors()), within=60.0)
        assert wait_until(lambda: not live_placement_groups(), within=60.0)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
