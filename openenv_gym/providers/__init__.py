"""Providers answer "where does a server come from?" with base URLs.

* :class:`LocalProvider` (the default) starts ``openenv-gym serve NAME`` subprocesses on
  free 127.0.0.1 ports and stops them on ``close()``, at exit, and when the client dies.
* :class:`UrlProvider` points at servers that already run (a Space, a container).
* :class:`~openenv_gym.providers.docker.DockerProvider` starts containers (one server
  process each, many envs per container) published on 127.0.0.1; needs the ``docker`` extra.
* :class:`~openenv_gym.providers.ray.RayProvider` starts servers as Ray actors across a
  cluster (placement groups, named pools); needs the ``ray`` extra (``docs/scale-out.md``).

Providers know nothing of wire protocols: they hand out URLs and own process lifetimes.
"""

from __future__ import annotations

import inspect
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

from openenv_gym.exceptions import ArgumentTypeError, ConfigurationError
from openenv_gym.providers.base import Provider
from openenv_gym.providers.docker import DockerProvider
from openenv_gym.providers.local import LocalProvider
from openenv_gym.providers.ray import RayProvider
from openenv_gym.providers.url import UrlProvider

__all__ = [
    "DockerProvider",
    "LocalProvider",
    "Provider",
    "RayProvider",
    "UrlProvider",
    "make_provider",
]

_P = TypeVar("_P")


def make_provider(
    server: str,
    *,
    provider: str | Provider | None = None,
    base_url: str | list[str] | None = None,
    num_servers: int = 1,
    **options: Any,
) -> Provider:
    """Pick a provider from the ``provider=`` / ``base_url=`` arguments of ``make``.

    ``base_url`` alone means ``"url"``; nothing means ``"local"``. With ``"docker"``,
    ``num_servers`` is the number of containers (one server process each). ``options``
    go to the provider's constructor (``provider="ray"``: ``placement=``, ``num_cpus=``,
    ``runtime_env=``...).

    Raises:
        ConfigurationError: Unknown provider, ``"url"`` without ``base_url``, or an option
            the provider does not take.
    """
    if provider is not None and not isinstance(provider, str | Provider):
        raise ArgumentTypeError(
            "provider must be 'local', 'docker', 'ray', 'url', a Provider or None, "
            f"got {reprlib.repr(provider)}"
        )
    if base_url is not None and not (
        isinstance(base_url, str)
        or (isinstance(base_url, list | tuple) and all(isinstance(u, str) for u in base_url))
    ):
        raise ArgumentTypeError(
            f"base_url must be a URL, a list of URLs or None, got {reprlib.repr(base_url)}"
        )
    if provider is not None and not isinstance(provider, str):
        if options:
            raise ConfigurationError(
                f"unexpected argument(s) {', '.join(sorted(options))}: a provider instance "
                "takes no options"
            )
        return provider
    kind = provider or ("url" if base_url else "local")
    if kind == "url":
        if not base_url:
            raise ConfigurationError("provider='url' needs base_url=")
        return _build(kind, UrlProvider, base_url, **options)
    if base_url:
        raise ConfigurationError(f"base_url= and provider={kind!r} exclude each other")
    if kind == "local":
        return _build(kind, LocalProvider, server, num_servers=num_servers, **options)
    if kind == "docker":
        return _build(kind, DockerProvider, server, num_containers=num_servers, **options)
    if kind == "ray":
        return _build(kind, RayProvider, server, num_servers=num_servers, **options)
    raise ConfigurationError(f"unknown provider {kind!r}: use 'local', 'docker', 'ray' or 'url'")


def _build(kind: str, factory: Callable[..., _P], *args: Any, **options: Any) -> _P:
    """``factory(*args, **options)``, after checking that it takes every option."""
    unknown = sorted(set(options) - set(inspect.signature(factory).parameters))
    if unknown:
        raise ConfigurationError(
            f"unexpected argument(s) {', '.join(unknown)}: neither the env's nor provider {kind}'s"
        )
    return factory(*args, **options)
