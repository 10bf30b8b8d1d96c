"""Fixtures of tests/soak: the run's size, leak checks, and the figures summary.

The suite runs at the CI size by default; ``OPENENV_GYM_SOAK_SCALE=full`` runs the full
size (``docs/reliability.md``, section Soak)::

    OPENENV_GYM_SOAK_SCALE=full .venv/bin/python -m pytest -m soak tests/soak -p no:cacheprovider

Each test records what it measured (:class:`~soak_support.Figures`); the figures are
printed in a "soak figures" section at the end of the run.

The fuzz cases are drawn from a fresh seed each run, printed in the run's header and with
any failure; ``OPENENV_GYM_SOAK_SEED=N`` draws run N's cases again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from soak_support import (
    FUZZ_SEED,
    SCALE,
    SEED_VAR,
    Figures,
    descendants,
    raise_fd_limit,
    wait_until,
)

_FIGURES: list[Figures] = []


@pytest.fixture(scope="session", autouse=True)
def _open_files() -> None:
    """Room for every session's socket twice (client and server) and then some."""
    raise_fd_limit(4 * SCALE.sessions + 1024)


@pytest.fixture(scope="module", autouse=True)
def _no_leaked_processes() -> Iterator[None]:
    """Every process a module starts (its servers) is gone once the module is done."""
    before = descendants()
    yield
    assert wait_until(lambda: not descendants() - before, 15.0), (
        f"processes left behind: {sorted(descendants() - before)}"
    )


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Where a test records its figures (printed at the end of the run)."""
    recorded = Figures(request.node.name)
    _FIGURES.append(recorded)
    return recorded


def pytest_report_header() -> str:
    """The fuzz seed, first thing in the run's output."""
    return f"soak fuzz seed: {FUZZ_SEED} (replay: {SEED_VAR}={FUZZ_SEED})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the figures the soak tests recorded."""
    if not _FIGURES:
        return
    terminalreporter.section(f"soak figures ({SCALE.name} size, fuzz seed {FUZZ_SEED})")
    for recorded in _FIGURES:
        if recorded.values:
            terminalreporter.write_line(recorded.line())
