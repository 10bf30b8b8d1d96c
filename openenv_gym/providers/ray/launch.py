"""Starting a group of server actors, finding out where they run, and ending them.

A :class:`Plan` says what to start (checked when made); :func:`launch` starts it as actors
``<group>/<k>`` (in a placement group, unless ``placement=None``) and waits until each
tells its URL; :func:`release` kills them and removes the placement group.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openenv_gym._http import get_json
from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError, ProviderError
from openenv_gym.providers.ray.actor import NAMESPACE, RayServer, remote_actor
from openenv_gym.providers.ray.placement import PLACEMENTS, placement_group

__all__ = [
    "DEFAULT_START_TIMEOUT",
    "Launched",
    "Plan",
    "answers",
    "check_name",
    "check_reachable",
    "describe",
    "launch",
    "release",
    "start_actor",
]

logger = logging.getLogger("openenv_gym.providers")

DEFAULT_START_TIMEOUT = 120.0
"""Seconds for servers to come up: a worker process each, maybe a runtime_env to build."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


@dataclass(slots=True)
class Launched:
    """What one launch made, kept by the finalizer that releases it."""

    actors: list[Any]
    placement_group: Any = None


def check_name(name: str, what: str) -> str:
    """``name`` if it is a valid pool or group name.

    Raises:
        ConfigurationError: It is not 1-63 letters, digits, ``_``, ``.`` or ``-``.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"{what} must be 1-63 letters, digits, '_', '.' or '-' (starting with a letter "
            f"or digit), got {name!r}"
        )
    return name


@dataclass(frozen=True, slots=True)
class Plan:
    """How to start a group of servers (checked when made)."""

    server: str
    num_servers: int
    placement: str | None
    num_cpus: float
    resources: Mapping[str, float]
    runtime_env: Mapping[str, Any] | None
    server_options: Mapping[str, Any]
    max_restarts: int
    start_timeout: float

    def __post_init__(self) -> None:
        if not isinstance(self.server, str) or not self.server:
            raise ConfigurationError(f"server must be a name or module:Class, got {self.server!r}")
        count = self.num_servers
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigurationError(f"num_servers must be a positive integer, got {count!r}")
        if self.placement is not None and self.placement not in PLACEMENTS:
            known = ", ".join(repr(p) for p in PLACEMENTS)
            raise ConfigurationError(f"placement must be {known} or None, got {self.placement!r}")
        cpus = self.num_cpus
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not cpus >= 0:
            raise ConfigurationError(f"num_cpus must be a number >= 0, got {cpus!r}")
        if not isinstance(self.resources, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int | float) and v > 0
            for k, v in self.resources.items()
        ):
            raise ConfigurationError(
                f"resources must map names to amounts > 0, got {self.resources!r}"
            )
        if self.placement is not None and cpus == 0 and not self.resources:
            raise ConfigurationError(
                "a placement group needs num_cpus > 0 or resources= (Ray refuses empty bundles)"
            )
        if self.runtime_env is not None and not isinstance(self.runtime_env, Mapping):
            raise ConfigurationError(f"runtime_env must be a mapping, got {self.runtime_env!r}")
        if not isinstance(self.server_options, Mapping):
            raise ConfigurationError(
                f"server_options must be a mapping, got {self.server_options!r}"
            )
        restarts = self.max_restarts
        if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < -1:
            raise ConfigurationError(f"max_restarts must be an integer >= -1, got {restarts!r}")
        if not self.start_timeout > 0:
            raise ConfigurationError(f"start_timeout must be > 0, got {self.start_timeout!r}")
        object.__setattr__(self, "resources", dict(self.resources))  # a copy of our own
        object.__setattr__(self, "server_options", dict(self.server_options))

    @property
    def bundle(self) -> dict[str, float]:
        """What each server asks of a node."""
        bundle = {"CPU": float(self.num_cpus)} if self.num_cpus else {}
        return {**bundle, **{k: float(v) for k, v in self.resources.items()}}


def launch(
    ray: Any, plan: Plan, group: str, launched: Launched, token: str, detached: bool
) -> list[RayServer]:
    """Start the servers of ``plan`` as actors ``<group>/<k>``; fill ``launched`` as it goes.

    The caller releases ``launched`` if this raises.
    """
    if plan.placement is not None:
        launched.placement_group = placement_group(
            ray,
            plan.placement,
            plan.bundle,
            plan.num_servers,
            f"{NAMESPACE}/{group}",
            "detached" if detached else None,
        )
        try:
            ray.get(launched.placement_group.ready(), timeout=plan.start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise ProviderError(
                f"the Ray cluster cannot place {plan.num_servers} servers of {plan.bundle} "
                f"({plan.placement}) within {plan.start_timeout} s; available: "
                f"{ray.available_resources()}"
            ) from None
    names = [f"{group}/{k}" for k in range(plan.num_servers)]
    for k, name in enumerate(names):
        launched.actors.append(
            start_actor(ray, plan, name, k, launched.placement_group, token, detached)
        )
    described = describe(ray, launched.actors, plan.start_timeout, "start")
    return [
        RayServer(name, info["url"], info["node_id"], info["pid"])
        for name, info in zip(names, described, strict=True)
    ]


def start_actor(
    ray: Any, plan: Plan, name: str, k: int, group_pg: Any, token: str, detached: bool
) -> Any:
    """Create server actor ``name`` (in bundle ``k`` of ``group_pg``, if any); no waiting."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "num_cpus": plan.num_cpus,
        "resources": dict(plan.resources),
        "max_restarts": plan.max_restarts,
        "lifetime": "detached" if detached else None,
    }
    if plan.runtime_env is not None:
        options["runtime_env"] = dict(plan.runtime_env)
    if group_pg is not None:
        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
            placement_group=group_pg, placement_group_bundle_index=k
        )
    return (
        remote_actor(ray).options(**options).remote(plan.server, token, dict(plan.server_options))
    )


