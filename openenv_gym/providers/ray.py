"""Env servers as Ray actors across a cluster: ``provider="ray"`` (the ``ray`` extra).

Each server is one Ray actor hosting this project's server runtime (both wire protocols)
on a thread of its own, bound to its node's IP (``ray.util.get_node_ip_address()``) on a
free port and guarded by a bearer token (:meth:`RayProvider.token`, sent by the clients
this provider's envs make). The vector env then talks to the servers directly: Ray only
places, starts and stops them, and adds nothing per step.

* Placement: ``num_servers`` bundles of ``num_cpus`` CPUs (plus ``resources``) in one
  placement group, ``placement="spread"`` evenly over the nodes (as their sizes allow) or
  ``"pack"`` onto few (Ray's ``"strict-spread"`` / ``"strict-pack"`` demand it; None: no
  placement group).
* Cluster: the one ``ray.init(...)`` already connected to, else ``ray_address=``, else a
  running local cluster (``RAY_ADDRESS`` or ``ray start``), else a new local one, which
  is shut down again when the last provider that needed it closes.
* Lifetime: the actors belong to this process. ``close()`` kills them and removes the
  placement group; if this process dies, Ray ends its actors and placement group with it.
  A killed actor (or a lost node) takes its server with it: its sub-envs fail with
  :class:`~openenv_gym.exceptions.ConnectionLostError`, the others keep stepping.
* Pools: :func:`pool_up` starts a named, detached pool that outlives the process that
  made it (``openenv-gym ray up NAME``); ``RayProvider(pool=NAME)`` attaches to it and
  ``close()`` leaves it running; :func:`pool_down` ends it.

Ray is imported only when a server is started: ``pip install 'openenv-gym[ray]'``.

One cohesive concern, over 600 lines: the Ray provider (placement, the actor that
hosts a server, pools that outlive a process, restarts); Ray is imported here only.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from openenv_gym._http import get_json
from openenv_gym.config import env_float
from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError, ProviderError
from openenv_gym.providers.base import Provider

__all__ = [
    "NAMESPACE",
    "PLACEMENTS",
    "Placement",
    "RayProvider",
    "RayServer",
    "ServerActor",
    "pool_down",
    "pool_status",
    "pool_up",
]

logger = logging.getLogger("openenv_gym.providers")

NAMESPACE = "openenv-gym"
"""The Ray namespace of every server actor (named ``<group>/<k>``)."""

PLACEMENTS: dict[str, str] = {
    "spread": "SPREAD",
    "pack": "PACK",
    "strict-spread": "STRICT_SPREAD",
    "strict-pack": "STRICT_PACK",
}
"""``placement=`` values and the Ray placement-group strategy of each."""

Placement = Literal["spread", "pack", "strict-spread", "strict-pack"]
"""The keys of :data:`PLACEMENTS` (``None``: no placement group)."""

_INSTALL_HINT = "the ray provider needs Ray: pip install 'openenv-gym[ray]'"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_NODE_LABEL = "ray.io/node-id"  # the label Ray gives every node
_DEFAULT_START_TIMEOUT = 120.0  # a worker process per server, maybe a runtime_env to build


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ProviderError(_INSTALL_HINT) from exc
    return ray


@dataclass(frozen=True, slots=True)
class RayServer:
    """Where one server actor runs.

    Attributes:
        name: The actor's name in :data:`NAMESPACE` (``<group>/<k>``).
        url: The server's base URL (the node's IP and a free port).
        node_id: The Ray node it runs on.
        pid: Its worker process id (on that node).
    """

    name: str
    url: str
    node_id: str
    pid: int


class ServerActor:
    """The body of each Ray actor: one env server on this node's IP, on a free port.

    Args:
        spec: A built-in server name (``wordle``) or ``package.module:Class``.
        token: The bearer token every request must carry.
        options: More :class:`~openenv_gym.runtime.settings.ServerConfig` fields
            (``max_sessions=``, ...); the ``OPENENV_GYM_*`` variables of the actor's
            environment (``runtime_env={"env_vars": ...}``) apply below them.

    The server starts in the constructor, so an actor that Ray restarts
    (``max_restarts=``) serves again, on a new port.
    """

    def __init__(self, spec: str, token: str, options: Mapping[str, Any]) -> None:
        import os

        import ray

        from openenv_gym.runtime.hosting import ServerThread
        from openenv_gym.runtime.settings import ServerConfig

        host = ray.util.get_node_ip_address()
        config = ServerConfig.from_env(host=host, port=0, token=token, **options)
        self._thread = ServerThread(spec, config)
        self._url = self._thread.start()
        self._token = token
        self._spec = spec
        self._node_id: str = ray.get_runtime_context().get_node_id()
        self._pid = os.getpid()

    def describe(self) -> dict[str, Any]:
        """URL, node id, pid and token of this server."""
        return {
            "server": self._spec,
            "url": self._url,
            "node_id": self._node_id,
            "pid": self._pid,
            "token": self._token,
        }

    def placement_group(self) -> Any:
        """The placement group this actor was scheduled in, or None."""
        import ray

        return ray.util.get_current_placement_group()

    def stop(self) -> None:
        """Close every connection and stop serving (the actor stays until killed)."""
        self._thread.stop()


_actor_lock = threading.Lock()
_actor_class: Any = None


def _remote_actor(ray: Any) -> Any:
    global _actor_class
    with _actor_lock:
        if _actor_class is None:
            _actor_class = ray.remote(ServerActor)
        return _actor_class


# --------------------------------------------------------------------------- the cluster
_init_lock = threading.Lock()
_init_users = 0  # providers using a Ray runtime that this module started


def _connect(ray: Any, address: str | None, *, start_local: bool = True) -> bool:
    """Connect to Ray unless already connected; True if this module owns the runtime.

    With ``start_local=False`` an existing cluster is required (a pool must outlive us).
    """
    global _init_users
    with _init_lock:
        if ray.is_initialized():
            if _init_users:
                _init_users += 1
                return True
            if address is not None:
                logger.debug("ray is already initialized: ray_address=%s is not used", address)
            return False
        if address is None and not start_local:
            address = "auto"
        try:
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=True)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError from ray
            where = address or "a running or new local cluster"
            raise ProviderError(f"cannot connect to Ray ({where}): {exc}") from exc
        _init_users = 1
        return True


def _disconnect(ray: Any) -> None:
    """One user fewer of the runtime this module started; shut it down after the last."""
    global _init_users
    with _init_lock:
        _init_users -= 1
        if _init_users == 0 and ray.is_initialized():
            ray.shutdown()


# --------------------------------------------------------------------------- launching
@dataclass(slots=True)
class _Launched:
    """What one launch made, kept by the finalizer that releases it."""

    actors: list[Any]
    placement_group: Any = None


def _check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"{what} must be 1-63 letters, digits, '_', '.' or '-' (starting with a letter "
            f"or digit), got {name!r}"
        )
    return name


@dataclass(frozen=True, slots=True)
class _Plan:
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


def _launch(
    ray: Any, plan: _Plan, group: str, launched: _Launched, token: str, detached: bool
) -> list[RayServer]:
    """Start the servers of ``plan`` as actors ``<group>/<k>``; fill ``launched`` as it goes.

    The caller releases ``launched`` if this raises.
    """
    if plan.placement is not None:
        launched.placement_group = _placement_group(
            ray, plan, f"{NAMESPACE}/{group}", "detached" if detached else None
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
            _start_actor(ray, plan, name, k, launched.placement_group, token, detached)
        )
    described = _describe(ray, launched.actors, plan.start_timeout, "start")
    return [
        RayServer(name, info["url"], info["node_id"], info["pid"])
        for name, info in zip(names, described, strict=True)
    ]


def _placement_group(ray: Any, plan: _Plan, name: str, lifetime: str | None) -> Any:
    """One bundle per server, placed with ``plan.placement``.

    Ray's SPREAD puts bundles on distinct nodes first and then packs the rest, so 4
    servers on 2 nodes may land 3 + 1. ``"spread"`` pins each bundle to a node (the
    ``ray.io/node-id`` label) so that they are as even as the nodes' sizes allow.
    """
    bundles = [plan.bundle] * plan.num_servers
    strategy = PLACEMENTS[plan.placement or "spread"]
    if plan.placement == "spread":
        nodes = _spread_evenly(ray.nodes(), plan.bundle, plan.num_servers)
        if nodes is not None:
            selectors = [{_NODE_LABEL: node} for node in nodes]
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


def _spread_evenly(
    nodes: list[dict[str, Any]], bundle: Mapping[str, float], count: int
) -> list[str] | None:
    """The node of each of ``count`` bundles, as even as the nodes' sizes allow.

    Servers go round the nodes that can hold one more; None when the nodes cannot hold
    them all or do not carry the ``ray.io/node-id`` label (Ray then places them).

    >>> big = {"NodeID": "a", "Alive": True, "Resources": {"CPU": 8.0}, "Labels": {}}
    >>> small = {"NodeID": "b", "Alive": True, "Resources": {"CPU": 1.0}, "Labels": {}}
    >>> for node in (big, small):
    ...     node["Labels"][_NODE_LABEL] = node["NodeID"]
    >>> _spread_evenly([big, small], {"CPU": 1.0}, 4)
    ['a', 'b', 'a', 'a']
    """
    room: dict[str, int] = {}
    for node in nodes:
        node_id = node.get("Labels", {}).get(_NODE_LABEL)
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


def _start_actor(
    ray: Any, plan: _Plan, name: str, k: int, group_pg: Any, token: str, detached: bool
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
        _remote_actor(ray).options(**options).remote(plan.server, token, dict(plan.server_options))
    )


def _describe(ray: Any, actors: list[Any], timeout: float, doing: str) -> list[dict[str, Any]]:
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


def _answers(ray: Any, refs: list[Any], timeout: float = 10.0) -> list[Any]:
    """The replies that came within ``timeout`` (a dead or stuck actor's are left out)."""
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    answers = []
    for ref in ready:
        try:
            answers.append(ray.get(ref))
        except ray.exceptions.RayError as exc:
            logger.debug("a Ray server actor did not answer: %s", exc)
    return answers


def _release(ray: Any, launched: _Launched) -> None:
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


def _check_reachable(servers: list[RayServer], token: str, timeout: float) -> None:
    """GET /health of each server from this process: fail early if the URLs do not work."""
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


# --------------------------------------------------------------------------- the provider
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
    ) -> None:
        timeout = start_timeout or env_float("OPENENV_GYM_START_TIMEOUT", None)
        self.start_timeout = timeout or _DEFAULT_START_TIMEOUT
        self.ray_address = ray_address
        self.server = server
        self.pool = None if pool is None else _check_name(pool, "pool")
        self.plan: _Plan | None = None
        if self.pool is None:
            if server == "generic":
                raise ConfigurationError(
                    "openenv/Generic-v0 on Ray needs a server class: server='package.module:Class'"
                    " (or pool= to attach to a running pool)"
                )
            self.plan = _Plan(
                server=server or "",
                num_servers=num_servers,
                placement=placement,
                num_cpus=num_cpus,
                resources=resources or {},
                runtime_env=runtime_env,
                server_options=server_options or {},
                max_restarts=max_restarts,
                start_timeout=self.start_timeout,
            )
        elif token is not None or runtime_env is not None or server_options:
            raise ConfigurationError(
                "pool= attaches to servers that run already: their token, runtime_env and "
                "settings are the pool's"
            )
        self._token = token or secrets.token_urlsafe(32)
        self.servers: list[RayServer] = []
        self._urls: list[str] | None = None
        self._launched = _Launched(actors=[])
        self._restarts = 0
        self._owns_ray = False
        self._finalizer: weakref.finalize[Any, RayProvider] | None = None

    def start(self) -> list[str]:
        """Start the servers (or find the pool's) and wait until each answers /health."""
        if self._urls is None:
            ray = _import_ray()
            # a pool runs on a cluster already: never start a local one just to look for it
            self._owns_ray = _connect(ray, self.ray_address, start_local=self.plan is not None)
            self._finalizer = weakref.finalize(self, _close, ray, self._launched, self._owns_ray)
            try:
                if self.plan is None:
                    assert self.pool is not None
                    self.servers, self._token = _attach(
                        ray, self.pool, self.start_timeout, self.server
                    )
                else:
                    group = f"run-{uuid.uuid4().hex[:12]}"
                    self.servers = _launch(
                        ray, self.plan, group, self._launched, self._token, detached=False
                    )
                _check_reachable(self.servers, self._token, min(self.start_timeout, 10.0))
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
        ray = _import_ray()
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
        ray = _import_ray()
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
        actor = _start_actor(
            ray, plan, name, index, launched.placement_group, self._token, detached=False
        )
        launched.actors[index] = actor
        (info,) = _describe(ray, [actor], plan.start_timeout, "restart")
        server = RayServer(name, info["url"], info["node_id"], info["pid"])
        _check_reachable([server], self._token, min(plan.start_timeout, 10.0))
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


