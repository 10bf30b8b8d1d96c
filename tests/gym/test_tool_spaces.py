"""MCP tool servers: ``codec_from_schema`` of a ``CallToolAction`` schema plus its tools.

Pure: the models below have the fields of OpenEnv's ``CallToolAction`` /
``CallToolObservation`` (``openenv.core.env_server.mcp_types``) and the tool schemas are
what FastMCP makes of typed Python functions; no server. ``tests/interop`` runs the same
against real ``MCPEnvironment`` apps of both OpenEnv lines.
"""

from __future__ import annotations

import enum
import logging
from typing import Any, Literal

import numpy as np
import pytest
from gymnasium import spaces
from pydantic import BaseModel, Field

from openenv_gym import ConfigurationError
from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.runtime.environment import Action, Observation
from openenv_gym.spaces import (
    CALL_TOOL,
    TOOL_TEXT_MAX,
    TOOLS,
    McpTool,
    codec_for,
    codec_from_schema,
    is_mcp_schema,
    listed_tools,
    schema_node,
    tool_result_text,
)


class CallToolAction(Action):
    type: Literal["call_tool"] = Field(default="call_tool")
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolErrorType(str, enum.Enum):  # noqa: UP042 - as OpenEnv writes it
    EXECUTION_ERROR = "execution_error"
    TOOL_NOT_FOUND = "tool_not_found"


class ToolError(BaseModel):
    error_type: ToolErrorType
    message: str


class CallToolObservation(Observation):
    tool_name: str
    result: Any = None
    error: ToolError | None = None


class StepsObservation(CallToolObservation):
    """A subclass with a field of its own (some MCP envs add state to the observation)."""

    steps_left: int = Field(default=0, ge=0, le=10)


ECHO_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "The message to echo back"}},
    "required": ["message"],
    "additionalProperties": False,
}
MOVE_SCHEMA = {
    "type": "object",
    "properties": {
        "direction": {"enum": ["left", "right"], "type": "string"},
        "steps": {"type": "integer", "minimum": 1, "maximum": 3},
        "loud": {"type": "boolean", "default": False},
    },
    "required": ["direction", "steps"],
}
TOOL_LIST = [
    {"name": "echo", "description": "Echo it.", "input_schema": ECHO_SCHEMA},
    {"name": "move", "description": "Walk.", "inputSchema": MOVE_SCHEMA},  # MCP's spelling
    {"name": "look", "description": "Look around.", "input_schema": {"type": "object"}},
]


def tool_schema(tools: list[Any] | None = None, observation: type = CallToolObservation) -> dict:
    body: dict[str, Any] = {
        "action": CallToolAction.model_json_schema(),
        "observation": observation.model_json_schema(),
    }
    if tools is not None:
        body[TOOLS] = tools
    return body


def test_the_call_tool_action_marks_an_mcp_server() -> None:
    assert is_mcp_schema(tool_schema())
    assert not is_mcp_schema({"action": Action.model_json_schema(), "observation": {}})

    class Other(Action):  # a tool_name but another type: not CallToolAction
        type: Literal["list_tools"] = "list_tools"
        tool_name: str
        arguments: dict[str, Any]

    assert not is_mcp_schema({"action": Other.model_json_schema()})

    class NoType(Action):
        tool_name: str
        arguments: dict[str, Any]

    assert is_mcp_schema({"action": NoType.model_json_schema()})
    assert not is_mcp_schema({"action": "nope"})
    assert not is_mcp_schema([])  # type: ignore[arg-type]


def test_tool_listings_read_both_spellings() -> None:
    echo, move, look = listed_tools(tool_schema(TOOL_LIST))
    assert echo == McpTool("echo", "Echo it.", ECHO_SCHEMA)
    assert move.input_schema == MOVE_SCHEMA
    assert look.input_schema == {"type": "object"}
    assert McpTool.from_listing({"name": "bare"}).input_schema == {
        "type": "object",
        "properties": {},
    }
    assert McpTool.from_listing(echo) is echo
    assert echo.as_json() == {
        "name": "echo",
        "description": "Echo it.",
        "input_schema": ECHO_SCHEMA,
    }
    for bad in [{"description": "no name"}, {"name": ""}, "echo", {"name": "x", "inputSchema": 3}]:
        with pytest.raises(RemoteProtocolError):
            McpTool.from_listing(bad)
    with pytest.raises(ConfigurationError, match="lists no tools"):
        codec_from_schema(tool_schema())  # a plain GET /schema body: no tools


