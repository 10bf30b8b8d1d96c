"""The test tree itself: nothing in it may shadow an installed module.

pytest puts the folder of each test module on ``sys.path`` (the default ``prepend`` import
mode). A test module directly under ``tests/`` would put ``tests/`` there, and then
``tests/gym`` is what ``import gym`` finds (TorchRL tries it: the TorchRL tests failed that
way once). So tests live one folder down, mirroring the package.
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_sits_directly_in_tests() -> None:
    assert (TESTS / "gym").is_dir()  # what such a module would let shadow ``gym``
    stray = sorted(p.name for p in TESTS.glob("*.py") if p.name != "conftest.py")
    assert stray == [], f"move {stray} into a folder of tests/"
