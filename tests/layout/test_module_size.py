"""Modules stay small, or say why not: over 600 lines, the docstring names its one concern."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "openenv_gym"
LIMIT = 600
MARK = "One cohesive concern"

MODULES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_found() -> None:
    assert PACKAGE / "vector.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_long_module_names_its_one_concern(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = source.count("\n")
    if lines <= LIMIT:
        return
    doc = ast.get_docstring(ast.parse(source)) or ""
    assert MARK in doc, (
        f"{path.relative_to(PACKAGE)} has {lines} lines: split it by job, or say in its "
        f"docstring which one concern it is ('{MARK}, over {LIMIT} lines: ...')"
    )