def test_every_tool_in_one_dict_action() -> None:
    codec = codec_from_schema(tool_schema(TOOL_LIST))
    space = codec.action_space
    assert space["tool"] == spaces.Discrete(3)
    arguments = space["arguments"]
    assert set(arguments.keys()) == {"echo", "move"}  # look() has no argument: no entry
    assert isinstance(arguments["echo"]["message"], spaces.Text)
    assert arguments["move"]["direction"] == spaces.Discrete(2)
    assert arguments["move"]["steps"] == spaces.Discrete(3, start=1)
    assert "loud" not in arguments["move"].spaces  # has a default: left to the server
    assert codec.tool_actions is not None
    assert [t.name for t in codec.tool_actions.tools] == ["echo", "move", "look"]
    assert not codec.tool_actions.single
    move = {"tool": 1, "arguments": {"move": {"direction": 1, "steps": 3}}}
    assert codec.encode_action(move) == {
        "type": CALL_TOOL,
        "tool_name": "move",
        "arguments": {"direction": "right", "steps": 3},
    }
    assert codec.encode_action({"tool": 2}) == {
        "type": CALL_TOOL,
        "tool_name": "look",
        "arguments": {},
    }
    # only the called tool's arguments are needed (and checked)
    contains = codec.contains_action
    assert contains is not None
    assert contains(move)
    assert contains({"tool": 2})
    assert not contains({"tool": 0})
    assert not contains({"tool": 1, "arguments": {"move": {"direction": 2, "steps": 1}}})
    assert not contains({"tool": 3})
    assert not contains("move")
    for _ in range(20):
        sample = space.sample()
        assert contains(sample)
        sent = codec.encode_action(sample)
        assert sent["tool_name"] == ["echo", "move", "look"][int(sample["tool"])]


def test_one_tool_is_its_arguments() -> None:
    echo = codec_from_schema(tool_schema(TOOL_LIST), tool="echo")
    assert isinstance(echo.action_space, spaces.Text)
    assert echo.encode_action("hi") == {
        "type": CALL_TOOL,
        "tool_name": "echo",
        "arguments": {"message": "hi"},
    }
    assert echo.tool_actions is not None
    assert echo.tool_actions.single
    move = codec_from_schema(tool_schema(TOOL_LIST), tool="move")
    assert set(move.action_space.keys()) == {"direction", "steps"}
    assert move.encode_action({"direction": 0, "steps": 2})["arguments"] == {
        "direction": "left",
        "steps": 2,
    }
    look = codec_from_schema(tool_schema(TOOL_LIST), tool="look")
    assert look.action_space == spaces.Discrete(1)
    assert look.encode_action(0)["arguments"] == {}
    refined = codec_from_schema(
        tool_schema(TOOL_LIST), tool="move", action_fields={"loud": spaces.Discrete(2)}
    )
    assert set(refined.action_space.keys()) == {"direction", "steps", "loud"}
    with pytest.raises(ConfigurationError, match="no such tool"):
        codec_from_schema(tool_schema(TOOL_LIST), tool="jump")
    with pytest.raises(ConfigurationError, match="not OpenEnv's CallToolAction"):
        codec_from_schema({"action": Action.model_json_schema(), "observation": {}}, tool="x")


def test_action_fields_name_tools() -> None:
    body = tool_schema(TOOL_LIST)
    codec = codec_from_schema(
        body,
        action_fields={"echo": None, "move": spaces.Dict({"steps": spaces.Discrete(2, start=1)})},
    )
    assert codec.action_space["tool"] == spaces.Discrete(2)  # move, look
    assert codec.action_space["arguments"]["move"]["steps"] == spaces.Discrete(2, start=1)
    assert codec.encode_action({"tool": 1})["tool_name"] == "look"
    with pytest.raises(ConfigurationError, match="not tools of the server"):
        codec_from_schema(body, action_fields={"jump": None})
    with pytest.raises(ConfigurationError, match="must be a Dict"):
        codec_from_schema(body, action_fields={"move": spaces.Discrete(3)})
    with pytest.raises(ConfigurationError, match="no tool of the server fits"):
        codec_from_schema(body, action_fields={"echo": None, "move": None, "look": None})


