"""Named pools: ``openenv-gym ray up/status/down`` and trainers attaching by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from ray_checks import TwoNodes, gone, live_placement_groups, server_actors, wait_until

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.ray import RayProvider, pool_down, pool_up

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(240)]


def cli(*args: str, address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv_gym", "ray", *args, "--address", address],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
        check=False,
    )


def test_cli_pool_outlives_its_command_and_trainers_attach(cluster: TwoNodes) -> None:
    up = cli("up", "words", "wordle", "--num-servers", "2", address=cluster.address)
    assert up.returncode == 0, up.stderr
    # it says what it waits for (stderr), the URLs alone go to stdout
    starting = "openenv-gym: starting 2 server(s) of pool 'words' on the Ray cluster"
    assert f"{starting}...\n" in up.stderr, up.stderr
    assert f"{starting}: done in " in up.stderr
    urls = up.stdout.split()
    assert len(urls) == 2
    try:
        # the command has exited; its detached actors serve on
        assert server_actors() == ["words/0", "words/1"]
        status = cli("status", "--json", address=cluster.address)
        assert status.returncode == 0, status.stderr
        listing = json.loads(status.stdout)
        assert [s["url"] for s in listing["words"]] == urls
        assert {cluster.labels[s["node_id"]] for s in listing["words"]} == {"a", "b"}
        pids = [s["pid"] for s in listing["words"]]
        # two trainers attach by name, one after the other; closing leaves the pool running
        for seed in (1, 2):
            envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=8, provider="ray", pool="words")
            try:
                assert envs.unwrapped.base_urls == urls
                envs.reset(seed=seed)
                _, rewards, *_ = envs.step(np.array(["[crane]"] * 8))
                assert rewards.shape == (8,)
            finally:
                envs.close()
            assert server_actors() == ["words/0", "words/1"]
        with pytest.raises(ConfigurationError, match="serves 'wordle', not 'echo'"):
            gymnasium.make("openenv/Echo-v0", provider="ray", pool="words")
        again = cli("up", "words", "wordle", address=cluster.address)
        assert again.returncode == 2
        assert "runs already" in again.stderr
    finally:
        down = cli("down", "words", address=cluster.address)
    assert down.returncode == 0, down.stderr
    assert "stopped 2 server(s)" in down.stdout
    assert wait_until(lambda: server_actors() == [])
    assert wait_until(lambda: not live_placement_groups())
    assert wait_until(lambda: gone(pids))
    assert cli("down", "words", address=cluster.address).returncode == 1
    missing = cli("status", "words", address=cluster.address)
    assert missing.returncode == 1
    assert "no Ray pool named 'words'" in missing.stderr


def test_python_pool_api_and_a_missing_pool(cluster: TwoNodes) -> None:
    servers = pool_up("echoes", "echo", num_servers=1, placement="pack")
    try:
        with RayProvider(pool="echoes") as provider:
            assert provider.start() == [servers[0].url]
            assert provider.actors == []  # the pool's actors are not this provider's
    finally:
        assert pool_down("echoes") == 1
    with pytest.raises(ProviderError, match="no Ray pool named 'echoes'"):
        RayProvider(pool="echoes").start()
