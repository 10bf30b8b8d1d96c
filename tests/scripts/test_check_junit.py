"""scripts/check_junit.py: the gate that turns skips into failures in CI."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_junit.py"

spec = importlib.util.spec_from_file_location("check_junit", SCRIPT)
assert spec is not None
assert spec.loader is not None
check_junit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_junit)


def report(tmp_path: Path, *cases: str, tests: int | None = None) -> str:
    skipped = sum("<skipped" in c for c in cases)
    body = "".join(cases)
    count = len(cases) if tests is None else tests
    path = tmp_path / "report.xml"
    path.write_text(
        f'<testsuites><testsuite tests="{count}" skipped="{skipped}" failures="0" errors="0">'
        f"{body}</testsuite></testsuites>"
    )
    return str(path)


PASSED = '<testcase classname="t" name="ok"/>'
GPU = '<testcase classname="t" name="gpu"><skipped message="needs a CUDA GPU"/></testcase>'
TRL = '<testcase classname="t" name="trl"><skipped message="could not import trl"/></testcase>'
MARKED = (
    '<testcase classname="t" name="marked"><properties><property name="marker" value="gpu"/>'
    '</properties><skipped message="marker gpu: no CUDA GPU here"/></testcase>'
)
UNMARKED = (  # the gpu skip message, but no gpu marker: not allowed by the marker
    '<testcase classname="t" name="unmarked"><skipped message="needs a CUDA GPU"/></testcase>'
)


def test_passes_with_tests_and_no_skips(tmp_path: Path) -> None:
    assert check_junit.check(report(tmp_path, PASSED)) is None


def test_a_skip_fails_unless_allowed(tmp_path: Path) -> None:
    path = report(tmp_path, PASSED, GPU)
    assert "t::gpu" in (check_junit.check(path) or "")
    assert check_junit.check(path, ("needs a CUDA GPU",)) is None
    path = report(tmp_path, PASSED, GPU, TRL)
    why = check_junit.check(path, ("needs a CUDA GPU",))
    assert why is not None
    assert "t::trl: could not import trl" in why
    assert "t::gpu" not in why


def test_no_tests_fails(tmp_path: Path) -> None:
    assert "no tests ran" in (check_junit.check(report(tmp_path, tests=0)) or "")


def test_command_line_exit_codes(tmp_path: Path) -> None:
    path = report(tmp_path, PASSED, GPU)

    def run(*args: str) -> int:
        return subprocess.run([sys.executable, str(SCRIPT), *args], check=False).returncode

    assert run(path) == 1
    assert run("--allow-skip", "needs a CUDA GPU", path) == 0
    assert run() == 1  # no report at all


def test_a_skip_is_allowed_by_its_marker_not_its_message(tmp_path: Path) -> None:
    path = report(tmp_path, PASSED, MARKED)
    assert "t::marked" in (check_junit.check(path) or "")
    assert check_junit.check(path, allowed_markers=("gpu",)) is None
    path = report(tmp_path, PASSED, MARKED, UNMARKED)
    why = check_junit.check(path, allowed_markers=("gpu",))
    assert why is not None
    assert "t::unmarked" in why
    assert "t::marked" not in why


def test_the_marker_on_the_command_line(tmp_path: Path) -> None:
    path = report(tmp_path, PASSED, MARKED)
    script = [sys.executable, str(SCRIPT)]
    assert subprocess.run([*script, path], check=False).returncode == 1
    marked = [*script, "--allow-skip-marker", "gpu", path]
    assert subprocess.run(marked, check=False).returncode == 0


pytest_plugins = ["pytester"]

MARKED_AND_NOT = """
import pytest
from gpu_marker import cuda_available

@pytest.mark.gpu
def test_marked():
    assert cuda_available()  # reached only where there is a GPU

def test_unmarked():
    pytest.skip("marker gpu: no CUDA GPU here")
"""


@pytest.fixture
def gpu_probed() -> None:
    """The plug-in's GPU probe made before ``pytester`` notes the loaded modules: an
    in-process run drops what it imported, and torch cannot be imported twice."""
    from gpu_marker import cuda_available

    cuda_available()


def test_the_gate_end_to_end_the_marker_decides_not_the_message(
    gpu_probed: None, pytester: pytest.Pytester
) -> None:
    # a real pytest run with the gpu_marker plug-in: the marked test skips where there is no
    # GPU (and runs where there is one), and its report carries the marker; a test that
    # skips with the same message but no marker is refused
    pytester.makepyfile(test_gate=MARKED_AND_NOT)
    xml = pytester.path / "report.xml"
    ran = pytester.runpytest(
        "-p", "gpu_marker", "-o", "markers=gpu: a CUDA GPU", f"--junitxml={xml}"
    )
    outcomes = ran.parseoutcomes()
    assert outcomes.get("skipped", 0) + outcomes.get("passed", 0) == 2
    assert "failed" not in outcomes
    why = check_junit.check(str(xml), allowed_markers=("gpu",))
    assert why is not None
    assert "test_gate::test_unmarked" in why
    assert "test_marked" not in why
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    assert check_junit._markers(cases["test_marked"]) == {"gpu"}
    assert check_junit._markers(cases["test_unmarked"]) == set()
