"""``as_openenv_environment``: our environments inside OpenEnv's own app factory.

The interop suite (tests/interop, run with openenv installed) serves them through
``create_app``; here the function is checked in whatever venv runs the suite: with
openenv, the adapter must delegate; without it, the error must say what to install.
"""

from __future__ import annotations

import importlib.util

import pytest

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.runtime.openenv_app import as_openenv_environment
from openenv_gym_servers.echo import EchoAction, EchoEnvironment


def test_adapter_delegates_or_names_the_missing_package() -> None:
    if importlib.util.find_spec("openenv") is None:
        with pytest.raises(ConfigurationError, match=r"openenv-gym\[openenv\]"):
            as_openenv_environment(EchoEnvironment)
        return
    from openenv.core.env_server.interfaces import Environment

    adapter = as_openenv_environment(EchoEnvironment)
    assert issubclass(adapter, Environment)
    env = adapter()
    assert env.reset(episode_id="e").echoed_message == "Echo environment ready!"
    assert env.step(EchoAction(message="hi")).reward == pytest.approx(0.2)
    assert env.state.episode_id == "e"
