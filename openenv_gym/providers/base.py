"""The provider interface."""

from __future__ import annotations

import abc

from openenv_gym.exceptions import ProviderError

__all__ = ["Provider"]


class Provider(abc.ABC):
    """Something that hands out server base URLs and owns their lifetime.

    Servers are numbered in the order :meth:`start` lists their URLs. A provider that
    starts its servers also knows the bearer token each demands (:meth:`token`), whether
    it still runs (:meth:`alive`), and can start a lost one again (:meth:`restart`).
    """

    @abc.abstractmethod
    def start(self) -> list[str]:
        """Make the servers available; return their base URLs (idempotent)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the servers this provider started. Idempotent."""

    def token(self, index: int) -> str | None:
        """The bearer token server ``index`` demands, if this provider set it (else None)."""
        return None

    def alive(self, index: int) -> bool:
        """Whether server ``index`` still runs (True when this provider cannot tell)."""
        return True

    def restart(self, index: int) -> str:
        """Replace server ``index`` (lost or hung) with a fresh one; return its URL.

        Its sessions are gone, and its :meth:`token` may be new.

        Raises:
            ProviderError: This provider did not start its servers, or the new one failed.
        """
        raise ProviderError(f"{type(self).__name__} cannot restart the servers it hands out")

    def __enter__(self) -> Provider:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
