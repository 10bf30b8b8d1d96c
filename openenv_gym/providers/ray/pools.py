"""Pools: named, detached server actors that outlive the process that started them.

:func:`pool_up` starts one (``openenv-gym ray up NAME``);
``RayProvider(pool=NAME)`` attaches to it (:func:`attach`) and ``close()`` leaves it
running; :func:`pool_down` ends it; :func:`pool_status` lists them.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from openenv_gym.config import env_float
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.ray.actor import NAMESPACE, RayServer
from openenv_gym.providers.ray.cluster import connect, disconnect, import_ray
from openenv_gym.providers.ray.launch import (
    DEFAULT_START_TIMEOUT,
    Launched,
    Plan,
    answers,
    check_name,
    check_reachable,
    describe,
    launch,
    release,
)
from openenv_gym.providers.ray.placement import Placement

__all__ = ["attach", "pool_actors", "pool_down", "pool_status", "pool_up"]


def pool_actors(ray: Any, pool: str) -> list[tuple[int, str]]:
    """``(k, name)`` of the pool's live actors, in server order."""
    found = []
    prefix = f"{pool}/"
    for entry in ray.util.list_named_actors(all_namespaces=True):
        name = entry["name"]
        if entry["namespace"] == NAMESPACE and name.startswith(prefix):
            index = name[len(prefix) :]
            if index.isdigit():
                found.append((int(index), name))
    return sorted(found)


def attach(ray: Any, pool: str, timeout: float, server: str | None) -> tuple[list[RayServer], str]:
    """The servers of the running pool ``pool`` and its token.

    Raises:
        ProviderError: There is no such pool, or its servers do not answer.
        ConfigurationError: The pool serves another environment than ``server``.
    """
    names = [name for _, name in pool_actors(ray, pool)]
    if not names:
        raise ProviderError(f"no Ray pool named {pool!r} (start one: openenv-gym ray up {pool})")
    actors = [ray.get_actor(name, namespace=NAMESPACE) for name in names]
    described = describe(ray, actors, timeout, "answer")
    serves = str(described[0]["server"])
    if server not in (None, "", "generic") and server.lower() != serves.lower():
        raise ConfigurationError(f"Ray pool {pool!r} serves {serves!r}, not {server!r}")
    servers = [
        RayServer(name, info["url"], info["node_id"], info["pid"])
        for name, info in zip(names, described, strict=True)
    ]
    return servers, str(described[0]["token"])


def pool_up(
    name: str,
    server: str,
    *,
    num_servers: int = 1,
    placement: Placement | None = "spread",
    num_cpus: float = 1.0,
    resources: Mapping[str, float] | None = None,
    runtime_env: Mapping[str, Any] | None = None,
    ray_address: str | None = None,
    token: str | None = None,
    server_options: Mapping[str, Any] | None = None,
    max_restarts: int = 0,
    start_timeout: float | None = None,
) -> list[RayServer]:
    """Start a named pool of detached server actors that outlives this process.

    Trainers attach with ``provider="ray", pool=name`` (:class:`RayProvider`); the pool
    runs until :func:`pool_down`. Arguments as for :class:`RayProvider`.

    Raises:
        ProviderError: A pool of that name runs already, or the servers did not start
            (whatever did start is removed again).
    """
    check_name(name, "pool name")
    if name.startswith("run-"):
        raise ConfigurationError("pool names starting with 'run-' are kept for private servers")
    timeout = start_timeout or env_float("OPENENV_GYM_START_TIMEOUT", None)
    plan = Plan(
        server=server,
        num_servers=num_servers,
        placement=placement,
        num_cpus=num_cpus,
        resources=resources or {},
        runtime_env=runtime_env,
        server_options=server_options or {},
        max_restarts=max_restarts,
        start_timeout=timeout or DEFAULT_START_TIMEOUT,
    )
    ray = import_ray()
    owns = connect(ray, ray_address, start_local=False)
    launched = Launched(actors=[])
    try:
        if pool_actors(ray, name):
            raise ProviderError(f"a Ray pool named {name!r} runs already")
        secret = token or secrets.token_urlsafe(32)
        servers = launch(ray, plan, name, launched, secret, detached=True)
        check_reachable(servers, secret, min(plan.start_timeout, 10.0))
    except BaseException:
        release(ray, launched)
        raise
    finally:
        if owns:
            disconnect(ray)
    return servers


def pool_down(name: str, *, ray_address: str | None = None) -> int:
    """Kill the actors of the named pool and remove its placement group.

    Returns:
        How many server actors were killed (0: no such pool).
    """
    check_name(name, "pool name")
    ray = import_ray()
    owns = connect(ray, ray_address, start_local=False)
    try:
        actors = [ray.get_actor(n, namespace=NAMESPACE) for _, n in pool_actors(ray, name)]
        launched = Launched(actors=actors)
        # the placement group is named in the namespace of whoever made it: ask the actors
        groups = answers(ray, [actor.placement_group.remote() for actor in actors])
        by_id = {group.id: group for group in groups if group is not None}
        launched.placement_group = next(iter(by_id.values()), None)
        killed = len(launched.actors)
        release(ray, launched)
    finally:
        if owns:
            disconnect(ray)
    return killed


def pool_status(
    name: str | None = None, *, ray_address: str | None = None, timeout: float = 10.0
) -> dict[str, list[RayServer]]:
    """The servers of every pool (or of the named one), by pool name.

    Private servers of running :class:`RayProvider` instances are not pools and are left
    out. A server that does not answer within ``timeout`` raises.
    """
    ray = import_ray()
    owns = connect(ray, ray_address, start_local=False)
    try:
        pools: dict[str, list[str]] = {}
        for entry in ray.util.list_named_actors(all_namespaces=True):
            group, _, index = entry["name"].rpartition("/")
            if entry["namespace"] != NAMESPACE or not index.isdigit() or not group:
                continue
            if group.startswith("run-") or (name is not None and group != name):
                continue
            pools.setdefault(group, []).append(entry["name"])
        status: dict[str, list[RayServer]] = {}
        for group, names in sorted(pools.items()):
            names.sort(key=lambda n: int(n.rpartition("/")[2]))
            actors = [ray.get_actor(n, namespace=NAMESPACE) for n in names]
            described = describe(ray, actors, timeout, "answer")
            status[group] = [
                RayServer(n, info["url"], info["node_id"], info["pid"])
                for n, info in zip(names, described, strict=True)
            ]
        return status
    finally:
        if owns:
            disconnect(ray)