def test_a_tool_no_space_fits_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    odd = {"name": "run", "input_schema": {"properties": {"code": {}}, "required": ["code"]}}
    with caplog.at_level(logging.WARNING, logger="openenv_gym.spaces"):
        codec = codec_from_schema(tool_schema([*TOOL_LIST, odd]))
    assert "tool 'run' left out" in caplog.text
    assert codec.action_space["tool"] == spaces.Discrete(3)
    with pytest.raises(ConfigurationError, match=r"no tool of the server fits.*'code'"):
        codec_from_schema(tool_schema([odd]))  # the only tool: nothing to act with
    with pytest.raises(ConfigurationError, match=r"action_fields=\{'code': <space>\}"):
        codec_from_schema(tool_schema([odd]), tool="run")
    chosen = codec_from_schema(
        tool_schema([odd]), action_fields={"run": spaces.Dict({"code": spaces.Text(100)})}
    )
    assert chosen.encode_action({"tool": 0, "arguments": {"run": {"code": "1+1"}}})[
        "arguments"
    ] == {"code": "1+1"}
    with pytest.raises(RemoteProtocolError, match="twice"):
        codec_from_schema(tool_schema([TOOL_LIST[0], TOOL_LIST[0]]))


RESULT = {
    "content": [{"type": "text", "text": "hi", "annotations": None, "meta": None}],
    "structured_content": {"result": "hi"},
    "meta": None,
    "data": "hi",
    "is_error": False,
}


def test_the_observation_is_the_result_as_text() -> None:
    codec = codec_from_schema(tool_schema(TOOL_LIST))
    space = codec.observation_space
    assert set(space.keys()) == {"tool_name", "text", "is_error"}
    assert space["text"].max_length == TOOL_TEXT_MAX
    assert codec.observed == frozenset({"tool_name"})  # result and error go to info
    obs = codec.decode_observation({"tool_name": "echo", "result": RESULT, "error": None})
    assert obs == {"tool_name": "echo", "text": "hi", "is_error": 0}
    assert space.contains(obs)
    failed = {
        "tool_name": "nope",
        "result": None,
        "error": {"error_type": "tool_not_found", "message": "Unknown tool: 'nope'"},
    }
    assert codec.decode_observation(failed)["text"] == "Unknown tool: 'nope'"
    assert codec.decode_observation(failed)["is_error"] == 1
    reset = codec.decode_observation({"metadata": {"status": "ready"}})
    assert reset == {"tool_name": "", "text": '{"status":"ready"}', "is_error": 0}
    assert codec.decode_observation({})["text"] == ""  # openenv-core 0.3: no metadata
    assert codec.render({"tool_name": "echo", "result": RESULT}) == "echo: hi"
    assert codec.render(failed) == "nope: error: Unknown tool: 'nope'"
    extra = codec_from_schema(tool_schema(TOOL_LIST, StepsObservation))
    assert set(extra.observation_space.keys()) == {"tool_name", "steps_left", "text", "is_error"}
    assert extra.decode_observation({"tool_name": "x", "steps_left": 4})["steps_left"] == 4


@pytest.mark.parametrize(
    ("observation", "text", "failed"),
    [
        ({"tool_name": "t", "result": RESULT}, "hi", False),
        (
            {
                "tool_name": "t",
                "result": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]},
            },
            "a\nb",
            False,
        ),
        (
            {"tool_name": "t", "result": {"content": [], "structured_content": {"n": 1}}},
            '{"n":1}',
            False,
        ),
        ({"tool_name": "t", "result": {"content": [], "data": [1, 2]}}, "[1,2]", False),
        ({"tool_name": "t", "result": {"content": []}}, "", False),
        (
            {"tool_name": "t", "result": {"isError": True, "content": [{"text": "boom"}]}},
            "boom",
            True,
        ),
        ({"tool_name": "t", "result": {"value": 3}}, '{"value":3}', False),
        ({"tool_name": "t", "result": "plain"}, "plain", False),
        ({"tool_name": "t", "result": 7}, "7", False),
        ({"tool_name": "t", "error": "down"}, "down", True),
        ({"tool_name": "t", "error": {"error_type": "timeout"}}, '{"error_type":"timeout"}', True),
        ({"tool_name": "t"}, "", False),
        ({"metadata": {}}, "", False),
    ],
)
def test_tool_result_text(observation: dict[str, Any], text: str, failed: bool) -> None:
    assert tool_result_text(observation) == (text, failed)


