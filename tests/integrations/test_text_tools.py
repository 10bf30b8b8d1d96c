"""TRL tools of an MCP tool server: one named, typed, documented tool per MCP tool.

Pure where it can be: codecs from a ``CallToolAction`` schema and FastMCP-shaped tool
lists (no server); the last test builds a TRL tool class with several tools over a plain
Gymnasium env. ``tests/interop`` calls the tools of real ``MCPEnvironment`` servers, and
gives them to TRL's ``GRPOTrainer``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Literal

import gymnasium
import pytest
from pydantic import Field

from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.integrations.text import (
    Param,
    TextInterface,
    Tool,
    action_check,
    interface_from_tools,
    text_interface,
)
from openenv_gym.integrations.trl import environment_factory
from openenv_gym.runtime.environment import Action
from openenv_gym.spaces import TOOLS, Codec, codec_from_schema


class CallToolAction(Action):
    type: Literal["call_tool"] = Field(default="call_tool")
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


OBSERVATION = {
    "type": "object",
    "properties": {"tool_name": {"type": "string"}, "result": {}},
    "required": ["tool_name"],
}

WALK = {
    "name": "move",
    "description": "Walk along the line.\n\nArgs:\n    direction: Which way.\n    steps: Far.\n",
    "input_schema": {
        "type": "object",
        "properties": {
            "direction": {"enum": ["left", "right"], "type": "string"},
            "steps": {"type": "integer", "minimum": 1, "maximum": 3, "description": "1 to 3."},
        },
        "required": ["direction", "steps"],
    },
}
LOOK = {"name": "look", "description": "", "input_schema": {"type": "object", "properties": {}}}
SAY = {
    "name": "say-it",
    "description": "Say something.",
    "input_schema": {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "loud": {"type": "boolean", "default": False},
            "from": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
    },
}


def codec(tools: list[dict[str, Any]], **kwargs: Any) -> Codec:
    body = {"action": CallToolAction.model_json_schema(), "observation": OBSERVATION, TOOLS: tools}
    return codec_from_schema(body, **kwargs)


def test_one_tool_per_mcp_tool() -> None:
    made = codec([WALK, LOOK, SAY])
    assert made.tool_actions is not None
    interface = interface_from_tools(made.tool_actions)
    move, look, say = interface.tools
    assert (move.name, look.name, say.name) == ("move", "look", "say_it")
    assert interface.tool_name == "move"
    sig = move.signature()
    assert list(sig.parameters) == ["self", "direction", "steps"]
    assert sig.parameters["direction"].annotation == Literal["left", "right"]
    assert sig.parameters["steps"].annotation is int
    doc = move.docstring()
    assert doc.startswith("Walk along the line.\n\nArgs:\n")
    assert doc.count("Args:") == 1  # the server's own Args section is read, not repeated
    assert "    direction: Which way." in doc  # from the description's Args section
    assert "    steps: 1 to 3." in doc  # the schema's own description wins
    assert look.params == ()
    assert look.description == "Call the look tool."
    # every argument optional: all of them, bool a bool, keywords renamed
    assert [(p.name, p.annotation, p.default) for p in say.params] == [
        ("text", str, inspect.Parameter.empty),
        ("loud", bool, False),
        ("from_", str, None),
    ]
    check = action_check(_Unwrapped(made))
    action = move.to_action({"direction": "right", "steps": 2})
    assert action == {"tool": 0, "arguments": {"move": {"direction": 1, "steps": 2}}}
    assert check(action)
    assert made.encode_action(action)["arguments"] == {"direction": "right", "steps": 2}
    assert look.to_action({}) == {"tool": 1}
    assert check(look.to_action({}))
    said = say.to_action({"text": "hi", "loud": True})
    assert said == {"tool": 2, "arguments": {"say-it": {"text": "hi", "loud": 1, "from": ""}}}
    assert check(said)
    assert made.encode_action(said) == {
        "type": "call_tool",
        "tool_name": "say-it",
        "arguments": {"text": "hi", "loud": True, "from": ""},
    }
    with pytest.raises(InvalidActionError, match="missing argument"):
        move.to_action({"direction": "left"})
    with pytest.raises(InvalidActionError):
        move.to_action({"direction": "up", "steps": 1})
    with pytest.raises(InvalidActionError):
        say.to_action({"text": "hi", "loud": "yes"})


class _Unwrapped:
    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.unwrapped = self


def test_plain_text_answers_name_the_tool() -> None:
    made = codec([WALK, LOOK, SAY])
    assert made.tool_actions is not None
    interface = interface_from_tools(made.tool_actions)
    parse = interface.parse_action
    call = '{"tool": "move", "arguments": {"direction": "left", "steps": 3}}'
    assert parse(f"I will walk. {call}") == {
        "tool": 0,
        "arguments": {"move": {"direction": 0, "steps": 3}},
    }
    assert parse('<tool_call>{"name": "look", "arguments": {}}</tool_call>') == {"tool": 1}
    assert parse('{"tool": "say-it", "arguments": {"text": "x"}}')["tool"] == 2  # its own name
    assert parse('{"tool": "say_it", "arguments": {"text": "x"}}')["tool"] == 2
    with pytest.raises(InvalidActionError, match="no tool call found"):
        parse('{"tool": "jump", "arguments": {}}')
    with pytest.raises(InvalidActionError, match="move, look, say_it"):
        parse("left")
    assert "move(direction, steps): Walk along the line." in interface.instructions
    text = interface.observation_text
    assert text({"tool_name": "move", "text": '{"position":1}', "is_error": 0}) == '{"position":1}'
    assert text({"tool_name": "x", "text": "no such tool", "is_error": 1}) == "Error: no such tool"


def test_tool_names_become_identifiers() -> None:
    odd = [
        {"name": "reset", "input_schema": {}},
        {"name": "1st.step", "input_schema": {}},
        {"name": "1st-step", "input_schema": {}},
        {"name": "__", "input_schema": {}},
        {"name": "class", "input_schema": {}},
    ]
    made = codec(odd)
    assert made.tool_actions is not None
    names = [t.name for t in interface_from_tools(made.tool_actions).tools]
    assert names == ["reset_", "tool_1st_step", "tool_1st_step_2", "tool", "class_"]


def test_one_picked_tool_is_the_env_tool() -> None:
    walk = codec([WALK, LOOK], tool="move")
    assert walk.tool_actions is not None
    interface = interface_from_tools(walk.tool_actions)
    assert interface.tool_name == "move"
    assert interface.more_tools == ()
    assert interface.to_action({"direction": "right", "steps": 1}) == {"direction": 1, "steps": 1}
    assert interface.description == "Walk along the line."
    renamed = interface_from_tools(walk.tool_actions, tool_name="walk")
    assert renamed.tool_name == "walk"
    say = codec([SAY], tool="say-it", action_fields={"loud": None, "from": None})
    assert say.tool_actions is not None
    one = interface_from_tools(say.tool_actions)
    assert one.tool_name == "say_it"
    assert one.parse_action("hello") == "hello"  # one Text argument: the answer is it
    look = codec([WALK, LOOK], tool="look")
    assert look.tool_actions is not None
    nothing = interface_from_tools(look.tool_actions)
    assert (nothing.params, nothing.to_action({}), nothing.parse_action("go")) == ((), 0, 0)
    many = codec([WALK, LOOK])
    assert many.tool_actions is not None
    with pytest.raises(ConfigurationError, match="keep their names"):
        interface_from_tools(many.tool_actions, tool_name="walk")


def test_text_interface_of_an_env_with_a_tool_codec() -> None:
    made = codec([WALK, LOOK])
    interface = text_interface(_Unwrapped(made))
    assert [t.name for t in interface.tools] == ["move", "look"]


def test_interfaces_refuse_repeated_tool_names() -> None:
    extra = Tool("act", "Again.", (), lambda args: 0)
    with pytest.raises(ConfigurationError, match="distinct"):
        TextInterface("act", "Act.", (), lambda args: 0, lambda text: 0, more_tools=(extra,))
    with pytest.raises(ConfigurationError, match="identifiers"):
        Tool("ok", "Bad param.", (Param("for", int, "a keyword"),), lambda args: 0)


class _Dial(gymnasium.Env[str, int]):
    """A plain Gymnasium env: a dial that goes up or down; done at 3."""

    def __init__(self) -> None:
        self.action_space = gymnasium.spaces.Discrete(2)
        self.observation_space = gymnasium.spaces.Text(8)
        self.at = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.at = 0
        return "0", {}

    def step(self, action: int) -> tuple[str, float, bool, bool, dict]:
        self.at += 1 if action == 1 else -1
        return str(self.at), float(self.at == 3), self.at == 3, False, {}


def test_a_tool_class_gets_every_tool_of_the_interface() -> None:
    up = Tool("up", "Turn the dial up.", (), lambda args: 1)
    down = Tool(
        "down", "Turn the dial down.", (Param("hard", bool, "Harder.", False),), lambda a: 0
    )
    interface = TextInterface(
        up.name, up.description, up.params, up.to_action, lambda text: 1, more_tools=(down,)
    )
    gymnasium.register("openenv_gym_test/Dial-v0", entry_point=_Dial)
    try:
        factory = environment_factory("openenv_gym_test/Dial-v0", interface=interface)
        instance = factory()
        public = [n for n, _ in inspect.getmembers(type(instance), inspect.isfunction)]
        assert [n for n in public if n[0] != "_"] == ["down", "get_reward", "reset", "up"]
        assert inspect.getdoc(type(instance).down).startswith("Turn the dial down.")
        assert str(inspect.signature(type(instance).down)) == "(self, hard: bool = False) -> str"
        instance.reset(seed=0)
        assert [instance.up(), instance.down(), instance.up(), instance.up()] == [
            "1",
            "0",
            "1",
            "2",
        ]
        assert "episode is over" in instance.up().lower()
        assert instance.get_reward() == 1.0
        assert json.dumps([t.action for t in instance.trajectory]) == "[1, 0, 1, 1, 1]"
    finally:
        gymnasium.registry.pop("openenv_gym_test/Dial-v0", None)
