"""docs/architecture.md names real code: every function, class, module and file it cites exists.

Each thing cited in backticks is checked the way its kind can be: a name (``Class.method``,
``_private``) is defined in the package or the servers; a module path
(``openenv_gym.exceptions``, ``asyncio.Protocol``) imports and resolves; a file name
(``shards.py``, ``transport/wire.py``, ``pyproject.toml``) exists. Every case asserts.
"""

from __future__ import annotations

import importlib
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
FILE_SUFFIXES = (".py", ".md", ".toml", ".yml")
MODULE_ROOTS = ("openenv_gym.", "asyncio.")
CITED = sorted(set(re.findall(r"`([A-Za-z_][\w.]*)`", DOC)))
BARE_FILES = [c for c in CITED if c.endswith(FILE_SUFFIXES)]
MODULE_PATHS = [c for c in CITED if c.startswith(MODULE_ROOTS) and c not in BARE_FILES]
# `Class.method`, `module.function`, `_private`: the last part must be defined somewhere
CODE = [
    c
    for c in CITED
    if ("." in c.strip(".") or c.startswith("_")) and c not in BARE_FILES + MODULE_PATHS
]
FILES = sorted(set(re.findall(r"`((?:[\w]+/)+[\w]+\.py)`", DOC)))
SEARCHED = [ROOT, ROOT / "openenv_gym", ROOT / "servers", ROOT / "tests"]


def test_the_page_cites_code() -> None:
    assert len(CODE) > 30
    assert FILES
    assert MODULE_PATHS
    assert BARE_FILES


@pytest.mark.parametrize("name", CODE)
def test_a_cited_name_is_defined(name: str) -> None:
    last = name.rstrip(".").split(".")[-1]
    assert last in DEFINED, f"docs/architecture.md cites `{name}`, defined nowhere"


@pytest.mark.parametrize("path", MODULE_PATHS)
def test_a_cited_module_path_resolves(path: str) -> None:
    parts = path.rstrip(".").split(".")
    for split in range(len(parts), 0, -1):  # the longest prefix that imports, then attributes
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            assert hasattr(found, attribute), f"`{path}`: no {attribute!r} in {found!r}"
            found = getattr(found, attribute)
        return
    pytest.fail(f"docs/architecture.md cites `{path}`, which does not import")


@pytest.mark.parametrize("name", BARE_FILES)
def test_a_cited_file_name_exists(name: str) -> None:
    top = ROOT / name
    found = top.exists() or any(
        path.name == name for folder in SEARCHED[1:] for path in folder.rglob(name)
    )
    assert found, f"docs/architecture.md cites `{name}`: no such file"


@pytest.mark.parametrize("path", FILES)
def test_a_cited_file_exists(path: str) -> None:
    candidates = [ROOT / "openenv_gym" / path, ROOT / path, ROOT / "servers" / path]
    candidates += [
        ROOT / "openenv_gym" / "transport" / path,
        ROOT / "openenv_gym" / "runtime" / path,
    ]
    assert any(c.exists() for c in candidates), f"no file {path}"
