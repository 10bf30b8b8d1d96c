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

The modules: :mod:`~openenv_gym.providers.ray.provider` (:class:`RayProvider`),
:mod:`~openenv_gym.providers.ray.pools`, :mod:`~openenv_gym.providers.ray.launch` (start
and end a group of actors), :mod:`~openenv_gym.providers.ray.placement`,
:mod:`~openenv_gym.providers.ray.actor` (what each actor runs) and
:mod:`~openenv_gym.providers.ray.cluster` (``ray.init``).
"""

from openenv_gym.providers.ray.actor import NAMESPACE, RayServer, ServerActor
from openenv_gym.providers.ray.placement import PLACEMENTS, Placement
from openenv_gym.providers.ray.pools import pool_down, pool_status, pool_up
from openenv_gym.providers.ray.provider import RayProvider

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
