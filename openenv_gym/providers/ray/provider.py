"""The Ray provider: ``provider="ray"``, servers as Ray actors that this process owns.

The actors belong to this process. ``close()`` kills them and removes the placement group;
if this process dies, Ray ends its actors and placement group with it. A killed actor (or a
lost node) takes its server with it: its sub-envs fail with
:class:`~openenv_gym.exceptions.ConnectionLostError`, the others keep stepping. With
``pool=`` it attaches to a pool's servers instead (:mod:`openenv_gym.providers.ray.pools`).
"""

from __future__ import annotations

import logging
import os
import secrets
import uuid
import weakref
from collections.abc import Mapping
from typing import Any

from openenv_gym.config import env_float
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.base import Provider
from openenv_gym.providers.local import app_target
from openenv_gym.providers.ray.actor import NAMESPACE, RayServer
from openenv_gym.providers.ray.cluster import connect, disconnect, import_ray
from openenv_gym.providers.ray.launch import (
    DEFAULT_START_TIMEOUT,
    Launched,
    Plan,
    check_name,
    check_reachable,
    describe,
    launch,
    release,
    start_actor,
)
from openenv_gym.providers.ray.placement import Placement
from openenv_gym.providers.ray.pools import attach

__all__ = ["RayProvider"]

logger = logging.getLogger("openenv_gym.providers")


