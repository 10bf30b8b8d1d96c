"""Ray's strict placements on the two-node cluster: ``strict-spread`` and ``strict-pack``.

docs/scale-out.md: ``"strict-spread"`` puts each server on a node of its own and
``"strict-pack"`` all of them on one node; Ray refuses a strict placement it cannot meet
rather than bend it (issue 23, item 5: neither was ever used in a test). Each test checks
where the servers ran, the placement group Ray was asked for, and the refusal.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import ray
from ray_checks import TwoNodes, live_placement_groups, wait_until

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import ProviderError
from openenv_gym.providers.ray import RayProvider

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(240)]


def live_strategies() -> list[str]:
    """The strategy of each placement group not removed."""
    return [
        info["strategy"]
        for info in ray.util.placement_group_table().values()
        if info["state"] != "REMOVED"
    ]


def test_strict_spread_puts_each_server_on_a_node_of_its_own(cluster: TwoNodes) -> None:
    envs = gymnasium.make_vec(
        "openenv/Echo-v0", num_envs=4, provider="ray", num_servers=2, placement="strict-spread"
    )
    try:
        provider = envs.unwrapped._provider
        assert sorted(cluster.labels[node] for node in provider.node_ids) == ["a", "b"]
        assert live_strategies() == ["STRICT_SPREAD"]
        envs.reset(seed=0)
        obs, *_ = envs.step(np.array(["a", "b", "c", "d"]))
        assert list(obs) == ["a", "b", "c", "d"]  # both servers answer
    finally:
        envs.close()
    assert wait_until(lambda: not live_placement_groups())


def test_strict_spread_refuses_more_servers_than_nodes(cluster: TwoNodes) -> None:
    provider = RayProvider("echo", num_servers=3, placement="strict-spread", start_timeout=2.0)
    with pytest.raises(ProviderError, match="cannot place 3 servers"):
        provider.start()  # "spread" would place them 2 + 1
    assert not live_placement_groups()


def test_strict_pack_puts_every_server_on_one_node(cluster: TwoNodes) -> None:
    with RayProvider("echo", num_servers=2, placement="strict-pack", num_cpus=2) as provider:
        assert len(set(provider.node_ids)) == 1
        assert live_strategies() == ["STRICT_PACK"]
    assert wait_until(lambda: not live_placement_groups())


def test_strict_pack_refuses_servers_that_fit_on_no_single_node(cluster: TwoNodes) -> None:
    # two servers of 3 CPUs: 6 on one node of 4 ("pack" would use both nodes)
    provider = RayProvider(
        "echo", num_servers=2, placement="strict-pack", num_cpus=3, start_timeout=2.0
    )
    with pytest.raises(ProviderError, match="cannot place 2 servers"):
        provider.start()
    assert not live_placement_groups()
