"""docs/architecture.md names real code: every function, class and file it cites exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
SOURCES = [*(ROOT / "openenv_gym").rglob("*.py"), *(ROOT / "servers").rglob("*.py")]
# functions, classes, and annotated attributes (a Codec's ``encode_actions`` is a field)
DEFINED = {
    name
    for path in SOURCES
    for name in re.findall(
        r"^\s*(?:(?:async\s+)?(?:def|class)\s+(\w+)|(\w+)\s*:\s*[\w\[])",
        path.read_text(encoding="utf-8"),
        re.M,
    )
    for name in name
    if name
}
CITED = sorted(set(re.findall(r"`([A-Za-z_][\w.]*)`", DOC)))
# `Class.method`, `module.function`, `_private`: the last part must be defined somewhere
CODE = [c for c in CITED if "." in c.strip(".") or c.startswith("_")]
FILES = sorted(set(re.findall(r"`((?:[\w]+/)+[\w]+\.py)`", DOC)))


def test_the_page_cites_code() -> None:
    assert len(CODE) > 30
    assert FILES


@pytest.mark.parametrize("name", CODE)
def test_a_cited_name_is_defined(name: str) -> None:
    last = name.rstrip(".").split(".")[-1]
    if last in {"py", "md", "toml", "yml"} or name.startswith(
        ("docs.", "openenv_gym.", "asyncio.")
    ):
        return  # a file name or a module path: checked below or by mkdocs
    assert last in DEFINED, f"docs/architecture.md cites `{name}`, defined nowhere"


@pytest.mark.parametrize("path", FILES)
def test_a_cited_file_exists(path: str) -> None:
    candidates = [ROOT / "openenv_gym" / path, ROOT / path, ROOT / "servers" / path]
    candidates += [
        ROOT / "openenv_gym" / "transport" / path,
        ROOT / "openenv_gym" / "runtime" / path,
    ]
    wildcard = "<env>" in path
    assert wildcard or any(c.exists() for c in candidates), f"no file {path}"
