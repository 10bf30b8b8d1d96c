"""Modules stay under a size: no module of openenv_gym over 700 lines.

A long module is usually several concerns in one file; the split into modules is the proof
that they are apart (websockets keeps frames, protocol, client and server apart, none over
~770 lines). There is no exemption, by docstring or by list: the last module over the limit
(vector.py) was split into openenv_gym/vector/ (issue 24).

Docstrings are for users (mkdocstrings renders them on the API pages, ``help()`` prints
them): a note to maintainers about a module's size belongs in a comment, if anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "openenv_gym"
LIMIT = 700

SIZE_NOTE = re.compile(r"cohesive concern|over \d+ lines", re.I)

MODULES = sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_package_is_found() -> None:
    assert PACKAGE / "env.py" in MODULES
    assert len(MODULES) > 50


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_over_the_limit(path: Path) -> None:
    lines = _lines(path)
    assert lines <= LIMIT, (
        f"{_name(path)} has {lines} lines, over {LIMIT}: split it into modules of one concern each"
    )


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_docstring_is_a_note_about_the_module_size(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree, *ast.walk(tree)]
    docs = [
        ast.get_docstring(node) or ""
        for node in nodes
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    notes = [m.group(0) for doc in docs for m in [SIZE_NOTE.search(doc)] if m]
    assert notes == [], f"{_name(path)}: a maintainers' note in a docstring: {notes}"


def test_the_size_note_is_recognised() -> None:
    assert SIZE_NOTE.search("One cohesive concern, over 600 lines: the protocol")
    assert SIZE_NOTE.search("... over 700 lines ...")
    assert not SIZE_NOTE.search("A request of over 64 slots is answered in chunks.")
