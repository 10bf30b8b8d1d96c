"""MCP tool environments (OpenEnv's ``MCPEnvironment`` + FastMCP) through our facades.

The servers are apps of OpenEnv's own ``create_app``, serving ``CallToolAction`` /
``CallToolObservation`` as upstream's echo does (:mod:`openenv_mcp_envs`): an echo with
upstream's two tools, and a two-tool walk with a reward and an end. ``openenv/Echo-v0``
must work against the MCP echo and the legacy ``EchoAction`` echo alike, with the same
spaces; ``openenv/Generic-v0`` must build tool actions from the listed tools' schemas.

Version differences asserted here (not skipped): the reset observation's ``metadata``
reaches the wire only from openenv 0.4, so the MCP echo's reset text (its greeting) and the
tool server's reset ``text`` (the metadata as JSON) are empty on openenv-core 0.3.0.
"""

from __future__ import annotations

import inspect
import json
import typing

import pytest

pytest.importorskip("openenv")

import gymnasium
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from interop_support import WIRE_METADATA, Server
from openenv_mcp_envs import ECHO_READY, flag_for

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.assemble import fetch_schema, list_tools
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import ConfigurationError, EpisodeOverError
from openenv_gym.integrations.trl import environment_factory
from openenv_gym.spaces import TOOLS, is_mcp_schema

pytestmark = pytest.mark.openenv

VECTOR = 16


@pytest.fixture
def mcp_echo(shared_app) -> Server:
    return shared_app("mcp_echo", max_concurrent_envs=VECTOR + 4)


@pytest.fixture
def linewalk(shared_app) -> Server:
    return shared_app("linewalk", max_concurrent_envs=VECTOR + 4)


@pytest.fixture
def legacy_echo(shared_app) -> Server:
    return shared_app("echo", max_concurrent_envs=VECTOR + 4)


def test_schema_says_mcp_and_a_list_tools_step_lists_the_tools(mcp_echo, linewalk, shared_app):
    schema = fetch_schema(mcp_echo.url)
    assert is_mcp_schema(schema)
    assert schema["action"]["title"] == "CallToolAction"
    assert [t["name"] for t in schema[TOOLS]] == ["echo_message", "echo_with_length"]
    assert schema[TOOLS][0]["input_schema"]["required"] == ["message"]
    assert schema[TOOLS][0]["description"].startswith("Echo back the provided message.")
    move, look = list_tools(linewalk.url)
    assert (move.name, look.name) == ("move", "look")
    props = move.input_schema["properties"]
    assert props["steps"]["minimum"] == 1
    assert props["steps"]["maximum"] == 3
    assert look.input_schema.get("properties", {}) == {}
    counter = fetch_schema(shared_app("counter").url)
    assert not is_mcp_schema(counter)
    assert TOOLS not in counter


# ------------------------------------------------------------------ openenv/Echo-v0


@pytest.mark.parametrize("server", ["mcp_echo", "legacy_echo"])
def test_echo_id_echoes_on_both_echo_servers(server, request):
    app = request.getfixturevalue(server)
    env = gymnasium.make("openenv/Echo-v0", base_url=app.url)
    try:
        mcp = server == "mcp_echo"
        assert env.unwrapped.codec.bind_schema is not None
        obs, info = env.reset(seed=0)
        if mcp:
            assert obs == (ECHO_READY if WIRE_METADATA else "")
        else:
            assert obs == ECHO_READY
        obs, reward, terminated, truncated, info = env.step("hello there")
        assert (obs, terminated, truncated) == ("hello there", False, False)
        if mcp:
            assert reward == 0.0  # the MCP echo sends reward null
            assert info["tool_name"] == "echo_message"
            assert info["result"]["structured_content"] == {"result": "hello there"}
            assert info["error"] is None
        else:
            assert reward == pytest.approx(1.1)
            assert info["message_length"] == 11
        assert env.step("again")[0] == "again"
    finally:
        env.close()


def test_echo_id_has_the_same_spaces_on_both_echo_servers(mcp_echo, legacy_echo):
    made = [gymnasium.make("openenv/Echo-v0", base_url=a.url) for a in (mcp_echo, legacy_echo)]
    try:
        mcp, legacy = made
        assert mcp.action_space == legacy.action_space
        assert mcp.observation_space == legacy.observation_space
        assert isinstance(mcp.action_space, spaces.Text)
    finally:
        for env in made:
            env.close()