class RayProvider(Provider):
    """Start ``num_servers`` env servers as Ray actors; hand out their URLs.

    Args:
        server: Built-in name (``wordle``, ``echo``, ``catch``) or ``package.module:Class``
            (importable on the cluster: installed there, or shipped with ``runtime_env``).
        num_servers: How many servers K (a vector env spreads its sub-envs over them).
        placement: How the placement group that reserves one bundle per server places
            them: ``"spread"`` (default: evenly over the nodes, as their sizes allow),
            ``"pack"`` (onto as few nodes as fit), or Ray's ``"strict-spread"`` (one per
            node) / ``"strict-pack"`` (all on one); None: no placement group.
        num_cpus: CPUs each server reserves (default 1; a server is one thread).
        resources: Custom resources each server reserves (e.g. ``{"env_node": 1}``).
        runtime_env: Ray's ``runtime_env`` for the actors (``pip``, ``env_vars``,
            ``working_dir``...), so a cluster without the env's dependencies installs them.
        ray_address: The cluster to ``ray.init`` when this process is not connected yet
            (default: ``RAY_ADDRESS``, a running local cluster, or a new local one).
        token: The bearer token of the servers (default: a fresh random one).
        server_options: More server settings (``max_sessions=``, ``idle_timeout=``...).
        max_restarts: Ray's ``max_restarts`` of each actor (default 0: a dead server
            stays dead; a restarted one listens on a new port).
        start_timeout: Seconds for the placement group and the servers to come up
            (``OPENENV_GYM_START_TIMEOUT``, default 120).
        pool: Attach to the named pool :func:`pool_up` started instead of starting
            servers (``close()`` then leaves the pool running); every other argument
            but ``ray_address`` and ``start_timeout`` must be left at its default.
        app: An OpenEnv app module to host, ``MODULE:ATTR``, importable on the cluster
            (``docs/official-envs.md``); ``server`` is then only its name.
        app_dir: An OpenEnv env directory to host, a path on the cluster's nodes.
        concurrent: Host every session of the app in one process even when its class is
            not marked ``SUPPORTS_CONCURRENT_SESSIONS`` (default: a worker process each).
    """

    def __init__(
        self,
        server: str | None = None,
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
        pool: str | None = None,
        app: str | None = None,
        app_dir: str | os.PathLike[str] | None = None,
        concurrent: bool = False,
    ) -> None:
        hosting = app_options(app, app_dir, concurrent)
        timeout = start_timeout or env_float("OPENENV_GYM_START_TIMEOUT", None)
        self.start_timeout = timeout or DEFAULT_START_TIMEOUT
        self.ray_address = ray_address
        self.server = server
        self.pool = None if pool is None else check_name(pool, "pool")
        self.plan: Plan | None = None
        if self.pool is None:
            if server == "generic" and not hosting:
                raise ConfigurationError(
                    "openenv/Generic-v0 on Ray needs a server class: server='package.module:Class'"
                    " (or pool= to attach to a running pool)"
                )
            self.plan = Plan(
                server=server or "",
                num_servers=num_servers,
                placement=placement,
                num_cpus=num_cpus,
                resources=resources or {},
                runtime_env=runtime_env,
                server_options=_with_hosting(server_options or {}, hosting),
                max_restarts=max_restarts,
                start_timeout=self.start_timeout,
            )
        elif token is not None or runtime_env is not None or server_options or hosting:
            raise ConfigurationError(
                "pool= attaches to servers that run already: their token, runtime_env and "
                "settings are the pool's"
            )
        self._token = token or secrets.token_urlsafe(32)
        self.servers: list[RayServer] = []
        self._urls: list[str] | None = None
        self._launched = Launched(actors=[])
        self._restarts = 0
        self._owns_ray = False
        self._finalizer: weakref.finalize[Any, RayProvider] | None = None

    def start(self) -> list[str]:
        """Start the servers (or find the pool's) and wait until each answers /health."""
        if self._urls is None:
            ray = import_ray()
            # a pool runs on a cluster already: never start a local one just to look for it
            self._owns_ray = connect(ray, self.ray_address, start_local=self.plan is not None)
            self._finalizer = weakref.finalize(self, _close, ray, self._launched, self._owns_ray)
            try:
                if self.plan is None:
                    assert self.pool is not None
                    self.servers, self._token = attach(
                        ray, self.pool, self.start_timeout, self.server
                    )
                else:
                    group = f"run-{uuid.uuid4().hex[:12]}"
                    self.servers = launch(
                        ray, self.plan, group, self._launched, self._token, detached=False
                    )
                check_reachable(self.servers, self._token, min(self.start_timeout, 10.0))
            except BaseException:
                self.close()
                raise
            self._urls = [server.url for server in self.servers]
        return list(self._urls)

    def token(self, index: int) -> str | None:
        """The bearer token of server ``index`` (one token serves them all)."""
        return self._token

    def client_headers(self) -> dict[str, str]:
        """The ``Authorization`` header the servers demand."""
        return {"Authorization": f"Bearer {self._token}"}

    def alive(self, index: int) -> bool:
        """Whether server ``index`` still serves at the URL handed out (its actor answers).

        An actor that Ray restarted (``max_restarts=``) serves again, but on a new port:
        not alive at the old URL.
        """
        if self._urls is None or self._finalizer is None or not self._finalizer.alive:
            return False  # not started, or closed
        ray = import_ray()
        server = self.servers[index]
        try:
            actor = ray.get_actor(server.name, namespace=NAMESPACE)
            info = ray.get(actor.describe.remote(), timeout=min(self.start_timeout, 10.0))
        except (ValueError, ray.exceptions.RayError):  # no such actor, dead, or no answer
            return False
        return bool(info["url"] == server.url)

    def restart(self, index: int) -> str:
        """Kill server ``index`` and start a fresh one in its place (its bundle, its token).

        Raises:
            ProviderError: The servers are a pool's (restart the pool instead), or the new
                one did not start.
        """
        if self.plan is None or self._urls is None:
            raise ProviderError(
                "only servers this provider started can be restarted (not a pool's, and "
                "only after start())"
            )
        ray = import_ray()
        plan, launched = self.plan, self._launched
        old = launched.actors[index]
        try:
            ray.kill(old, no_restart=True)
        except (ValueError, ray.exceptions.RayError) as exc:
            logger.debug("killing Ray server %d before its restart: %s", index, exc)
        # a fresh name: the old one is released only once Ray has seen its actor die
        group, _, k = self.servers[index].name.rpartition("/")
        self._restarts += 1
        name = f"{group}-r{self._restarts}/{k}"
        actor = start_actor(
            ray, plan, name, index, launched.placement_group, self._token, detached=False
        )
        launched.actors[index] = actor
        (info,) = describe(ray, [actor], plan.start_timeout, "restart")
        server = RayServer(name, info["url"], info["node_id"], info["pid"])
        check_reachable([server], self._token, min(plan.start_timeout, 10.0))
        self.servers[index] = server
        self._urls[index] = server.url
        return server.url

    @property
    def node_ids(self) -> list[str]:
        """The Ray node of each server."""
        return [server.node_id for server in self.servers]

    @property
    def actors(self) -> list[Any]:
        """The actor handles of the servers this provider started (none for a pool)."""
        return list(self._launched.actors)

    def close(self) -> None:
        """Kill the actors, remove the placement group; a pool is left running. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        what = f"pool={self.pool!r}" if self.plan is None else f"{self.plan.server!r}"
        return f"RayProvider({what}, urls={self._urls})"


def _close(ray: Any, launched: Launched, owns_ray: bool) -> None:
    try:
        release(ray, launched)
    finally:
        if owns_ray:
            disconnect(ray)


def app_options(
    app: str | None, app_dir: str | os.PathLike[str] | None, concurrent: bool
) -> dict[str, Any]:
    """The actor options of ``app=`` / ``app_dir=`` / ``concurrent=`` (empty: none given).

    Raises:
        ConfigurationError: Both ``app`` and ``app_dir``, or one of the wrong kind.
    """
    target = app_target(app, app_dir)  # the same checks as the local provider's
    options: dict[str, Any] = {}
    if target is not None:
        options["app" if target[0] == "--app" else "app_dir"] = target[1]
    if concurrent:
        options["concurrent"] = True
    return options


def _with_hosting(server_options: Any, hosting: dict[str, Any]) -> Any:
    """``server_options`` with the hosting options added (left as given when none are)."""
    if not hosting or not isinstance(server_options, Mapping):
        return server_options  # the plan checks what it was given
    return {**server_options, **hosting}