def test_tool_codec_observation_fields_that_clash_are_refused() -> None:
    class Clash(CallToolObservation):
        text: str = ""

    with pytest.raises(ConfigurationError, match="fills itself"):
        codec_from_schema(tool_schema(TOOL_LIST, Clash))
    moved = codec_from_schema(tool_schema(TOOL_LIST, Clash), observation_fields={"text": None})
    assert set(moved.observation_space.keys()) == {"tool_name", "text", "is_error"}


def test_schema_node_resolves_refs_and_optionals() -> None:
    class Colour(str, enum.Enum):  # noqa: UP042 - a pydantic Enum field: a $ref
        RED = "red"

    class Model(BaseModel):
        colour: Colour = Field(description="Which colour.")
        maybe: int | None = None

    root = Model.model_json_schema()
    props = root["properties"]
    colour = schema_node(root, props["colour"])
    assert colour["enum"] == ["red"]
    assert colour["description"] == "Which colour."
    assert schema_node(root, props["maybe"])["type"] == "integer"
    assert schema_node(root, {"$ref": "#/$defs/Missing"}) == {}
    assert schema_node(root, "nope") == {}


# ------------------------------------------------------------------ openenv/Echo-v0


def test_echo_codec_speaks_the_legacy_echo_by_default() -> None:
    codec = codec_for("echo")
    assert codec.encode_action("hi") == {"message": "hi"}
    assert codec.encode_actions is not None
    assert codec.encode_actions(["a", "b"]) == {"message": ["a", "b"]}
    assert codec.decode_observation({"echoed_message": "hi", "message_length": 2}) == "hi"
    # learnt from that first reply: a legacy reply without the field is an error after it
    with pytest.raises(RemoteProtocolError, match="echoed_message"):
        codec.decode_observation({"message_length": 2})


def test_echo_codec_learns_the_mcp_echo_from_its_first_reply() -> None:
    codec = codec_for("echo")
    greeting = {"metadata": {"status": "ready", "message": "Echo environment ready!"}}
    assert codec.decode_observation(greeting) == "Echo environment ready!"
    assert codec.encode_action("hi") == {
        "type": CALL_TOOL,
        "tool_name": "echo_message",
        "arguments": {"message": "hi"},
    }
    assert codec.encode_actions is not None
    assert codec.encode_actions(["hi"]) is None  # encoded one by one
    assert codec.decode_observation({"tool_name": "echo_message", "result": RESULT}) == "hi"
    assert codec.decode_observation({}) == ""  # openenv-core 0.3 drops the reset metadata
    assert codec.decode_columns is not None
    assert codec.decode_columns({"echoed_message": ["x"]}, frozenset(), 1) is None


def test_echo_codec_is_told_by_the_schema() -> None:
    mcp = codec_for("echo")
    assert mcp.bind_schema is not None
    mcp.bind_schema(tool_schema())
    assert mcp.encode_action("hi")["tool_name"] == "echo_message"
    legacy = codec_for("echo")
    assert legacy.bind_schema is not None
    legacy.bind_schema({"action": {"properties": {"message": {"type": "string"}}}})
    with pytest.raises(RemoteProtocolError):
        legacy.decode_observation({})  # told: legacy, so an empty reply is wrong
    assert legacy.decode_columns is not None
    assert legacy.decode_columns({"echoed_message": ["a", "b"]}, frozenset(), 2) == ["a", "b"]


def test_echo_codec_spaces_do_not_depend_on_the_server() -> None:
    mcp, legacy = codec_for("echo"), codec_for("echo")
    assert mcp.bind_schema is not None
    mcp.bind_schema(tool_schema())
    assert mcp.action_space == legacy.action_space
    assert mcp.observation_space == legacy.observation_space
    long = "x" * 5000
    text = mcp.decode_observation({"tool_name": "echo_message", "result": {"data": long}})
    assert len(text) == 4096
    assert np.asarray(mcp.observation_space.contains(text))
