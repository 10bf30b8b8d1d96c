"""openenv_gym.integrations.text: tools, text actions and observation text of an env."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, Literal

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import SyncVectorEnv

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.integrations.text import (
    RESERVED_NAMES,
    Param,
    TextInterface,
    interface_from_space,
    observation_to_text,
    text_interface,
)

ECHO_SERVER = "openenv_gym_servers.echo.environment:EchoEnvironment"


def builtin(name: str) -> TextInterface:
    """The interface text_interface picks for an env whose codec is the built-in ``name``."""
    return text_interface(SimpleNamespace(codec=SimpleNamespace(name=name)))


def tool_schema(interface: TextInterface) -> dict[str, Any]:
    """The JSON schema transformers builds from a function with the interface's signature."""
    utils = pytest.importorskip("transformers.utils")

    def f(*args: Any, **kwargs: Any) -> str:
        return ""

    f.__signature__ = interface.signature()  # type: ignore[attr-defined]
    f.__annotations__ = {p.name: p.annotation for p in interface.params} | {"return": str}
    f.__doc__ = interface.docstring()
    f.__name__ = f.__qualname__ = interface.tool_name
    schema: dict[str, Any] = utils.get_json_schema(f)
    return schema


# ------------------------------------------------------------------ built-in interfaces


@pytest.mark.parametrize(
    ("name", "tool", "param", "annotation"),
    [
        ("wordle", "guess", "word", str),
        ("echo", "echo", "message", str),
        ("catch", "move", "direction", Literal["left", "stay", "right"]),
    ],
)
def test_builtin_interfaces(name: str, tool: str, param: str, annotation: Any) -> None:
    interface = builtin(name)
    assert interface.tool_name == tool
    assert [p.name for p in interface.params] == [param]
    assert interface.params[0].annotation == annotation
    assert interface.params[0].default is inspect.Parameter.empty
    assert interface.instructions
    signature = interface.signature()
    assert list(signature.parameters) == ["self", param]
    assert signature.parameters[param].annotation == annotation
    assert signature.return_annotation is str
    doc = interface.docstring()
    assert doc.startswith(interface.description)
    assert f"Args:\n    {param}: {interface.params[0].description}" in doc
    assert doc.endswith(f"Returns:\n    {interface.returns}")


@pytest.mark.parametrize(
    ("name", "tool", "param", "enum"),
    [
        ("wordle", "guess", "word", None),
        ("echo", "echo", "message", None),
        ("catch", "move", "direction", ["left", "stay", "right"]),
    ],
)
def test_builtin_docstrings_make_json_schemas(
    name: str, tool: str, param: str, enum: list[str] | None
) -> None:
    interface = builtin(name)
    function = tool_schema(interface)["function"]
    assert function["name"] == tool
    assert function["description"] == interface.description
    parameters = function["parameters"]
    assert list(parameters["properties"]) == [param]
    prop = parameters["properties"][param]
    assert prop["type"] == "string"
    assert prop["description"] == interface.params[0].description
    assert prop.get("enum") == enum
    assert parameters["required"] == [param]
    assert function["return"] == {"type": "string", "description": interface.returns}


def test_wordle_parse_action() -> None:
    parse = builtin("wordle").parse_action
    assert parse("[crane]") == "[crane]"
    assert parse("I will try [CRANE]") == "[crane]"
    assert parse("[crane]? no: [slate] is better") == "[slate]"  # the last one wins
    assert parse("<think>maybe [house]</think>\n[Crane]") == "[crane]"
    assert parse("<think>[house] or [mouse], unfinished") == "[]"  # all of it was thinking
    assert parse("  Crane \n") == "[crane]"  # a bare word
    # no guess: the text goes to the game as it is (printable, at most 256 characters)
    assert parse("I do not know") == "I do not know"
    assert parse("") == "[]"
    assert parse("café au lait") == "caf? au lait"
    assert parse("no " * 200) == ("no " * 200).strip()[:256]


def test_wordle_to_action_and_text() -> None:
    interface = builtin("wordle")
    assert interface.to_action({"word": "crane"}) == "[crane]"
    assert interface.to_action({"word": " [slate] "}) == "[slate]"
    assert interface.observation_text("You have 5 guesses left.") == "You have 5 guesses left."
    assert interface.observation_text("Wordle-v0") == ""  # the env id says nothing


