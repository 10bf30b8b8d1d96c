"""Fixtures of tests/aio: the counter env of tests/vector, served by shared local servers.

The asyncio envs are the sync envs' engine under another driver; their shared contract is
tested by tests/vector's conformance suite (run over both). The tests here are what only
an event loop has: awaiting, many envs in one loop, cancellation, closing under a waiting
call, uvloop.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vector"))

from openenv_gym_vector_envs import SPEC, subprocess_pythonpath

from openenv_gym.providers import LocalProvider


@pytest.fixture(scope="module")
def counter_url() -> Iterator[str]:
    """One local server of the counter env (``PYTHONPATH`` lets it import the module)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", subprocess_pythonpath())
        provider = LocalProvider(SPEC)
        try:
            (url,) = provider.start()
            patch.setenv("OPENENV_GYM_TOKEN", provider.token(0) or "")
            yield url
        finally:
            provider.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """A gate file for the counter env's SLOW action; opened at teardown whatever happened."""
    path = tmp_path / "gate"
    yield path
    path.touch()
