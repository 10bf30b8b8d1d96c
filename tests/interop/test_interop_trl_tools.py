"""TRL tools (``environment_factory``) against real OpenEnv servers: JSON /ws, no /batch.

TRL itself is not needed: the factory and its instances are what ``GRPOTrainer`` calls
(``factory()``, ``reset(**row)``, the tool, ``get_reward()``), called here directly.
"""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("openenv")

from openenv_counter_env import target_for

from openenv_gym.exceptions import EpisodeOverError
from openenv_gym.integrations.trl import environment_factory
from openenv_gym_servers.wordle import WordleEnvironment

pytestmark = pytest.mark.openenv


def tools(instance: object) -> list[str]:
    members = inspect.getmembers(type(instance), inspect.isfunction)
    return sorted(n for n, _ in members if n not in ("reset", "get_reward") and n[0] != "_")


def test_wordle_tool_on_openenvs_app(shared_app) -> None:
    app = shared_app("wordle")
    local = WordleEnvironment()
    local.reset(seed=3)
    secret = local.state.raw_state["game_state"]["secret_word"]
    factory = environment_factory("openenv/Wordle-v0", base_url=app.url)
    try:
        a, b = factory(), factory()  # two sessions on OpenEnv's server
        assert tools(a) == ["guess"]
        assert a.env.unwrapped.protocol == "json"
        assert "You are Playing Wordle." in a.reset(seed=3)
        b.reset(seed=3)
        assert "Feedback" in a.guess("crane")
        assert "The episode is over" in b.guess(secret)  # same seed, same word
        assert b.get_reward() == 1.0
        assert a.get_reward() == 0.0
        with pytest.raises(EpisodeOverError):
            b.guess("crane")
    finally:
        factory.close()
    assert factory.base_url is None  # nothing started: the server was given


def test_generic_tool_from_openenvs_schema(counter_app_url) -> None:
    factory = environment_factory("openenv/Generic-v0", base_url=counter_app_url)
    try:
        instance = factory()
        (tool,) = tools(instance)
        signature = inspect.signature(getattr(instance, tool))
        assert list(signature.parameters) == ["delta"]
        assert signature.parameters["delta"].annotation is int
        instance.reset(seed=5)
        for _ in range(target_for(5)):
            getattr(instance, tool)(delta=1)
        assert instance.done
        assert instance.get_reward() == 1.0
    finally:
        factory.close()


@pytest.fixture
def counter_app_url(shared_app) -> str:
    return shared_app("counter", factory="create_app").url