def _close(ray: Any, launched: _Launched, owns_ray: bool) -> None:
    try:
        _release(ray, launched)
    finally:
        if owns_ray:
            _disconnect(ray)


# --------------------------------------------------------------------------- pools
def _pool_actors(ray: Any, pool: str) -> list[tuple[int, str]]:
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


def _attach(ray: Any, pool: str, timeout: float, server: str | None) -> tuple[list[RayServer], str]:
    names = [name for _, name in _pool_actors(ray, pool)]
    if not names:
        raise ProviderError(f"no Ray pool named {pool!r} (start one: openenv-gym ray up {pool})")
    actors = [ray.get_actor(name, namespace=NAMESPACE) for name in names]
    described = _describe(ray, actors, timeout, "answer")
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
    _check_name(name, "pool name")
    if name.startswith("run-"):
        raise ConfigurationError("pool names starting with 'run-' are kept for private servers")
    timeout = start_timeout or env_float("OPENENV_GYM_START_TIMEOUT", None)
    plan = _Plan(
        server=server,
        num_servers=num_servers,
        placement=placement,
        num_cpus=num_cpus,
        resources=resources or {},
        runtime_env=runtime_env,
        server_options=server_options or {},
        max_restarts=max_restarts,
        start_timeout=timeout or _DEFAULT_START_TIMEOUT,
    )
    ray = _import_ray()
    owns = _connect(ray, ray_address, start_local=False)
    launched = _Launched(actors=[])
    try:
        if _pool_actors(ray, name):
            raise ProviderError(f"a Ray pool named {name!r} runs already")
        secret = token or secrets.token_urlsafe(32)
        servers = _launch(ray, plan, name, launched, secret, detached=True)
        _check_reachable(servers, secret, min(plan.start_timeout, 10.0))
    except BaseException:
        _release(ray, launched)
        raise
    finally:
        if owns:
            _disconnect(ray)
    return servers


