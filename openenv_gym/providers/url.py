"""Servers that already run somewhere: we only hand out their URLs."""

from __future__ import annotations

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.providers.base import Provider

__all__ = ["UrlProvider"]


class UrlProvider(Provider):
    """Existing servers, e.g. ``https://openenv-wordle.hf.space`` or a container.

    Args:
        base_url: One URL or a list of URLs (``http(s)://``, ``ws(s)://`` or ``host:port``).
    """

    def __init__(self, base_url: str | list[str]) -> None:
        given: object = base_url  # checked: any value may come through make(base_url=...)
        urls = (
            [given]
            if isinstance(given, str)
            else list(given)
            if isinstance(given, list | tuple)
            else []
        )
        if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
            raise ConfigurationError(
                f"base_url must be a non-empty URL or list of URLs, got {base_url!r}"
            )
        self.urls = [u.strip().rstrip("/") for u in urls]

    def start(self) -> list[str]:
        """Return the URLs."""
        return list(self.urls)

    def close(self) -> None:
        """Nothing to release: we did not start these servers."""

    def __repr__(self) -> str:
        return f"UrlProvider({self.urls!r})"
