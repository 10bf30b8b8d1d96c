"""The provider interface."""

from __future__ import annotations

import abc

__all__ = ["Provider"]


class Provider(abc.ABC):
    """Something that hands out server base URLs and owns their lifetime."""

    @abc.abstractmethod
    def start(self) -> list[str]:
        """Make the servers available; return their base URLs (idempotent)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the servers this provider started. Idempotent."""

    def __enter__(self) -> Provider:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
