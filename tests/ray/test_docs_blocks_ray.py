"""The docs' Ray blocks run against this suite's two-node cluster, a page at a time.

The harness is tests/docs/code_blocks.py (which blocks, by what rule) and run_blocks.py;
this module runs the programs of suite ``"ray"``: every block of a page that needs Ray
(``provider="ray"``, ``openenv-gym ray ...``), in page order, with ``RAY_ADDRESS`` naming
the cluster (as a trainer on a cluster node has it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs"))

from code_blocks import Program, all_programs
from ray_checks import TwoNodes
from run_blocks import Servers, run_program

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(900)]

PROGRAMS = [pytest.param(program, id=program.name) for program in all_programs(("ray",))]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    made = Servers(tmp_path_factory.mktemp("docs-servers"))
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_ray_blocks_of_a_page_run(
    program: Program,
    servers: Servers,
    cluster: TwoNodes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    run_program(program, servers, tmp_path)
