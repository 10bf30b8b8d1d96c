"""The docs' blocks that need OpenEnv run here, in the interop venvs, a page at a time.

The harness is tests/docs/code_blocks.py (which blocks, by what rule) and run_blocks.py;
this module runs the programs of suite ``"openenv"``: blocks that import OpenEnv (the
README's MCP tool server, written as OpenEnv writes one, and the env stepping it), host
OpenEnv's env packages (``serve --app``, ``app=``: ``OpenEnv/envs/NAME`` is pointed at the
package in its shape in tests/interop/envs) or name an MCP tool server (``mcp_echo``: this
suite's app in the shape of OpenEnv's MCP echo, served by OpenEnv's own factory).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))

from code_blocks import Program, all_programs
from interop_support import Server
from run_blocks import Servers, run_program

pytestmark = [pytest.mark.openenv, pytest.mark.integration, pytest.mark.timeout(600)]

PROGRAMS = [pytest.param(program, id=program.name) for program in all_programs(("openenv",))]


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, shared_app: Callable[..., Server]
) -> Iterator[Servers]:
    def mcp_echo() -> tuple[str, Callable[[], None]]:
        return shared_app("mcp_echo").url, lambda: None  # the session's, stopped with it

    made = Servers(tmp_path_factory.mktemp("docs-servers"), {"mcp_echo": mcp_echo})
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_openenv_blocks_of_a_page_run(
    program: Program, servers: Servers, tmp_path: Path
) -> None:
    run_program(program, servers, tmp_path)