def describe(ray: Any, actors: list[Any], timeout: float, doing: str) -> list[dict[str, Any]]:
    """What each actor's :meth:`~openenv_gym.providers.ray.ServerActor.describe` says.

    Raises:
        ProviderError: An actor did not answer within ``timeout``, or failed.
    """
    refs = [actor.describe.remote() for actor in actors]
    try:
        return list(ray.get(refs, timeout=timeout))
    except ray.exceptions.GetTimeoutError:
        raise ProviderError(
            f"Ray server actors did not {doing} within {timeout} s (waiting for resources? "
            f"available: {ray.available_resources()})"
        ) from None
    except ray.exceptions.RayError as exc:
        raise ProviderError(f"a Ray server actor failed to {doing}: {exc}") from exc


def answers(ray: Any, refs: list[Any], timeout: float = 10.0) -> list[Any]:
    """The replies that came within ``timeout`` (a dead or stuck actor's are left out)."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    replies = []
    for ref in ready:
        try:
            replies.append(ray.get(ref))
        except ray.exceptions.RayError as exc:
            logger.debug("a Ray server actor did not answer: %s", exc)
    return replies


def release(ray: Any, launched: Launched) -> None:
    """Kill the actors and remove the placement group (best effort, idempotent)."""
    actors, launched.actors = launched.actors, []
    group_pg, launched.placement_group = launched.placement_group, None
    if not ray.is_initialized():
        return  # Ray is down: its actors and placement groups went with it
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception as exc:  # ValueError / RayError: already gone
            logger.debug("killing a Ray server actor: %s", exc)
    if group_pg is not None:
        try:
            ray.util.remove_placement_group(group_pg)
        except Exception as exc:
            logger.debug("removing a placement group: %s", exc)


def check_reachable(servers: list[RayServer], token: str, timeout: float) -> None:
    """GET /health of each server from this process: fail early if the URLs do not work.

    Raises:
        ProviderError: A server cannot be reached from here, or is not healthy.
    """
    headers = {"Authorization": f"Bearer {token}"}
    for server in servers:
        try:
            status, body = get_json(f"{server.url}/health", timeout, headers=headers)
        except OpenEnvGymError as exc:
            raise ProviderError(
                f"Ray server {server.name} listens at {server.url} (node {server.node_id}) "
                f"but this process cannot reach it: {exc}"
            ) from exc
        if status != 200 or not isinstance(body, dict) or body.get("status") != "healthy":
            raise ProviderError(f"Ray server {server.name} at {server.url}: /health {status}")
