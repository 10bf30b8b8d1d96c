"""scripts/griffe_markdown.py: the docstrings' reST bits become Markdown on the docs site."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def module() -> ModuleType:
    if importlib.util.find_spec("griffe") is None:
        pytest.fail("griffe is not installed (the docs extra): pip install -e '.[docs]'")
    spec = importlib.util.spec_from_file_location(
        "griffe_markdown", ROOT / "scripts/griffe_markdown.py"
    )
    assert spec is not None
    assert spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_doctests(module: ModuleType) -> None:
    failed, attempted = doctest.testmod(module)
    assert attempted > 0
    assert failed == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":func:`check_server` runs", "`check_server` runs"),
        (":class:`~openenv_gym.vector.OpenEnvVectorEnv`", "`OpenEnvVectorEnv`"),
        (":py:meth:`a.B.c` and :data:`X`", "`a.B.c` and `X`"),
        ("what it raises::\n\n    try:", "what it raises:\n\n    try:"),
        ("Tools ::\n\n    x", "Tools\n\n    x"),
        ("::\n\n    x", "\n\n    x"),
    ],
)
def test_roles_and_literal_markers(module: ModuleType, text: str, expected: str) -> None:
    assert module.to_markdown(text) == expected


def test_bare_doctest_becomes_a_fence_until_the_blank_line(module: ModuleType) -> None:
    text = "Intro.\n\n>>> envs.reset(seed=0)\n>>> obs.shape\n(4, 50)\n\nAfter."
    assert module.to_markdown(text).split("\n") == [
        "Intro.",
        "",
        "```pycon",
        ">>> envs.reset(seed=0)",
        ">>> obs.shape",
        "(4, 50)",
        "```",
        "",
        "After.",
    ]


def test_doctest_at_the_end_is_closed(module: ModuleType) -> None:
    assert module.to_markdown(">>> 1").split("\n") == ["```pycon", ">>> 1", "```"]


def test_google_example_section_and_fences_are_left_alone(module: ModuleType) -> None:
    section = "Example:\n    >>> codec = codec_from_schema(schema)\n    >>> codec.action_space"
    assert module.to_markdown(section) == section
    fence = "```python\n>>> x = 1\nprint(x)::\n```"
    assert module.to_markdown(fence) == fence
