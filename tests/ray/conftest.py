"""Fixtures of tests/ray: one real two-node Ray cluster on this machine for the session.

Ray picks the host's interface address even when told 127.0.0.1, and tests here may only
send traffic to loopback addresses, so these tests run only in a network namespace that
has nothing but loopback (``bash scripts/test-ray``, as ``scripts/test`` does). Outside
one, they fail (they never skip: CI must run them).

The cluster has two nodes of 4 logical CPUs each, labelled with the custom resources
``node_a`` and ``node_b``, so a test can tell where an actor ran. Every test starts and
closes its own providers; the cluster is shared, and every test is checked for server
actors left behind.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray_checks import (
    NODE_CPUS,
    TwoNodes,
    live_placement_groups,
    loopback_only,
    server_actors,
    wait_until,
)


@pytest.fixture(scope="session")
def cluster() -> Iterator[TwoNodes]:
    """A head and a worker node, this process connected as the driver."""
    if not loopback_only():
        pytest.fail(
            "the ray tests start a Ray cluster: run them in a loopback-only network "
            "namespace, `bash scripts/test-ray` (shared/RAY.md); interfaces here: "
            f"{[name for _, name in socket.if_nameindex()]}"
        )
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    common: dict[str, Any] = {"num_cpus": NODE_CPUS, "node_ip_address": "127.0.0.1"}
    made = Cluster(
        initialize_head=True,
        head_node_args={**common, "resources": {"node_a": NODE_CPUS}, "include_dashboard": False},
    )
    try:
        made.add_node(**common, resources={"node_b": NODE_CPUS})
        made.wait_for_nodes()
        ray.init(address=made.address, logging_level="WARNING")
        nodes = {
            label: node["NodeID"]
            for node in ray.nodes()
            if node["Alive"]
            for label in ("node_a", "node_b")
            if label in node["Resources"]
        }
        yield TwoNodes(made.address, nodes["node_a"], nodes["node_b"])
    finally:
        ray.shutdown()
        made.shutdown()


@pytest.fixture(autouse=True)
def no_leftovers(cluster: TwoNodes) -> Iterator[None]:
    """Fail a test that leaves a server actor or a placement group behind."""
    before = set(server_actors())
    yield
    assert wait_until(lambda: set(server_actors()) <= before), (
        f"server actors left behind: {sorted(set(server_actors()) - before)}"
    )
    assert wait_until(lambda: not live_placement_groups()), (
        f"placement groups left behind: {live_placement_groups()}"
    )