def test_echo_parse_and_convert() -> None:
    interface = builtin("echo")
    assert interface.parse_action("hello there") == "hello there"
    assert interface.parse_action("<think>what to say</think>  hi ") == "hi"
    for empty in ("", "   ", "<think>only thinking</think>", "<think>cut short"):
        with pytest.raises(InvalidActionError, match="empty"):
            interface.parse_action(empty)
    assert interface.to_action({"message": 42}) == "42"
    assert interface.observation_text("echoed") == "echoed"


def test_catch_parse_and_convert() -> None:
    interface = builtin("catch")
    assert interface.parse_action("left") == 0
    assert interface.parse_action("I stay") == 1
    assert interface.parse_action("LEFT... no, Right!") == 2  # the last one wins
    assert interface.parse_action("<think>left or right?</think> stay") == 1
    for bad in ("", "up", "leftover", "<think>left</think>"):
        with pytest.raises(InvalidActionError, match="no move found"):
            interface.parse_action(bad)
    assert interface.to_action({"direction": " Right "}) == 2
    assert interface.to_action({"direction": "stay"}) == 1
    with pytest.raises(InvalidActionError, match="direction must be one of"):
        interface.to_action({"direction": "up"})


def test_catch_observation_text() -> None:
    board = np.zeros(50, dtype=np.float32)
    board[3] = 1.0  # the ball: row 0, column 3
    board[47] = 1.0  # the paddle: row 9, column 2
    rows = builtin("catch").observation_text(board).split("\n")
    assert rows == ["...#."] + ["....."] * 8 + ["..#.."]


def test_builtin_tool_name_override() -> None:
    stub = SimpleNamespace(codec=SimpleNamespace(name="wordle"))
    renamed = text_interface(stub, tool_name="play_word")
    assert renamed.tool_name == "play_word"
    assert renamed.params == builtin("wordle").params
    assert renamed.parse_action("[crane]") == "[crane]"
    assert text_interface(stub, tool_name="guess") == builtin("wordle")
    with pytest.raises(ConfigurationError, match="tool name"):
        text_interface(stub, tool_name="reset")


# ------------------------------------------------------------------ any action space


def test_interface_from_discrete_with_start() -> None:
    interface = interface_from_space(spaces.Discrete(3, start=-1))
    assert interface.tool_name == "act"
    (param,) = interface.params
    assert (param.name, param.annotation) == ("action", int)
    assert param.description == "An integer from -1 to 1."
    assert interface.parse_action("-1") == -1
    assert interface.parse_action("between 0 and 1 I pick 1") == 1
    assert interface.parse_action("<think>2?</think> 0") == 0
    with pytest.raises(InvalidActionError, match="integer"):
        interface.parse_action("<think>2</think> none")
    assert interface.to_action({"action": 1}) == 1
    assert interface.to_action({"action": "-1"}) == -1
    assert interface.to_action({"action": 1.0}) == 1
    for bad in (1.5, True, None, "one"):
        with pytest.raises(InvalidActionError, match="does not fit"):
            interface.to_action({"action": bad})
    function = tool_schema(interface)["function"]
    assert function["name"] == "act"
    assert function["parameters"]["properties"]["action"]["type"] == "integer"
    assert function["parameters"]["required"] == ["action"]


def test_interface_from_text() -> None:
    interface = interface_from_space(spaces.Text(10))
    (param,) = interface.params
    assert (param.name, param.annotation) == ("action", str)
    assert param.description == "Text of at most 10 characters."
    assert interface.parse_action("<think>hmm</think>abc") == "abc"
    with pytest.raises(InvalidActionError):
        interface.parse_action("  ")
    assert interface.to_action({"action": 12}) == "12"


def test_interface_from_scalar_boxes() -> None:
    floats = interface_from_space(spaces.Box(0.0, 1.0, ()))
    assert floats.params[0].annotation is float
    assert floats.params[0].description == "A number between 0.0 and 1.0."
    action = floats.to_action({"action": 0.25})
    assert isinstance(action, np.ndarray)
    assert (action.shape, action.dtype, float(action)) == ((), np.float32, 0.25)
    assert float(floats.parse_action('{"action": 0.5}')) == 0.5
    with pytest.raises(InvalidActionError):
        floats.to_action({"action": "high"})

    ints = interface_from_space(spaces.Box(0, 5, (), dtype=np.int64))
    assert ints.params[0].annotation is int
    assert tool_schema(ints)["function"]["parameters"]["properties"]["action"]["type"] == (
        "integer"
    )
    assert int(ints.to_action({"action": 3})) == 3


