"""codec_from_schema: JSON schema (an OpenEnv server's ``GET /schema``) -> Gymnasium spaces.

Pure: schemas of real Pydantic models (our servers' and hand-written ones) and of hand-written
JSON; no server, no socket. ``docs/spaces.md`` is the mapping table these tests pin down.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import data_equivalence
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from openenv_gym import ConfigurationError
from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.replies import reply_info
from openenv_gym.runtime.environment import Action, Observation
from openenv_gym.spaces import (
    DEFAULT_TEXT_LENGTH,
    GENERIC,
    TEXT_CHARSET,
    Codec,
    codec_for,
    codec_from_schema,
)
from openenv_gym_servers.catch import CatchEnvironment
from openenv_gym_servers.catch.models import CatchAction, CatchObservation
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation
from openenv_gym_servers.wordle import WordleEnvironment
from openenv_gym_servers.wordle.models import WordleAction, WordleObservation

SEEDS = st.integers(0, 2**32 - 1)

# Box.sample gives numpy scalars for shape (), which Box.contains accepts with this warning
SCALAR_SAMPLES = pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")


def schema_of(action: type[BaseModel], observation: type[BaseModel]) -> dict[str, Any]:
    """A ``/schema`` body, exactly as the server builds it."""
    return {
        "action": action.model_json_schema(),
        "observation": observation.model_json_schema(),
        "state": {},
    }


def wire(observation: BaseModel) -> dict[str, Any]:
    """An observation as OpenEnv sends it: its fields, less done / reward / metadata."""
    return observation.model_dump(mode="json", exclude={"done", "reward", "metadata"})


def arrays(value: Any) -> Any:
    """``value`` with numpy scalars as 0-d arrays (Box.sample gives the one, decoding the other)."""
    if isinstance(value, dict):
        return {k: arrays(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(arrays(v) for v in value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def sample_action(codec: Codec, seed: int) -> Any:
    codec.action_space.seed(seed)
    return codec.action_space.sample()


# ------------------------------------------------------------------ models of the tests


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float
    label: str = Field(max_length=8)


class Rich(Action):
    """Every construct of the mapping table, all required (the action holds them all)."""

    count: int
    level: int = Field(ge=1, le=5)
    positive: int = Field(gt=0)
    ratio: float = Field(ge=0.0, le=1.0)
    temperature: float
    flag: bool
    name: str = Field(min_length=1, max_length=16)
    side: Literal["left", "right"]
    color: Color
    sparse: Literal[1, 5, 10]
    vector: list[float] = Field(min_length=3, max_length=3)
    pair: tuple[int, int]
    grid: list[list[int]] = Field(min_length=2, max_length=2)
    words: list[str]
    mixed: tuple[int, str]
    inner: Inner
    inners: list[Inner]
    maybe: int | None
    maybe_inner: Inner | None
    number: int | float


class RichObservation(Observation):
    count: int
    level: int = Field(ge=1, le=5)
    flag: bool
    side: Literal["left", "right"]
    vector: list[float] = Field(min_length=3, max_length=3)
    words: list[str]
    inner: Inner
    maybe: int | None = None
    fallback: int = 7
    extra: dict[str, Any] = Field(default_factory=dict)
    anything: Any = None
    union: int | str = 0


class Tree(BaseModel):
    value: int
    children: list[Tree] = Field(default_factory=list)


class TreeObservation(Observation):
    tree: Tree
    size: int


class Fixed(BaseModel):
    """Every field required and JSON-exact: the action and the observation coincide."""

    model_config = ConfigDict(extra="forbid")
    count: int
    level: int = Field(ge=-2, le=2)
    ratio: float = Field(ge=-1.0, le=1.0)
    flag: bool
    name: str = Field(max_length=12)
    side: Literal["left", "right"]
    color: Color
    sparse: Literal[1, 5, 10]
    vector: list[float] = Field(min_length=3, max_length=3)
    pair: tuple[int, int]
    words: list[str]
    mixed: tuple[int, str]
    inner: Inner
    inners: list[Inner]
    maybe: int | None


# ------------------------------------------------------------------ our servers' models


def test_echo_schema() -> None:
    codec = codec_from_schema(schema_of(EchoAction, EchoObservation))
    assert codec.name == GENERIC
    assert isinstance(codec.action_space, spaces.Text)
    assert codec.action_space.max_length == DEFAULT_TEXT_LENGTH
    assert codec.encode_action("hi") == {"message": "hi"}
    space = codec.observation_space
    assert isinstance(space, spaces.Dict)
    assert set(space.keys()) == {"echoed_message", "message_length"}
    assert isinstance(space["message_length"], spaces.Box)
    assert space["message_length"].dtype == np.int64
    assert space["message_length"].shape == ()
    assert codec.observed == {"echoed_message", "message_length"}
    env = EchoEnvironment()
    for observation in (env.reset(), env.step(EchoAction(message="Hello"))):
        obs = codec.decode_observation(wire(observation))
        assert space.contains(obs)
        assert obs["echoed_message"] == observation.echoed_message
        assert obs["message_length"] == observation.message_length


def test_catch_schema_uses_required_fields_only() -> None:
    codec = codec_from_schema(schema_of(CatchAction, CatchObservation))
    # game_name / game_params have defaults: left to the server
    space = codec.action_space
    assert isinstance(space, spaces.Box)
    assert (space.shape, space.dtype) == ((), np.int64)
    payload = codec.encode_action(np.int64(2))
    assert payload == {"action_id": 2}
    assert type(payload["action_id"]) is int
    CatchAction.model_validate(payload)
    obs_space = codec.observation_space
    assert set(obs_space.keys()) == {
        "info_state",
        "legal_actions",
        "game_phase",
        "current_player_id",
        "opponent_last_action",
    }
    assert isinstance(obs_space["info_state"], spaces.Sequence)
    env = CatchEnvironment()
    observation = env.reset(seed=3)
    obs = codec.decode_observation(wire(observation))
    assert obs_space.contains(obs)
    assert np.array_equal(np.array(obs["info_state"]), np.array(observation.info_state))
    assert obs["opponent_last_action"] == 0  # null reads as the space's zero


def test_catch_schema_with_chosen_spaces() -> None:
    codec = codec_from_schema(
        schema_of(CatchAction, CatchObservation),
        action_fields={"action_id": spaces.Discrete(3)},
        observation_fields={
            "info_state": spaces.Box(0.0, 1.0, (50,), np.float32),
            "opponent_last_action": None,
        },
    )
    assert codec.action_space == spaces.Discrete(3)
    assert codec.encode_action(np.int64(1)) == {"action_id": 1}
    assert "opponent_last_action" not in codec.observation_space
    assert "opponent_last_action" not in codec.observed
    env = CatchEnvironment()
    obs = codec.decode_observation(wire(env.reset(seed=1)))
    assert obs["info_state"].dtype == np.float32
    assert obs["info_state"].shape == (50,)
    assert codec.observation_space.contains(obs)


def test_catch_schema_can_add_a_defaulted_action_field() -> None:
    text = spaces.Text(16, charset=TEXT_CHARSET)
    codec = codec_from_schema(
        schema_of(CatchAction, CatchObservation),
        action_fields={"action_id": spaces.Discrete(3), "game_name": text},
    )
    assert isinstance(codec.action_space, spaces.Dict)
    payload = codec.encode_action({"action_id": np.int64(0), "game_name": "catch"})
    assert payload == {"action_id": 0, "game_name": "catch"}
    CatchAction.model_validate(payload)


def test_wordle_schema() -> None:
    codec = codec_from_schema(schema_of(WordleAction, WordleObservation))
    assert isinstance(codec.action_space, spaces.Text)
    assert codec.encode_action("[crane]") == {"message": "[crane]"}
    space = codec.observation_space
    # info: dict[str, Any] fits no space: it stays in the Gymnasium info
    assert set(space.keys()) == {"prompt", "messages", "current_player_id", "legal_players"}
    messages = space["messages"]
    assert isinstance(messages, spaces.Sequence)
    assert isinstance(messages.feature_space, spaces.Dict)
    assert set(messages.feature_space.keys()) == {"sender_id", "content", "category"}
    env = WordleEnvironment()
    reset = env.reset(seed=0)
    step = env.step(WordleAction(message="[crane]"))
    for observation in (reset, step):
        raw = wire(observation)
        obs = codec.decode_observation(raw)
        assert space.contains(obs)
        reply = ObservationReceived(raw, 0.0, False, None)
        info = reply_info(reply, codec.observed)
        assert set(info) == set(raw) - codec.observed
        assert "info" in info
        assert "prompt" not in info
    text = codec.render(wire(step))
    assert text.startswith("prompt: ")
    assert "messages: [" in text


@pytest.mark.parametrize(
    ("action", "observation"),
    [
        (EchoAction, EchoObservation),
        (WordleAction, WordleObservation),
        (CatchAction, CatchObservation),
        (Rich, RichObservation),
    ],
)
@SCALAR_SAMPLES
@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_sampled_actions_validate(
    action: type[BaseModel], observation: type[BaseModel], seed: int
) -> None:
    codec = codec_from_schema(schema_of(action, observation))
    sample = sample_action(codec, seed)
    assert codec.action_space.contains(sample)
    payload = codec.encode_action(sample)
    assert "metadata" not in payload
    action.model_validate(payload)


# ------------------------------------------------------------------ the mapping table


def test_rich_action_spaces() -> None:
    codec = codec_from_schema(schema_of(Rich, RichObservation))
    space = codec.action_space
    assert isinstance(space, spaces.Dict)
    assert "metadata" not in space
    int_box = spaces.Box(-np.inf, np.inf, (), np.int64)
    assert space["count"] == int_box
    assert space["level"] == spaces.Discrete(5, start=1)
    positive = space["positive"]
    assert isinstance(positive, spaces.Box)
    assert positive.low == 1
    assert not positive.bounded_above
    assert space["ratio"] == spaces.Box(0.0, 1.0, (), np.float64)
    assert space["temperature"] == spaces.Box(-np.inf, np.inf, (), np.float64)
    assert space["flag"] == spaces.Discrete(2)
    assert space["name"] == spaces.Text(16, min_length=1, charset=TEXT_CHARSET)
    assert space["side"] == spaces.Discrete(2)
    assert space["color"] == spaces.Discrete(2)
    assert space["sparse"] == spaces.Discrete(3)
    assert space["vector"] == spaces.Box(-np.inf, np.inf, (3,), np.float64)
    assert space["pair"] == spaces.Box(-np.inf, np.inf, (2,), np.int64)
    grid = space["grid"]  # two rows of any length
    assert isinstance(grid, spaces.Tuple)
    assert len(grid) == 2
    assert all(isinstance(row, spaces.Sequence) for row in grid)
    assert isinstance(space["words"], spaces.Sequence)
    assert isinstance(space["words"].feature_space, spaces.Text)
    assert isinstance(space["mixed"], spaces.Tuple)
    assert isinstance(space["inner"], spaces.Dict)
    assert set(space["inner"].keys()) == {"x", "label"}
    assert space["inner"]["label"].max_length == 8
    assert isinstance(space["inners"], spaces.Sequence)
    assert space["maybe"] == int_box
    assert isinstance(space["maybe_inner"], spaces.Dict)
    assert space["number"] == spaces.Box(-np.inf, np.inf, (), np.float64)


def test_fixed_length_arrays_are_boxes_or_tuples() -> None:
    schema = {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "array"}}
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "observation": {
                "type": "object",
                "properties": {
                    "grid": {**schema, "items": {"type": "array", "items": {"type": "integer"}}},
                    "board": {
                        **schema,
                        "items": {
                            "type": "array",
                            "minItems": 3,
                            "maxItems": 3,
                            "items": {"type": "integer", "minimum": 0, "maximum": 2},
                        },
                    },
                },
            },
        }
    )
    space = codec.observation_space
    assert isinstance(space["grid"], spaces.Tuple)
    assert space["board"] == spaces.Box(0, 2, (2, 3), np.int64)
    obs = codec.decode_observation({"grid": [[1], [2, 3]], "board": [[0, 1, 2], [2, 1, 0]]})
    assert space.contains(obs)
    assert obs["board"].tolist() == [[0, 1, 2], [2, 1, 0]]


def test_enum_values_map_to_discrete() -> None:
    codec = codec_from_schema(schema_of(Rich, RichObservation))
    codec.action_space.seed(0)
    sample = codec.action_space.sample()
    payload = codec.encode_action({**sample, "side": 1, "color": 1, "sparse": 1})
    assert (payload["side"], payload["color"], payload["sparse"]) == ("right", "green", 5)
    Rich.model_validate(payload)


def test_consecutive_integer_enum_is_the_value_itself() -> None:
    codec = codec_from_schema(
        {
            "action": {
                "type": "object",
                "properties": {"move": {"enum": [4, 2, 3]}},
                "required": ["move"],
            },
            "observation": {"type": "object", "properties": {"pos": {"enum": [-1, 0, 1]}}},
        }
    )
    assert codec.action_space == spaces.Discrete(3, start=2)
    assert codec.encode_action(3) == {"move": 3}
    assert codec.observation_space["pos"] == spaces.Discrete(3, start=-1)
    assert codec.decode_observation({"pos": -1})["pos"] == -1


def test_sparse_and_string_enums_are_indices() -> None:
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"k": {"enum": [10, 1, 5]}}},
            "observation": {
                "type": "object",
                "properties": {"s": {"type": "string", "enum": ["b", "a"]}, "c": {"const": "x"}},
            },
        }
    )
    assert codec.action_space == spaces.Discrete(3)
    assert [codec.encode_action(i)["k"] for i in range(3)] == [1, 5, 10]
    obs = codec.decode_observation({"s": "a", "c": "x"})
    assert obs == {"s": 1, "c": 0}  # schema order for strings
    with pytest.raises(RemoteProtocolError):
        codec.decode_observation({"s": "z", "c": "x"})


def test_boolean_is_discrete_two() -> None:
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"on": {"type": "boolean"}}},
            "observation": {"type": "object", "properties": {"lit": {"type": "boolean"}}},
        }
    )
    assert codec.action_space == spaces.Discrete(2)
    assert codec.encode_action(np.int64(1)) == {"on": True}
    assert codec.encode_action(0) == {"on": False}
    assert codec.decode_observation({"lit": True}) == {"lit": 1}


def test_integer_bounds_exclusive_and_one_sided() -> None:
    codec = codec_from_schema(
        {
            "action": {
                "type": "object",
                "properties": {"a": {"type": "integer", "exclusiveMinimum": 0, "maximum": 3}},
            },
            "observation": {
                "type": "object",
                "properties": {
                    "low": {"type": "integer", "minimum": 0},
                    "ratio": {"type": "number", "exclusiveMaximum": 1.0, "minimum": 0},
                    "empty": {"type": "integer", "minimum": 3, "maximum": 2},
                },
            },
        }
    )
    assert codec.action_space == spaces.Discrete(3, start=1)
    low = codec.observation_space["low"]
    assert isinstance(low, spaces.Box)
    assert low.low == 0
    assert low.bounded_below
    assert not low.bounded_above
    ratio = codec.observation_space["ratio"]
    assert ratio.high < 1.0
    assert "empty" not in codec.observation_space  # no integer fits: to info


def test_nulls_and_missing_fields_read_as_default_or_zero() -> None:
    codec = codec_from_schema(schema_of(Rich, RichObservation))
    raw = {
        "count": 3,
        "level": 2,
        "flag": False,
        "side": "left",
        "vector": [1.0, 2.0, 3.0],
        "words": ["a", None],
        "inner": {"x": 1.5, "label": "hi"},
        "maybe": None,
        # fallback missing: its default, 7
        "extra": {"a": 1},
        "union": "text",
    }
    obs = codec.decode_observation(raw)
    assert codec.observation_space.contains(obs)
    assert obs["maybe"] == 0
    assert obs["fallback"] == 7
    assert obs["words"] == ("a", "")
    assert set(codec.observation_space.keys()) == {
        "count",
        "level",
        "flag",
        "side",
        "vector",
        "words",
        "inner",
        "maybe",
        "fallback",
    }
    info = reply_info(ObservationReceived(raw, None, False, None), codec.observed)
    assert set(info) == {"extra", "union"}


def test_recursive_and_free_form_models_go_to_info() -> None:
    codec = codec_from_schema(schema_of(EchoAction, TreeObservation))
    assert set(codec.observation_space.keys()) == {"size"}
    assert codec.observed == {"size"}


def test_nested_object_with_an_unmappable_field_goes_to_info_whole() -> None:
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "observation": {
                "type": "object",
                "properties": {
                    "part": {
                        "type": "object",
                        "properties": {"x": {"type": "number"}, "free": {"type": "object"}},
                    },
                    "ok": {
                        "type": "object",
                        "properties": {"x": {"type": "number"}},
                        "additionalProperties": False,
                    },
                },
            },
        }
    )
    assert set(codec.observation_space.keys()) == {"ok"}


def test_refs_resolve_in_defs_and_definitions() -> None:
    inner = {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 1}}}
    for key in ("$defs", "definitions"):
        codec = codec_from_schema(
            {
                "action": {
                    key: {"In": inner, "Alias": {"$ref": f"#/{key}/In"}},
                    "type": "object",
                    "properties": {"a": {"allOf": [{"$ref": f"#/{key}/Alias"}], "default": None}},
                },
                "observation": {
                    key: {"In": inner},
                    "type": "object",
                    "properties": {
                        "o": {"anyOf": [{"$ref": f"#/{key}/In"}, {"type": "null"}]},
                        "dangling": {"$ref": f"#/{key}/Missing"},
                        "remote": {"$ref": "https://example.com/schema.json"},
                    },
                },
            }
        )
        assert codec.action_space == spaces.Dict({"v": spaces.Discrete(2)})
        assert codec.encode_action({"v": np.int64(1)}) == {"a": {"v": 1}}
        assert set(codec.observation_space.keys()) == {"o"}
        assert codec.decode_observation({"o": None}) == {"o": {"v": 0}}


def test_type_lists_and_unions() -> None:
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
            "observation": {
                "type": "object",
                "properties": {
                    "n": {"type": ["integer", "number"]},
                    "r": {"anyOf": [{"type": "boolean"}, {"type": "integer"}, {"type": "null"}]},
                    "s": {"type": ["string", "integer"]},
                    "o": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    "nothing": {"type": "null"},
                },
            },
        }
    )
    assert isinstance(codec.action_space, spaces.Text)
    assert set(codec.observation_space.keys()) == {"n", "r"}
    obs = codec.decode_observation({"n": 2, "r": True})
    assert obs["n"] == 2.0
    assert obs["r"] == 1.0


def test_text_is_cleaned_and_cut_to_its_length() -> None:
    codec = codec_from_schema(
        {
            "action": {"type": "object", "properties": {"a": {"type": "string"}}},
            "observation": {
                "type": "object",
                "properties": {"t": {"type": "string", "maxLength": 5}},
            },
        }
    )
    assert codec.decode_observation({"t": "h\u00e9llo world"}) == {"t": "h?llo"}
    with pytest.raises(RemoteProtocolError):
        codec.decode_observation({"t": 3})


def test_bad_wire_values_raise_our_protocol_error() -> None:
    codec = codec_from_schema(schema_of(Rich, RichObservation))
    good = {
        "count": 3,
        "level": 2,
        "flag": False,
        "side": "left",
        "vector": [1.0, 2.0, 3.0],
        "words": [],
        "inner": {"x": 1.5, "label": "hi"},
    }
    codec.decode_observation(good)
    for key, value in [
        ("count", "three"),
        ("count", 1.5),
        ("flag", "yes"),
        ("vector", [1.0, 2.0]),
        ("vector", ["a", "b", "c"]),
        ("words", "abc"),
        ("inner", [1]),
    ]:
        with pytest.raises(RemoteProtocolError):
            codec.decode_observation({**good, key: value})
    with pytest.raises(RemoteProtocolError):
        codec.decode_observation(["not", "a", "dict"])  # type: ignore[arg-type]


# ------------------------------------------------------------------ round trips


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS)
def test_round_trip_action_wire_observation(seed: int) -> None:
    """sample -> encode -> Pydantic validates -> JSON -> decode gives the sample back."""
    schema = Fixed.model_json_schema()
    codec = codec_from_schema({"action": schema, "observation": schema})
    assert codec.action_space == codec.observation_space
    sample = sample_action(codec, seed)
    model = Fixed.model_validate(codec.encode_action(sample))
    back = codec.decode_observation(model.model_dump(mode="json"))
    assert codec.observation_space.contains(back)
    assert data_equivalence(arrays(sample), arrays(back), exact=False)


@SCALAR_SAMPLES
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS)
def test_observation_spaces_contain_their_samples(seed: int) -> None:
    codec = codec_from_schema(schema_of(Rich, RichObservation))
    codec.observation_space.seed(seed)
    sample = codec.observation_space.sample()
    assert codec.observation_space.contains(sample)


# ------------------------------------------------------------------ errors and overrides


def test_action_needs_a_mappable_required_field() -> None:
    class Free(Action):
        payload: dict[str, Any]

    with pytest.raises(ConfigurationError, match=r"action_fields=.*codec="):
        codec_from_schema(schema_of(Free, EchoObservation))
    codec = codec_from_schema(
        schema_of(Free, EchoObservation),
        action_fields={"payload": spaces.Dict({"k": spaces.Discrete(2)})},
    )
    assert codec.encode_action({"k": np.int64(1)}) == {"payload": {"k": 1}}


def test_action_with_only_metadata_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="no field to act with"):
        codec_from_schema(schema_of(Action, EchoObservation))


def test_action_without_required_fields_offers_them_all() -> None:
    class Knobs(Action):
        speed: float = 1.0
        note: str = ""
        extra: dict[str, Any] = Field(default_factory=dict)

    codec = codec_from_schema(schema_of(Knobs, EchoObservation))
    assert set(codec.action_space.keys()) == {"speed", "note"}


def test_field_choices_are_checked() -> None:
    schema = schema_of(CatchAction, CatchObservation)
    with pytest.raises(ConfigurationError, match="not fields of the server's action"):
        codec_from_schema(schema, action_fields={"nope": spaces.Discrete(2)})
    with pytest.raises(ConfigurationError, match="not fields of the server's observation"):
        codec_from_schema(schema, observation_fields={"done": None})
    with pytest.raises(ConfigurationError, match="required by the server"):
        codec_from_schema(schema, action_fields={"action_id": None})
    with pytest.raises(ConfigurationError, match="not a space we can convert"):
        codec_from_schema(
            schema, action_fields={"action_id": spaces.Graph(spaces.Discrete(2), None)}
        )
    codec = codec_from_schema(schema, action_fields={"game_params": None})
    assert isinstance(codec.action_space, spaces.Box)


@pytest.mark.parametrize("bad", [None, [], {}, {"action": {}}, {"action": [], "observation": {}}])
def test_bad_schema_documents(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="/schema body"):
        codec_from_schema(bad)


def test_render_is_one_line_per_observed_field() -> None:
    codec = codec_from_schema(schema_of(EchoAction, EchoObservation))
    text = codec.render({"echoed_message": "hi", "message_length": 2, "metadata": {}})
    assert text == "echoed_message: hi\nmessage_length: 2"


def test_known_codecs_keep_their_info_fields() -> None:
    assert codec_for("catch").observed == {"info_state"}
    assert codec_for("wordle").observed == frozenset()
    assert codec_for("echo").observed == frozenset()
    reply = ObservationReceived({"info_state": [0.0], "legal_actions": [0]}, 0.0, False, None)
    assert reply_info(reply, "info_state") == reply_info(reply, frozenset({"info_state"}))
