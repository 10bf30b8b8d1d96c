"""The Ray actor that hosts one env server, and where each one runs.

Its class is imported by Ray's worker processes (by module path), so this module imports
nothing of Ray at import time: Ray is imported inside the actor's methods, which run on a
worker that has it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HOSTING", "NAMESPACE", "RayServer", "ServerActor", "remote_actor"]

NAMESPACE = "openenv-gym"
"""The Ray namespace of every server actor (named ``<group>/<k>``)."""

HOSTING = frozenset({"app", "app_dir", "concurrent", "max_workers"})
"""Options of an actor that say what it hosts and how, not server settings."""


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
            environment (``runtime_env={"env_vars": ...}``) apply below them. Also
            what to host instead of ``spec`` (:data:`HOSTING`: ``app=``, ``app_dir=``) and
            how (``concurrent=``, ``max_workers=``).

    The server starts in the constructor, so an actor that Ray restarts
    (``max_restarts=``) serves again, on a new port.
    """

    def __init__(self, spec: str, token: str, options: Mapping[str, Any]) -> None:
        import os

        import ray

        from openenv_gym.runtime.hosting import ServerThread
        from openenv_gym.runtime.settings import ServerConfig

        host = ray.util.get_node_ip_address()
        hosting = {k: v for k, v in options.items() if k in HOSTING}
        settings = {k: v for k, v in options.items() if k not in HOSTING}
        config = ServerConfig.from_env(host=host, port=0, token=token, **settings)
        self._thread = ServerThread(spec, config, **hosting)
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


def remote_actor(ray: Any) -> Any:
    """:class:`ServerActor` as a Ray actor class (made once per process)."""
    global _actor_class
    with _actor_lock:
        if _actor_class is None:
            _actor_class = ray.remote(ServerActor)
        return _actor_class
