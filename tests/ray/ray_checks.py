"""Helpers of tests/ray: the session cluster's record, what is left on it, waiting."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any

import psutil
import ray

NODE_CPUS = 4


def loopback_only() -> bool:
    """Whether this process's network namespace has no interface but ``lo``."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


@dataclass(frozen=True)
class TwoNodes:
    """The session's cluster: its address and its nodes' ids by label."""

    address: str
    node_a: str
    node_b: str

    @property
    def labels(self) -> dict[str, str]:
        """Node id -> ``"a"`` / ``"b"``."""
        return {self.node_a: "a", self.node_b: "b"}


def server_actors() -> list[str]:
    """Names of the live server actors (every provider's and pool's)."""
    from openenv_gym.providers.ray import NAMESPACE

    return sorted(
        entry["name"]
        for entry in ray.util.list_named_actors(all_namespaces=True)
        if entry["namespace"] == NAMESPACE
    )


def live_placement_groups() -> list[str]:
    """Names of the placement groups not removed."""
    return sorted(
        info["name"]
        for info in ray.util.placement_group_table().values()
        if info["state"] != "REMOVED"
    )


def wait_until(predicate: Any, within: float = 20.0) -> bool:
    """Poll ``predicate`` until true (a bound on waiting, not a speed check)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())


def gone(pids: list[int]) -> bool:
    """Whether every process in ``pids`` has exited."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True