@pytest.mark.parametrize("server", ["mcp_echo", "legacy_echo"])
def test_echo_id_vector_of_16_echoes(server, request):
    app = request.getfixturevalue(server)
    envs = gymnasium.make_vec("openenv/Echo-v0", num_envs=VECTOR, base_url=app.url)
    try:
        assert envs.single_action_space == spaces.Text(4096, min_length=1, charset=_charset())
        obs, _ = envs.reset(seed=0)
        greeting = ECHO_READY if server == "legacy_echo" or WIRE_METADATA else ""
        assert list(obs) == [greeting] * VECTOR
        for round_ in range(3):
            messages = [f"env {i} round {round_}" for i in range(VECTOR)]
            obs, _, terminations, truncations, _ = envs.step(messages)
            assert list(obs) == messages
            assert not terminations.any()
            assert not truncations.any()
    finally:
        envs.close()


def _charset() -> str:
    import string

    return "".join(sorted(set(string.printable)))


# ------------------------------------------------------------------ openenv/Generic-v0


def test_generic_on_the_mcp_echo_acts_with_both_tools(mcp_echo):
    env = gymnasium.make("openenv/Generic-v0", base_url=mcp_echo.url)
    try:
        space = env.action_space
        assert isinstance(space, spaces.Dict)
        assert space["tool"] == spaces.Discrete(2)
        assert set(space["arguments"].keys()) == {"echo_message", "echo_with_length"}
        assert isinstance(space["arguments"]["echo_message"]["message"], spaces.Text)
        assert set(env.observation_space.keys()) == {"tool_name", "text", "is_error"}
        obs, info = env.reset(seed=1)
        assert obs["tool_name"] == ""
        assert obs["is_error"] == 0
        assert json.loads(obs["text"] or "{}") == (info.get("metadata") or {})
        assert bool(obs["text"]) == WIRE_METADATA
        obs, _, _, _, info = env.step({"tool": 0, "arguments": {"echo_message": {"message": "hi"}}})
        assert obs == {"tool_name": "echo_message", "text": "hi", "is_error": 0}
        assert info["result"]["data"] == "hi"
        action = {"tool": 1, "arguments": {"echo_with_length": {"message": "abc"}}}
        obs, _, _, _, info = env.step(action)
        assert obs["tool_name"] == "echo_with_length"
        assert json.loads(obs["text"]) == {"message": "abc", "length": 3}
        assert info["result"]["structured_content"] == {"message": "abc", "length": 3}
        assert env.observation_space.contains(obs)
        # a tool error (here: no such tool, sent past the action space) reads as text
        reply = env.unwrapped.session.step(
            {"type": "call_tool", "tool_name": "nope", "arguments": {}}
        )
        obs = env.unwrapped.codec.decode_observation(reply.observation)
        assert obs["is_error"] == 1
        assert "nope" in obs["text"]
    finally:
        env.close()


def test_listing_the_tools_leaves_the_only_session_free(fresh_app):
    """The tool list is read on a session of its own, closed before the env opens its own."""
    app = fresh_app("mcp_echo", max_concurrent_envs=1)
    env = gymnasium.make("openenv/Generic-v0", base_url=app.url, tool="echo_with_length")
    try:
        env.reset()
        obs, *_ = env.step("four")
        assert json.loads(obs["text"]) == {"message": "four", "length": 4}
    finally:
        env.close()


def test_generic_tool_picks_one_tool(mcp_echo, shared_app):
    env = gymnasium.make("openenv/Generic-v0", base_url=mcp_echo.url, tool="echo_message")
    try:
        assert isinstance(env.action_space, spaces.Text)
        env.reset()
        obs, *_ = env.step("just this tool")
        assert (obs["tool_name"], obs["text"]) == ("echo_message", "just this tool")
    finally:
        env.close()
    with pytest.raises(ConfigurationError, match="no such tool"):
        OpenEnvEnv("generic", base_url=mcp_echo.url, tool="echo_twice")
    with pytest.raises(ConfigurationError, match="not OpenEnv's CallToolAction"):
        OpenEnvEnv("generic", base_url=shared_app("counter").url, tool="echo_message")