def test_interface_from_vector_box() -> None:
    space = spaces.Box(-1.0, 1.0, (2,))
    interface = interface_from_space(space)
    (param,) = interface.params
    assert param.annotation is list
    assert "shape (2,)" in param.description
    action = interface.to_action({"action": [0.5, -0.25]})
    assert action.dtype == np.float32
    assert action.tolist() == [0.5, -0.25]
    assert space.contains(action)
    assert interface.parse_action('my move: {"action": [0.1, 0.2]}').shape == (2,)
    for bad in ([1, 2, 3], "ab"):
        with pytest.raises(InvalidActionError, match="does not fit"):
            interface.to_action({"action": bad})
    with pytest.raises(InvalidActionError, match="JSON value"):
        interface.parse_action("no json here")
    assert tool_schema(interface)["function"]["parameters"]["properties"]["action"]["type"] == (
        "array"
    )


def test_interface_from_dict() -> None:
    space = spaces.Dict({"b": spaces.Text(5), "a": spaces.Discrete(2)})
    interface = interface_from_space(space)
    assert interface.tool_name == "act"
    assert [(p.name, p.annotation) for p in interface.params] == [("a", int), ("b", str)]
    assert interface.instructions == "Answer with a JSON object with the fields a, b."
    action = interface.to_action({"a": "1", "b": 7})
    assert action == {"a": 1, "b": "7"}
    assert space.contains(action)
    assert interface.parse_action('<think>{"a": 0}</think> {"a": 1, "b": "x"}') == {
        "a": 1,
        "b": "x",
    }
    with pytest.raises(InvalidActionError, match="does not fit"):
        interface.parse_action('{"a": 1.5, "b": "x"}')
    for bad in ("a=1 b=x", "[1, 2]", '{"a": 1,}'):
        with pytest.raises(InvalidActionError, match="JSON object"):
            interface.parse_action(bad)
    parameters = tool_schema(interface)["function"]["parameters"]
    assert parameters["properties"]["a"]["type"] == "integer"
    assert parameters["properties"]["b"]["type"] == "string"
    assert parameters["required"] == ["a", "b"]


@pytest.mark.parametrize(
    "space",
    [
        spaces.Graph(spaces.Box(0.0, 1.0, (1,)), None),
        spaces.Sequence(spaces.Discrete(2)),
        spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))),
        spaces.Dict({"g": spaces.Graph(spaces.Box(0.0, 1.0, (1,)), None)}),
    ],
    ids=["graph", "sequence", "tuple", "dict-of-graph"],
)
def test_unsupported_space(space: spaces.Space[Any]) -> None:
    with pytest.raises(ConfigurationError, match="no tool parameter type fits"):
        interface_from_space(space)


@pytest.mark.parametrize(
    ("title", "tool"),
    [
        ("MoveAction", "move"),
        ("PlayMoveAction", "play_move"),
        ("Move", "move"),
        ("ResetAction", "act"),
        ("GetRewardAction", "act"),
        ("Action", "act"),
        ("My-Action", "act"),
        (None, "act"),
    ],
)
def test_tool_name_from_schema_title(title: str | None, tool: str) -> None:
    schema = {} if title is None else {"title": title}
    assert interface_from_space(spaces.Discrete(3), schema=schema).tool_name == tool
    named = interface_from_space(spaces.Discrete(3), schema=schema, tool_name="push")
    assert named.tool_name == "push"


def test_single_field_from_schema() -> None:
    schema = {
        "title": "MoveAction",
        "properties": {
            "metadata": {"type": "object"},
            "action_id": {
                "type": "integer",
                "enum": [0, 1, 2],
                "description": "0 left,\n   1 stay, 2 right",
            },
            "game_name": {"type": "string", "default": "catch"},
        },
        "required": ["action_id"],
    }
    interface = interface_from_space(spaces.Discrete(3), schema=schema)
    assert interface.tool_name == "move"
    (param,) = interface.params
    assert param.name == "action_id"  # the required field, not "action"
    assert param.annotation == Literal[0, 1, 2]
    assert param.description == "0 left, 1 stay, 2 right"
    assert interface.to_action({"action_id": 2}) == 2
    function = tool_schema(interface)["function"]
    assert function["name"] == "move"
    prop = function["parameters"]["properties"]["action_id"]
    assert prop["type"] == "integer"
    assert prop["enum"] == [0, 1, 2]
    assert function["parameters"]["required"] == ["action_id"]


