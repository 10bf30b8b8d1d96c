"""``as_openenv_environment`` without OpenEnv installed: the error says what to install.

The adapter itself (it subclasses OpenEnv's ``Environment`` and delegates to one instance
of ours) is tested where OpenEnv is installed: tests/interop/test_interop_openenv_adapter.py
(marker ``openenv``), and through OpenEnv's ``create_app`` by the rest of tests/interop.
Here OpenEnv is hidden from the import system, whatever the venv has, so the error branch
always runs.
"""

from __future__ import annotations

import sys

import pytest

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.runtime.openenv_app import as_openenv_environment
from openenv_gym_servers.echo import EchoEnvironment


def test_without_openenv_the_error_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m == "openenv" or m.startswith("openenv.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "openenv", None)  # ``import openenv...`` fails
    with pytest.raises(ConfigurationError, match=r"pip install 'openenv-gym\[openenv\]'") as info:
        as_openenv_environment(EchoEnvironment)
    assert isinstance(info.value.__cause__, ImportError)
