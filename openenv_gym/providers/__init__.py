"""Providers answer "where does a server come from?" with base URLs.

* :class:`LocalProvider` (the default) starts ``openenv-gym serve NAME`` subprocesses on
  free 127.0.0.1 ports and stops them on ``close()``, at exit, and when the client dies.
* :class:`UrlProvider` points at servers that already run (a Space, a container).
* :class:`~openenv_gym.providers.docker.DockerProvider` starts containers (one server
  process each, many envs per container) published on 127.0.0.1; needs the ``docker`` extra.

Providers know nothing of wire protocols: they hand out URLs and own process lifetimes.
"""

from __future__ import annotations

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.providers.base import Provider
from openenv_gym.providers.docker import DockerProvider
from openenv_gym.providers.local import LocalProvider
from openenv_gym.providers.url import UrlProvider

__all__ = ["DockerProvider", "LocalProvider", "Provider", "UrlProvider", "make_provider"]


def make_provider(
    server: str,
    *,
    provider: str | Provider | None = None,
    base_url: str | list[str] | None = None,
    num_servers: int = 1,
) -> Provider:
    """Pick a provider from the ``provider=`` / ``base_url=`` arguments of ``make``.

    ``base_url`` alone means ``"url"``; nothing means ``"local"``. With ``"docker"``,
    ``num_servers`` is the number of containers (one server process each).

    Raises:
        ConfigurationError: Unknown provider, or ``"url"`` without ``base_url``.
    """
    if provider is not None and not isinstance(provider, str):
        return provider
    kind = provider or ("url" if base_url else "local")
    if kind == "url":
        if not base_url:
            raise ConfigurationError("provider='url' needs base_url=")
        return UrlProvider(base_url)
    if kind == "local":
        if base_url:
            raise ConfigurationError("base_url= and provider='local' exclude each other")
        return LocalProvider(server, num_servers=num_servers)
    if kind == "docker":
        if base_url:
            raise ConfigurationError("base_url= and provider='docker' exclude each other")
        return DockerProvider(server, num_containers=num_servers)
    raise ConfigurationError(f"unknown provider {kind!r}: use 'local', 'docker' or 'url'")
