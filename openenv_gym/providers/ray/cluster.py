"""Importing Ray, connecting to a cluster, and leaving it.

The cluster is the one ``ray.init(...)`` this process is connected to already, else
``ray_address=``, else a running local cluster (``RAY_ADDRESS`` or ``ray start``), else a
new local one, which is shut down again when the last user that needed it disconnects.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from openenv_gym.exceptions import ProviderError
from openenv_gym.providers.ray.actor import NAMESPACE

__all__ = ["INSTALL_HINT", "connect", "disconnect", "import_ray"]

logger = logging.getLogger("openenv_gym.providers")

INSTALL_HINT = "the ray provider needs Ray: pip install 'openenv-gym[ray]'"
"""What a :class:`~openenv_gym.exceptions.ProviderError` says when Ray is not installed."""


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        ProviderError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as exc:
        raise ProviderError(INSTALL_HINT) from exc
    return ray


_init_lock = threading.Lock()
_init_users = 0  # users of a Ray runtime that this module started


def connect(ray: Any, address: str | None, *, start_local: bool = True) -> bool:
    """Connect to Ray unless already connected; True if this module owns the runtime.

    With ``start_local=False`` an existing cluster is required (a pool must outlive us).
    Each call that returns True is paired with one :func:`disconnect`.
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


def disconnect(ray: Any) -> None:
    """One user fewer of the runtime this module started; shut it down after the last."""
    global _init_users
    with _init_lock:
        _init_users -= 1
        if _init_users == 0 and ray.is_initialized():
            ray.shutdown()
