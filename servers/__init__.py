"""The environments openenv-gym ships, installed as ``openenv_gym_servers``.

Each is a small package with an ``Environment`` subclass (OpenEnv's interface) and its
Pydantic models: :mod:`~openenv_gym_servers.wordle`, :mod:`~openenv_gym_servers.echo`,
:mod:`~openenv_gym_servers.catch`; its ``record`` module is what openenv-gym knows of it,
registered as an entry point of the group ``openenv_gym.envs`` (as any installed
environment is). ``openenv-gym serve wordle`` serves one of them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` that import each name on first use.

    ``homes`` maps an exported name to the submodule of ``package`` that defines it. The
    first use imports that submodule and keeps the value on the package, so later uses
    cost nothing.
    """

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(homes)

    return __getattr__, __dir__
