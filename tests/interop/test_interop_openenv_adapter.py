"""``as_openenv_environment`` with a real OpenEnv line: a subclass of its ``Environment``.

OpenEnv's WebSocket handler calls the ``reset_async`` / ``step_async`` its base class
provides, so our environments are wrapped in a thin subclass that delegates to one
instance per session (docs/compatibility.md). The rest of tests/interop serves it through
OpenEnv's ``create_app``; here the adapter is checked directly.
"""

from __future__ import annotations

import asyncio

import pytest
from openenv.core.env_server.interfaces import Environment

from openenv_gym.runtime.openenv_app import as_openenv_environment
from openenv_gym_servers.echo import EchoAction, EchoEnvironment

pytestmark = pytest.mark.openenv


class Closing(EchoEnvironment):
    """Echo that counts its ``close`` calls."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def test_the_adapter_is_an_openenv_environment_delegating_to_ours() -> None:
    adapter = as_openenv_environment(EchoEnvironment)
    assert issubclass(adapter, Environment)
    assert adapter.SUPPORTS_CONCURRENT_SESSIONS is True
    assert adapter.__name__ == "OpenEnvAdapter[EchoEnvironment]"
    env = adapter()
    assert env.reset(episode_id="e").echoed_message == "Echo environment ready!"
    assert env.step(EchoAction(message="hi")).reward == pytest.approx(0.2)
    assert env.state.episode_id == "e"
    assert env.state.step_count == 1


def test_openenv_async_calls_reach_our_env() -> None:
    env = as_openenv_environment(EchoEnvironment)()

    async def play() -> tuple[str, str]:
        first = await env.reset_async(episode_id="a")
        second = await env.step_async(EchoAction(message="again"))
        return first.echoed_message, second.echoed_message

    assert asyncio.run(play()) == ("Echo environment ready!", "again")


def test_each_adapter_instance_has_its_own_env_and_closes_it() -> None:
    adapter = as_openenv_environment(Closing)
    one, two = adapter(), adapter()
    one.reset(episode_id="one")
    two.reset(episode_id="two")
    one.step(EchoAction(message="x"))
    assert (one.state.step_count, two.state.step_count) == (1, 0)
    one.close()
    assert Closing.closed == 1