def test_generic_sampled_actions_call_both_tools_of_the_walk(linewalk):
    env = gymnasium.make("openenv/Generic-v0", base_url=linewalk.url)
    try:
        space = env.action_space
        assert space["tool"] == spaces.Discrete(2)  # move, look: in the server's order
        move = space["arguments"]["move"]
        assert move["direction"] == spaces.Discrete(2)  # Literal["left", "right"]
        assert move["steps"] == spaces.Discrete(3, start=1)  # Field(ge=1, le=3)
        assert set(space["arguments"].keys()) == {"move"}  # look() takes no argument
        space.seed(7)
        seed, called, episodes = 11, {"move": 0, "look": 0}, 0
        env.reset(seed=seed)
        position, flag = 0, flag_for(seed)
        for _ in range(300):
            action = space.sample()
            obs, reward, terminated, _, _ = env.step(action)
            tool = ("move", "look")[int(action["tool"])]
            called[tool] += 1
            assert obs["is_error"] == 0, obs["text"]
            assert obs["tool_name"] == tool
            assert env.observation_space.contains(obs)
            if tool == "move":
                args = action["arguments"]["move"]
                position += int(args["steps"]) * (1 if int(args["direction"]) == 1 else -1)
                assert json.loads(obs["text"]) == {"position": position}
            else:
                assert obs["text"] == f"You stand at {position}; the flag is at {flag}."
            assert terminated == (tool == "move" and position == flag)
            assert reward == (1.0 if terminated else 0.0)
            if terminated:
                episodes += 1
                seed += 1
                env.reset(seed=seed)
                position, flag = 0, flag_for(seed)
        assert min(called.values()) > 50
        assert episodes > 0
    finally:
        env.close()


def test_generic_on_a_tool_server_passes_gymnasiums_check_env(linewalk):
    env = OpenEnvEnv("generic", base_url=linewalk.url)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


# ------------------------------------------------------------------ TRL tools


def _tools(instance: object) -> dict[str, typing.Any]:
    members = inspect.getmembers(type(instance), inspect.isfunction)
    return {n: f for n, f in members if n not in ("reset", "get_reward") and n[0] != "_"}


def test_environment_factory_exposes_each_mcp_tool(linewalk):
    factory = environment_factory("openenv/Generic-v0", base_url=linewalk.url)
    try:
        instance = factory()
        tools = _tools(instance)
        assert sorted(tools) == ["look", "move"]
        move = inspect.signature(tools["move"])
        assert list(move.parameters) == ["self", "direction", "steps"]
        assert move.parameters["direction"].annotation == typing.Literal["left", "right"]
        assert move.parameters["steps"].annotation is int
        assert list(inspect.signature(tools["look"]).parameters) == ["self"]
        doc = inspect.getdoc(tools["move"])
        assert doc.startswith("Walk along the line.")
        assert "    direction: Which way to walk." in doc
        assert "    steps: How far to go: 1 to 3." in doc
        assert doc.count("Args:") == 1
        assert inspect.getdoc(tools["look"]).startswith("Tell where the walker stands")
        seed = 5
        flag = flag_for(seed)
        instance.reset(seed=seed)
        assert instance.look() == f"You stand at 0; the flag is at {flag}."
        direction = "right" if flag > 0 else "left"
        for at in range(1, abs(flag) + 1):
            said = instance.move(direction=direction, steps=1)
            assert json.loads(said.split("\n")[0]) == {"position": at if flag > 0 else -at}
        assert instance.done
        assert instance.get_reward() == 1.0
        assert instance.env.unwrapped.state()["position"] == flag  # the calls reached it
        with pytest.raises(EpisodeOverError):
            instance.look()
    finally:
        factory.close()


def test_environment_factory_on_the_mcp_echo(mcp_echo):
    factory = environment_factory("openenv/Generic-v0", base_url=mcp_echo.url)
    try:
        instance = factory()
        tools = _tools(instance)
        assert sorted(tools) == ["echo_message", "echo_with_length"]
        assert inspect.signature(tools["echo_message"]).parameters["message"].annotation is str
        assert "message: The message to echo back" in inspect.getdoc(tools["echo_message"])
        instance.reset(seed=0)
        assert instance.echo_message(message="ping") == "ping"
        assert json.loads(instance.echo_with_length(message="ping")) == {
            "message": "ping",
            "length": 4,
        }
        assert instance.trajectory[0].text == "ping"
    finally:
        factory.close()