def test_dict_fields_from_schema() -> None:
    schema = {
        "title": "SayAction",
        "properties": {
            "text": {"type": "string", "description": "What to say."},
            "volume": {"type": "integer", "default": 1},
        },
        "required": ["text"],
    }
    space = spaces.Dict({"text": spaces.Text(20), "volume": spaces.Discrete(3)})
    interface = interface_from_space(space, schema=schema)
    assert interface.tool_name == "say"
    text, volume = interface.params
    assert (text.name, text.description, text.default) == ("text", "What to say.", inspect._empty)
    assert (volume.name, volume.default) == ("volume", 1)
    assert volume.description == "An integer from 0 to 2."  # from the space
    assert interface.to_action({"text": "hi"}) == {"text": "hi", "volume": 1}  # the default
    with pytest.raises(InvalidActionError, match="missing field"):
        interface.to_action({"volume": 2})
    parameters = tool_schema(interface)["function"]["parameters"]
    assert parameters["required"] == ["text"]
    assert set(parameters["properties"]) == {"text", "volume"}


def test_free_form_field_takes_the_schema_type() -> None:
    schema = {"properties": {"options": {"type": "object"}}, "required": ["options"]}
    free = spaces.Graph(spaces.Box(0.0, 1.0, (1,)), None)  # no annotation of its own
    interface = interface_from_space(free, schema=schema)
    assert interface.params[0].name == "options"
    assert interface.params[0].annotation is dict


def test_text_interface_of_plain_gymnasium_envs() -> None:
    env = gymnasium.make("CartPole-v1")
    try:
        interface = text_interface(env)
        assert interface.tool_name == "act"
        assert [(p.name, p.annotation) for p in interface.params] == [("action", int)]
        assert env.action_space.contains(interface.parse_action("push 1"))
    finally:
        env.close()
    envs = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2)
    try:
        interface = text_interface(envs, tool_name="push")
        assert interface.tool_name == "push"
        assert interface.params[0].description == "An integer from 0 to 1."
    finally:
        envs.close()


# ------------------------------------------------------------------ TextInterface itself


def _interface(tool: str = "act", *params: Param) -> TextInterface:
    return TextInterface(tool, "Do it.", params, lambda args: args, lambda text: text)


