"""Placement groups: one bundle per server, spread evenly over the nodes or packed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["NODE_LABEL", "PLACEMENTS", "Placement", "placement_group", "spread_evenly"]

PLACEMENTS: dict[str, str] = {
    "spread": "SPREAD",
    "pack": "PACK",
    "strict-spread": "STRICT_SPREAD",
    "strict-pack": "STRICT_PACK",
}
"""``placement=`` values and the Ray placement-group strategy of each."""

Placement = Literal["spread", "pack", "strict-spread", "strict-pack"]
"""The keys of :data:`PLACEMENTS` (``None``: no placement group)."""

NODE_LABEL = "ray.io/node-id"
"""The label Ray gives every node."""


def placement_group(
    ray: Any,
    placement: str | None,
    bundle: Mapping[str, float],
    count: int,
    name: str,
    lifetime: str | None,
) -> Any:
    """``count`` bundles (one per server), placed with ``placement``.

    Ray's SPREAD puts bundles on distinct nodes first and then packs the rest, so 4
    servers on 2 nodes may land 3 + 1. ``"spread"`` pins each bundle to a node (the
    ``ray.io/node-id`` label) so that they are as even as the nodes' sizes allow.
    """
    bundles = [dict(bundle)] * count
    strategy = PLACEMENTS[placement or "spread"]
    if placement == "spread":
        nodes = spread_evenly(ray.nodes(), bundle, count)
        if nodes is not None:
            selectors = [{NODE_LABEL: node} for node in nodes]
            try:
                return ray.util.placement_group(
                    bundles,
                    strategy=strategy,
                    name=name,
                    lifetime=lifetime,
                    bundle_label_selector=selectors,
                )
            except TypeError:  # a Ray without bundle label selectors: its own SPREAD
                pass
    return ray.util.placement_group(bundles, strategy=strategy, name=name, lifetime=lifetime)


def spread_evenly(
    nodes: list[dict[str, Any]], bundle: Mapping[str, float], count: int
) -> list[str] | None:
    """The node of each of ``count`` bundles, as even as the nodes' sizes allow.

    Servers go round the nodes that can hold one more; None when the nodes cannot hold
    them all or do not carry the ``ray.io/node-id`` label (Ray then places them).

    >>> big = {"NodeID": "a", "Alive": True, "Resources": {"CPU": 8.0}, "Labels": {}}
    >>> small = {"NodeID": "b", "Alive": True, "Resources": {"CPU": 1.0}, "Labels": {}}
    >>> for node in (big, small):
    ...     node["Labels"][NODE_LABEL] = node["NodeID"]
    >>> spread_evenly([big, small], {"CPU": 1.0}, 4)
    ['a', 'b', 'a', 'a']
    """
    room: dict[str, int] = {}
    for node in nodes:
        node_id = node.get("Labels", {}).get(NODE_LABEL)
        if not node.get("Alive") or node_id is None:
            continue
        total = node.get("Resources", {})
        room[node_id] = min(int(total.get(key, 0.0) // need) for key, need in bundle.items())
    if sum(room.values()) < count:
        return None
    placed: list[str] = []
    while len(placed) < count:
        for node_id in sorted(room, key=lambda n: -room[n]):
            if room[node_id] > 0 and len(placed) < count:
                placed.append(node_id)
                room[node_id] -= 1
    return placed
