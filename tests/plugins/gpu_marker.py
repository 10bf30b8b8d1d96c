"""The ``gpu`` marker's gate, a pytest plug-in (``-p gpu_marker`` in pyproject.toml).

A test marked ``gpu`` runs where a CUDA GPU is (``torch.cuda.is_available()``) and skips
elsewhere: the marker decides, not the test's own code or its skip message. Each such test
also carries the JUnit property ``marker=gpu``, so that ``scripts/check_junit.py
--allow-skip-marker gpu`` allows exactly these skips (the only ones CI allows).
"""

from __future__ import annotations

import functools

import pytest

MARKER = "gpu"


@functools.cache
def cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA device (imported only when asked)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag every ``gpu`` test in the JUnit report (``<property name="marker" .../>``)."""
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.user_properties.append(("marker", MARKER))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a ``gpu`` test where there is no CUDA GPU."""
    if item.get_closest_marker(MARKER) is not None and not cuda_available():
        pytest.skip("marker gpu: no CUDA GPU here")
