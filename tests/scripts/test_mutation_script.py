"""scripts/mutation-test names real things: each pass's modules, tests and functions exist.

A pass whose test selection names a moved file fails only hours into a run (mutmut's
first, unmutated test run); one whose function pattern names a renamed method mutates
nothing and reports a clean pass. Both are caught here, without running mutmut.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / "scripts" / "mutation-test").read_text()


def declared(table: str) -> dict[str, list[str]]:
    """``TABLE[pass]=...`` assignments of the script (quoted or not), split on whitespace."""
    found = re.findall(rf'^{table}\[(\w+)\]=(?:"([^"]*)"|(\S+))', SCRIPT, flags=re.M)
    return {name: (quoted or bare).split() for name, quoted, bare in found}


MODULES, TESTS, FUNCTIONS = declared("MODULE"), declared("TESTS"), declared("FUNCTIONS")
PASSES = sorted(MODULES)


def mutmut_names(module: str) -> list[str]:
    """The names mutmut gives the functions and methods of ``module`` (a path)."""
    dotted = module.removesuffix(".py").replace("/", ".")
    tree = ast.parse((ROOT / module).read_text())
    names = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.append(f"{dotted}.x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.append(f"{dotted}.xǁ{node.name}ǁ{item.name}")
    return names


def test_the_script_declares_every_pass_it_lists() -> None:
    listed = re.search(r"^  passes=\(([^)]*)\)", SCRIPT, flags=re.M)
    assert listed is not None
    assert sorted(listed.group(1).split()) == PASSES
    assert sorted(TESTS) == sorted(FUNCTIONS) == PASSES


@pytest.mark.parametrize("name", PASSES)
def test_a_pass_names_existing_modules_and_tests(name: str) -> None:
    for module in MODULES[name]:
        assert (ROOT / module).is_file(), module
    for test in TESTS[name]:
        path, _, node = test.partition("::")
        assert (ROOT / path).is_file(), test
        if node:
            assert re.search(rf"^(async )?def {re.escape(node)}\(", (ROOT / path).read_text(), re.M)


@pytest.mark.parametrize("name", PASSES)
def test_each_function_pattern_of_a_pass_matches_a_function_it_mutates(name: str) -> None:
    functions = [f for module in MODULES[name] for f in mutmut_names(module)]
    for pattern in FUNCTIONS[name]:
        assert any(fnmatch.fnmatch(f, pattern) for f in functions), pattern
