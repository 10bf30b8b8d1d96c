"""The code blocks of the README and every docs page run, a page at a time, in page order.

The harness is tests/docs/code_blocks.py (the rules) and run_blocks.py (running them); this
module runs the pages whose blocks need nothing beyond the main venv: ``plain``, ``trl``
(marker trl) and ``docker`` (marker docker) programs. Ray pages run in
tests/ray/test_docs_blocks_ray.py, OpenEnv ones in tests/interop/test_docs_blocks_openenv.py.
The stand-in servers (and the tiny model) are shared by every page of the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from code_blocks import Program, all_programs
from run_blocks import Servers, run_program

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MARKS = {"trl": pytest.mark.trl, "docker": pytest.mark.docker}

PROGRAMS = [
    pytest.param(program, id=program.name, marks=[MARKS[n] for n in program.needs if n in MARKS])
    for program in all_programs(("plain", "trl", "docker"))
]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    made = Servers(tmp_path_factory.mktemp("docs-servers"))
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_blocks_of_a_page_run(program: Program, servers: Servers, tmp_path: Path) -> None:
    run_program(program, servers, tmp_path)
