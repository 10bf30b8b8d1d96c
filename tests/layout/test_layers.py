"""The import-linter contracts in pyproject.toml name every module of openenv_gym.

``lint-imports`` checks the contracts; this checks they stay complete: every top-level
module and subpackage has its place (a layer, or a forbidden contract's source), so a
module added later cannot slip past the architecture unnoticed.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import openenv_gym

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layer_names(layer: str) -> list[str]:
    """``"a | b"`` / ``"a : b"`` / ``"(a)"`` -> the module names in it."""
    separator = "|" if "|" in layer else ":"
    return [part.strip().strip("()") for part in layer.split(separator)]


def _top_level(module: str) -> str | None:
    """``openenv_gym.x.y`` -> ``x``; None for other packages and the root itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "openenv_gym" and len(parts) > 1 else None


def _named() -> dict[str, set[str]]:
    """Each top-level name -> the contracts that name it."""
    named: dict[str, set[str]] = {}
    for contract in _contracts():
        modules: list[str] = []
        if contract["type"] == "layers":
            containers = contract.get("containers") or [""]
            for layer in contract["layers"]:
                for name in _layer_names(layer):
                    modules += [f"{c}.{name}" if c else name for c in containers]
        modules += contract.get("source_modules", [])
        modules += contract.get("forbidden_modules", [])
        for module in modules:
            top = _top_level(module)
            if top is not None:
                named.setdefault(top, set()).add(contract["name"])
    return named


def _package_children() -> set[str]:
    return {info.name for info in pkgutil.iter_modules(openenv_gym.__path__)}


def test_every_module_of_the_package_is_named_by_a_contract():
    children = _package_children()
    assert {"protocol", "transport", "runtime", "check", "cli", "env"} <= children
    missing = sorted(children - _named().keys())
    assert missing == [], f"give these a place in [tool.importlinter] of pyproject.toml: {missing}"


def test_the_layers_contract_covers_the_whole_package_exhaustively():
    layered = [
        c
        for c in _contracts()
        if c["type"] == "layers" and c.get("containers") == ["openenv_gym"] and c.get("exhaustive")
    ]
    assert len(layered) == 1
    names = {name for layer in layered[0]["layers"] for name in _layer_names(layer)}
    assert _package_children() <= names


def test_contracts_name_no_module_that_does_not_exist():
    stale = sorted(_named().keys() - _package_children())
    assert stale == [], f"contracts name modules that are gone: {stale}"


def test_the_helpers_see_what_they_should():
    assert _layer_names("a | (b)") == ["a", "b"]
    assert _layer_names("a : b") == ["a", "b"]
    assert _layer_names("cli") == ["cli"]
    assert _top_level("openenv_gym.transport.wire") == "transport"
    assert _top_level("openenv_gym") is None
    assert _top_level("websockets") is None
