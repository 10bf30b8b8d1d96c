"""The URLs of servers that run on Kubernetes (``deploy/kubernetes/``, ``docs/scale-out.md``).

Kubernetes starts and restarts the servers; a trainer only needs their URLs for
``base_url=[...]``. Two ways, neither of which asks the API server:

* :func:`statefulset_urls`: a StatefulSet's pods have stable DNS names
  (``<name>-<i>.<service>``), so the list follows from the name and the replica count;
* :func:`service_urls`: a headless Service's name resolves to the IP of every ready pod.

The token the servers demand comes from the same Secret, as ``OPENENV_GYM_TOKEN`` in the
trainer's environment (the clients send it), or ``token=``.
"""

from __future__ import annotations

import ipaddress
import socket

from openenv_gym.exceptions import ConfigurationError, ProviderError

__all__ = ["service_urls", "statefulset_urls"]


def statefulset_urls(
    name: str,
    replicas: int,
    *,
    service: str | None = None,
    namespace: str | None = None,
    port: int = 8000,
    scheme: str = "http",
) -> list[str]:
    """The URL of each pod of a StatefulSet, in pod order.

    Args:
        name: The StatefulSet's name (its pods are ``<name>-0`` ... ``<name>-<replicas-1>``).
        replicas: How many pods.
        service: Its headless Service (``spec.serviceName``; default: ``name``).
        namespace: Their namespace, if not the trainer's own.
        port: The servers' port.
        scheme: ``http`` (or ``https`` behind a TLS sidecar).

    >>> statefulset_urls("openenv-wordle", 2, namespace="envs")  # doctest: +NORMALIZE_WHITESPACE
    ['http://openenv-wordle-0.openenv-wordle.envs.svc:8000',
     'http://openenv-wordle-1.openenv-wordle.envs.svc:8000']
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigurationError(f"replicas must be a positive integer, got {replicas!r}")
    domain = service or name
    if namespace:
        domain = f"{domain}.{namespace}.svc"
    return [f"{scheme}://{name}-{i}.{domain}:{port}" for i in range(replicas)]


def service_urls(host: str, port: int = 8000, *, scheme: str = "http") -> list[str]:
    """The URL of every address ``host`` resolves to (a headless Service: its ready pods).

    Sorted by address, so every trainer that asks gets the same list. A pod that is not
    ready yet is not listed: resolve again once the StatefulSet reports all replicas ready.

    >>> service_urls("127.0.0.1", 8000)
    ['http://127.0.0.1:8000']

    Raises:
        ProviderError: The name does not resolve.
    """
    try:
        records = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ProviderError(f"cannot resolve {host!r}: {exc}") from exc
    # an IPv6 link-local address may carry a zone ("fe80::1%eth0"): the pods' never do
    found = {ipaddress.ip_address(str(record[4][0]).split("%")[0]) for record in records}
    addresses = sorted(found, key=_order)
    if not addresses:
        raise ProviderError(f"{host!r} resolves to no address")
    return [
        f"{scheme}://[{a}]:{port}" if a.version == 6 else f"{scheme}://{a}:{port}"
        for a in addresses
    ]


def _order(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> tuple[int, int]:
    return address.version, int(address)
