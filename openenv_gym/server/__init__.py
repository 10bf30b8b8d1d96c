"""Deprecated alias of :mod:`openenv_gym.runtime` (the server runtime's name before 0.2).

``import openenv_gym.server.environment`` and ``from openenv_gym.server import app`` keep
working, with a :class:`DeprecationWarning`, and give the very same module objects as
``openenv_gym.runtime`` (one class per type, whichever name imported it). The alias will be
removed in a later minor release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

_OLD, _NEW = __name__, "openenv_gym.runtime"

warnings.warn(f"{_OLD} is deprecated: import {_NEW} instead", DeprecationWarning, stacklevel=2)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``openenv_gym.server.X`` to the already-imported ``openenv_gym.runtime.X``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def create_module(self, spec: Any) -> ModuleType:
        module = importlib.import_module(_NEW + spec.name[len(_OLD) :])
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module is runtime's own, already executed: give it back its own spec."""
        module.__spec__ = self._specs.pop(module.__name__)


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module(_NEW), name)