@pytest.mark.parametrize("tool", [*sorted(RESERVED_NAMES), "not valid", "1st", ""])
def test_bad_tool_names(tool: str) -> None:
    with pytest.raises(ConfigurationError, match="tool name"):
        _interface(tool)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ((Param("x", int, "one"), Param("x", str, "two")), "distinct identifiers"),
        ((Param("not valid", int, "bad"),), "distinct identifiers"),
        ((Param("self", int, "me"),), "'self'"),
    ],
    ids=["duplicate", "not-identifier", "self"],
)
def test_bad_params(params: tuple[Param, ...], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        _interface("act", *params)


def test_docstring_and_signature_with_defaults() -> None:
    interface = _interface(
        "play", Param("word", str, "The word."), Param("times", int, "How often.", 2)
    )
    assert interface.docstring() == (
        "Do it.\n\nArgs:\n    word: The word.\n    times: How often.\n\n"
        "Returns:\n    What the environment shows after the action."
    )
    signature = interface.signature()
    assert str(signature) == "(self, word: str, times: int = 2) -> str"
    assert _interface("noop").docstring() == (
        "Do it.\n\nReturns:\n    What the environment shows after the action."
    )
    parameters = tool_schema(interface)["function"]["parameters"]
    assert parameters["required"] == ["word"]


# ------------------------------------------------------------------ observation text


def test_observation_to_text() -> None:
    assert observation_to_text("plain text") == "plain text"
    assert observation_to_text(np.array([1, 2, 3])) == "[1, 2, 3]"
    assert observation_to_text(np.array([[0.5], [1.5]], dtype=np.float32)) == "[[0.5], [1.5]]"
    assert observation_to_text(np.float32(1.5)) == "1.5"
    assert observation_to_text(7) == "7"
    assert observation_to_text({"board": np.array([0, 1]), "name": "x", "n": np.int64(4)}) == (
        "board: [0, 1]\nname: x\nn: 4"
    )
    assert observation_to_text((np.array([1, 2]), "s", 3)) == '[[1, 2], "s", 3]'
    assert observation_to_text([1.5, "a"]) == '[1.5, "a"]'


# ------------------------------------------------------------------ real servers


@pytest.fixture(scope="module")
def catch_env() -> Iterator[gymnasium.Env[Any, Any]]:
    env = gymnasium.make("openenv/Catch-v0")
    try:
        yield env
    finally:
        env.close()


@pytest.fixture(scope="module")
def generic_echo() -> Iterator[gymnasium.Env[Any, Any]]:
    env = gymnasium.make("openenv/Generic-v0", server=ECHO_SERVER)
    try:
        yield env
    finally:
        env.close()


@pytest.mark.integration
def test_text_interface_of_catch(catch_env: gymnasium.Env[Any, Any]) -> None:
    interface = text_interface(catch_env)
    assert interface == builtin("catch")
    obs, _ = catch_env.reset(seed=3)
    rows = interface.observation_text(obs).split("\n")
    assert len(rows) == 10
    assert rows[0].count("#") == 1  # the ball
    assert rows[-1] == "..#.."  # the paddle starts in the middle
    assert rows[1:-1] == ["....."] * 8
    action = interface.parse_action("<think>left?</think> right")
    assert catch_env.action_space.contains(action)
    obs, *_ = catch_env.step(action)
    assert interface.observation_text(obs).split("\n")[-1] == "...#."
    assert text_interface(catch_env, tool_name="paddle").tool_name == "paddle"


@pytest.mark.integration
def test_text_interface_of_generic_comes_from_schema(
    generic_echo: gymnasium.Env[Any, Any],
) -> None:
    assert generic_echo.unwrapped.codec.name == "generic"
    interface = text_interface(generic_echo)
    assert interface.tool_name == "echo"  # from the schema's title, EchoAction
    (param,) = interface.params
    assert (param.name, param.annotation) == ("message", str)
    assert param.description == "Message to echo back"
    function = tool_schema(interface)["function"]
    assert function["name"] == "echo"
    assert list(function["parameters"]["properties"]) == ["message"]
    assert function["parameters"]["required"] == ["message"]
    generic_echo.reset()
    action = interface.to_action({"message": "hello"})
    assert generic_echo.action_space.contains(action)
    obs, *_ = generic_echo.step(action)
    assert obs["echoed_message"] == "hello"
    assert interface.observation_text(obs) == "echoed_message: hello\nmessage_length: 5"
    assert generic_echo.action_space.contains(interface.parse_action("<think>x</think>hi"))
    assert text_interface(generic_echo, tool_name="say").tool_name == "say"


def test_scalar_box_answers_parse_as_plain_numbers() -> None:
    interface = interface_from_space(spaces.Box(0.0, 1.0, ()))
    assert float(interface.parse_action("0.5")) == 0.5
    assert float(interface.parse_action("I pick 0.25")) == 0.25
    for bad in ('{"value": 0.5}', "{1}", "nothing"):
        with pytest.raises(InvalidActionError):
            interface.parse_action(bad)


def test_defaults_before_required_fields_still_make_a_signature() -> None:
    space = spaces.Dict({"a": spaces.Discrete(5), "b": spaces.Text(5)})
    schema = {
        "title": "PlayAction",
        "properties": {"a": {"type": "integer", "default": 2}, "b": {"type": "string"}},
        "required": ["b"],
    }
    interface = interface_from_space(space, schema=schema)
    assert list(interface.signature().parameters) == ["self", "b", "a"]
    assert tool_schema(interface)["function"]["parameters"]["required"] == ["b"]


def test_enum_fields_map_values_to_the_codecs_actions() -> None:
    from openenv_gym.spaces import codec_from_schema

    schema = {
        "action": {
            "title": "TurnAction",
            "properties": {
                "direction": {"enum": ["left", "stay", "right"]},
                "amount": {"enum": [9, 1, 5]},
            },
            "required": ["direction", "amount"],
        },
        "observation": {"properties": {"board": {"type": "string"}}},
    }
    codec = codec_from_schema(schema)
    interface = interface_from_space(codec.action_space, schema=schema["action"])
    assert interface.tool_name == "turn"
    annotations = {p.name: p.annotation for p in interface.params}
    assert annotations["direction"] == Literal["left", "stay", "right"]
    action = interface.to_action({"direction": "right", "amount": 5})
    # what goes on the wire is what the model asked for
    assert codec.encode_action(action) == {"direction": "right", "amount": 5}
    assert codec.action_space.contains(action)
    with pytest.raises(InvalidActionError, match="one of"):
        interface.to_action({"direction": "up", "amount": 5})


def test_tuples_of_numpy_scalars_become_text() -> None:
    assert observation_to_text((np.int64(1), np.float32(0.5))) == "[1, 0.5]"
    assert observation_to_text({"t": (np.int64(2), "x")}) == 't: [2, "x"]'


def test_reasoning_before_a_closing_think_tag_is_dropped() -> None:
    echo = builtin("echo")
    assert echo.parse_action("I should say hi.</think>\n\nhello") == "hello"
    with pytest.raises(InvalidActionError):
        echo.parse_action("<think>still thinking when cut off")


def test_huge_numbers_are_invalid_actions() -> None:
    interface = interface_from_space(spaces.Dict({"n": spaces.Discrete(3)}))
    with pytest.raises(InvalidActionError):
        interface.parse_action('{"n": 1e999}')


@pytest.mark.parametrize("name", ["env", "done", "reward", "interface", "_act", "trajectory"])
def test_tool_names_of_the_tool_class_state_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        TextInterface(name, "d", (), lambda a: a, str)


def test_title_naming_a_reserved_member_falls_back_to_act() -> None:
    interface = interface_from_space(spaces.Discrete(2), schema={"title": "RewardAction"})
    assert interface.tool_name == "act"


def _to_action(args: dict) -> str:
    return str(args["word"])


def test_an_interface_of_module_level_functions_pickles() -> None:
    import pickle

    interface = TextInterface("say", "Say it.", (Param("word", str, "A word."),), _to_action, str)
    again = pickle.loads(pickle.dumps(interface))
    assert again.to_action({"word": "x"}) == "x"
    assert again.observation_text(np.array([1, 2])) == "[1, 2]"


def test_enum_true_and_one_stay_apart_as_in_the_codec() -> None:
    from openenv_gym.spaces import codec_from_schema

    schema = {
        "action": {"properties": {"v": {"enum": [True, 1, "a"]}}, "required": ["v"]},
        "observation": {"properties": {}},
    }
    codec = codec_from_schema(schema)
    interface = interface_from_space(codec.action_space, schema=schema["action"])
    for value in (True, 1, "a"):
        sent = codec.encode_action(interface.to_action({"v": value}))["v"]
        assert (sent, type(sent)) == (value, type(value))
    assert interface.to_action({"v": True}) != interface.to_action({"v": 1})


def test_a_generic_codec_gives_its_own_schema_no_request_needed() -> None:
    from openenv_gym.spaces import codec_from_schema

    schema = {
        "action": {
            "title": "PushAction",
            "properties": {"force": {"type": "integer", "minimum": 0, "maximum": 3}},
            "required": ["force"],
        },
        "observation": {"properties": {"s": {"type": "string"}}},
    }
    codec = codec_from_schema(schema)
    # no base_url, no server: reading /schema again would fail here
    env = SimpleNamespace(codec=codec, action_space=codec.action_space)
    interface = text_interface(env)
    assert interface.tool_name == "push"
    assert interface.to_action({"force": 2}) == 2


@pytest.mark.parametrize(
    ("name", "tool"), [("wordle", "guess"), ("echo", "echo"), ("catch", "move")]
)
def test_the_builtin_interfaces_are_their_records(name: str, tool: str) -> None:
    from openenv_gym import envs
    from openenv_gym.spaces import codec_for

    codec = codec_for(name)
    env = SimpleNamespace(codec=codec, action_space=codec.action_space)
    interface = text_interface(env)
    record = envs.environment(name)
    assert record is not None
    assert interface == record.make_text_interface()
    assert interface.tool_name == tool