def pool_down(name: str, *, ray_address: str | None = None) -> int:
    """Kill the actors of the named pool and remove its placement group.

    Returns:
        How many server actors were killed (0: no such pool).
    """
    _check_name(name, "pool name")
    ray = _import_ray()
    owns = _connect(ray, ray_address, start_local=False)
    try:
        actors = [ray.get_actor(n, namespace=NAMESPACE) for _, n in _pool_actors(ray, name)]
        launched = _Launched(actors=actors)
        # the placement group is named in the namespace of whoever made it: ask the actors
        groups = _answers(ray, [actor.placement_group.remote() for actor in actors])
        by_id = {group.id: group for group in groups if group is not None}
        launched.placement_group = next(iter(by_id.values()), None)
        killed = len(launched.actors)
        _release(ray, launched)
    finally:
        if owns:
            _disconnect(ray)
    return killed


def pool_status(
    name: str | None = None, *, ray_address: str | None = None, timeout: float = 10.0
) -> dict[str, list[RayServer]]:
    """The servers of every pool (or of the named one), by pool name.

    Private servers of running :class:`RayProvider` instances are not pools and are left
    out. A server that does not answer within ``timeout`` raises.
    """
    ray = _import_ray()
    owns = _connect(ray, ray_address, start_local=False)
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
            described = _describe(ray, actors, timeout, "answer")
            status[group] = [
                RayServer(n, info["url"], info["node_id"], info["pid"])
                for n, info in zip(names, described, strict=True)
            ]
        return status
    finally:
        if owns:
            _disconnect(ray)
