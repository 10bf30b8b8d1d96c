"""A two-node Ray cluster on this machine for the ``ray`` rows; ``run.py`` starts it.

    python benchmarks/_ray_cluster.py    # prints {"event": "ready", "address": ...}; shuts
                                         # down at the end of its input

Run only inside a network namespace that has nothing but loopback (``benchmarks/README.md``):
Ray would otherwise talk over the host's interface address.
"""

from __future__ import annotations

import json
import os
import sys

NODE_CPUS = 2  # logical CPUs per node: room for K=2 servers of 1 CPU on either node


def main() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray.cluster_utils import Cluster

    common = {"num_cpus": NODE_CPUS, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**common, "include_dashboard": False})
    try:
        cluster.add_node(**common)
        cluster.wait_for_nodes()
        print(json.dumps({"event": "ready", "address": cluster.address}), flush=True)
        sys.stdin.read()  # until the runner closes our stdin
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
