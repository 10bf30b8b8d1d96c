"""The README's MCP blocks run as written: a tool environment written as OpenEnv writes one
(``echo_tools.py``), served by ``server=`` and stepped through ``openenv/Generic-v0``.

Here, not in tests/docs, because it needs OpenEnv (and FastMCP): the interop venvs have
them. tests/docs/test_readme_blocks.py runs the README's other blocks and checks that every
block belongs to one of the tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("openenv")

pytestmark = [pytest.mark.openenv, pytest.mark.integration, pytest.mark.timeout(300)]

DOCS_TESTS = Path(__file__).resolve().parents[1] / "docs"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DOCS_TESTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_mcp_blocks_run(tmp_path: Path) -> None:
    code_blocks = _load("code_blocks")
    readme = _load("test_readme_blocks")
    mcp = readme.group("openenv")
    assert [b.file_name for b in mcp] == ["echo_tools.py", None]
    result = code_blocks.run(code_blocks.script(mcp, {}, tmp_path), tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.split() == ["hi"]
    assert (tmp_path / "echo_tools.py").is_file()
