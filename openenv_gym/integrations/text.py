"""How a language model talks to an environment: tools, text actions, text observations.

A :class:`TextInterface` is everything an LLM integration needs to know about one
environment:

* the **tool** TRL exposes to the model (``guess(word: str)`` for Wordle): its name, typed
  parameters, docstring, and how the tool's arguments become a Gymnasium action;
* how a **plain-text answer** becomes an action (:attr:`TextInterface.parse_action`, used by
  the lockstep rollout and the vLLM loop, where the model answers in text);
* how a **Gymnasium observation** becomes text for the model.

:func:`text_interface` picks one for an environment: a hand-written one for the built-in
envs (Wordle, Echo, Catch), one built from the server's action schema for
``openenv/Generic-v0``, and one built from the action space for any other Gymnasium env
(Text, Discrete, or a Dict of those). Pass your own to override it.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from openenv_gym.env import fetch_schema
from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.spaces import GENERIC, catch_grid, to_printable

__all__ = [
    "RESERVED_NAMES",
    "Param",
    "TextInterface",
    "interface_from_space",
    "observation_to_text",
    "text_interface",
]

RESERVED_NAMES = frozenset(
    {"reset", "get_reward", "reward", "done", "trajectory", "observation", "env", "interface"}
)
"""Never a tool name: TRL's hooks, and the state the TRL tool classes expose."""

_NO_DEFAULT: Any = inspect.Parameter.empty


def _observation_text(obs: Any) -> str:
    # the default of TextInterface.observation_text: module-level, so interfaces pickle
    return observation_to_text(obs)


@dataclass(frozen=True)
class Param:
    """One typed parameter of a tool.

    Attributes:
        name: A Python identifier.
        annotation: ``str``, ``int``, ``float``, ``bool``, ``list``, ``dict`` or a
            ``typing.Literal`` of choices (TRL turns it into the JSON schema the model sees).
        description: One line for the docstring's ``Args:`` section.
        default: The value when the model leaves it out (default: required).
    """

    name: str
    annotation: Any
    description: str
    default: Any = _NO_DEFAULT


@dataclass(frozen=True)
class TextInterface:
    """An environment as a language model sees it.

    Attributes:
        tool_name: Name of the tool (a Python identifier, not ``reset``/``get_reward``).
        description: What the tool does (first lines of its docstring).
        params: The tool's parameters.
        to_action: Tool arguments (by name) -> Gymnasium action.
        parse_action: A model's plain-text answer -> Gymnasium action; raises
            :class:`~openenv_gym.exceptions.InvalidActionError` (its message is shown to
            the model) when the answer holds no action.
        observation_text: Gymnasium observation -> text for the model.
        instructions: How to answer in plain text (for prompts of text loops).
        returns: The ``Returns:`` line of the tool's docstring.
    """

    tool_name: str
    description: str
    params: tuple[Param, ...]
    to_action: Callable[[Mapping[str, Any]], Any]
    parse_action: Callable[[str], Any]
    observation_text: Callable[[Any], str] = field(default=_observation_text)
    instructions: str = ""
    returns: str = "What the environment shows after the action."

    def __post_init__(self) -> None:
        name = self.tool_name
        if not name.isidentifier() or name.startswith("_") or name in RESERVED_NAMES:
            raise ConfigurationError(
                f"tool name {name!r} must be a Python identifier, not private, and none of "
                f"{sorted(RESERVED_NAMES)}"
            )
        names = [p.name for p in self.params]
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise ConfigurationError(f"tool parameters must be distinct identifiers: {names}")
        if "self" in names:
            raise ConfigurationError("a tool parameter may not be called 'self'")

    def docstring(self) -> str:
        """The tool's Google-style docstring (TRL builds the tool schema from it)."""
        lines = [self.description.strip(), ""]
        if self.params:
            lines.append("Args:")
            lines += [f"    {p.name}: {p.description}" for p in self.params]
            lines.append("")
        lines += ["Returns:", f"    {self.returns}"]
        return "\n".join(lines)

    def signature(self) -> inspect.Signature:
        """The tool's signature, ``self`` first."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter("self", kind)]
        # parameters with a default go last (Python's rule); TRL passes them by name
        ordered = sorted(self.params, key=lambda p: p.default is not _NO_DEFAULT)
        params += [
            inspect.Parameter(p.name, kind, annotation=p.annotation, default=p.default)
            for p in ordered
        ]
        return inspect.Signature(params, return_annotation=str)


# ------------------------------------------------------------------ observation text


def observation_to_text(obs: Any) -> str:
    """Any Gymnasium observation as text: strings as they are, arrays as lists, dicts by key."""
    if isinstance(obs, str):
        return obs
    if isinstance(obs, Mapping):
        return "\n".join(f"{k}: {_value_text(v)}" for k, v in obs.items())
    return _value_text(obs)


def _value_text(value: Any) -> str:
    if isinstance(value, np.ndarray | np.generic):
        return json.dumps(value.tolist())
    if isinstance(value, str):
        return value
    if isinstance(value, tuple | list):
        return json.dumps(value, default=_jsonable)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return str(value)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)


def _answer(text: str) -> str:
    """The model's answer without its reasoning.

    What follows the last ``</think>`` (the template may have opened ``<think>`` in the
    prompt), less any ``<think>`` block left (cut off while thinking: nothing).
    """
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return _THINK.sub("", text).strip()


# ------------------------------------------------------------------ built-in envs

_BRACKETED = re.compile(r"\[([A-Za-z]+)\]")
_WORD = re.compile(r"[A-Za-z]+")


def _wordle_tool(args: Mapping[str, Any]) -> str:
    word = str(args["word"]).strip()
    return word if "[" in word else f"[{word}]"


WORDLE_ACTION_MAX = 256
"""Longest Wordle action (the action space's ``max_length``)."""


def _wordle_parse(text: str) -> str:
    """The last ``[word]`` of the answer, a bare word, or else the answer as it is.

    An answer with no guess still goes to the game, which judges it as TextArena does (an
    invalid move: a warning, and the game ends at the second one in a row).
    """
    answer = _answer(text)
    found = _BRACKETED.findall(answer)
    if found:
        return f"[{found[-1].lower()}]"
    if _WORD.fullmatch(answer):
        return f"[{answer.lower()}]"
    return to_printable(answer)[:WORDLE_ACTION_MAX] or "[]"


def _wordle_text(obs: str) -> str:
    # a step with no game message (the move that ended the game) shows the env id, as
    # upstream's ``prompt`` field does: nothing to tell the model
    return "" if obs == "Wordle-v0" else obs


def _text_parse(text: str) -> str:
    answer = _answer(text)
    if not answer:
        raise InvalidActionError("the answer is empty")
    return answer


CATCH_DIRECTIONS = ("left", "stay", "right")
_DIRECTION = re.compile(r"\b(left|stay|right)\b", re.I)


def _catch_tool(args: Mapping[str, Any]) -> int:
    direction = str(args["direction"]).strip().lower()
    if direction not in CATCH_DIRECTIONS:
        raise InvalidActionError(
            f"direction must be one of {', '.join(CATCH_DIRECTIONS)}, got {direction!r}"
        )
    return CATCH_DIRECTIONS.index(direction)


def _catch_parse(text: str) -> int:
    found = _DIRECTION.findall(_answer(text))
    if not found:
        raise InvalidActionError("no move found: answer with left, stay or right")
    return CATCH_DIRECTIONS.index(found[-1].lower())


def _builtin(name: str) -> TextInterface | None:
    if name == "wordle":
        return TextInterface(
            "guess",
            "Guess the secret five-letter word of the Wordle game.",
            (Param("word", str, "A five-letter English word, for example crane."),),
            _wordle_tool,
            _wordle_parse,
            _wordle_text,
            instructions="Answer with your guess: one five-letter word in square brackets, "
            "for example [crane].",
            returns="The feedback: G (right letter, right place), Y (in the word, elsewhere), "
            "X (not in the word).",
        )
    if name == "echo":
        return TextInterface(
            "echo",
            "Send a message to the echo environment, which echoes it back.",
            (Param("message", str, "The message to send."),),
            lambda args: str(args["message"]),
            _text_parse,
            str,
            instructions="Answer with the message to send.",
            returns="The echoed message.",
        )
    if name == "catch":
        return TextInterface(
            "move",
            "Move the paddle on the bottom row to catch the falling ball.",
            (
                Param(
                    "direction",
                    Literal["left", "stay", "right"],
                    "Where the paddle goes: left, stay or right.",
                ),
            ),
            _catch_tool,
            _catch_parse,
            catch_grid,
            instructions="Answer with one word: left, stay or right.",
            returns="The board, top row first: '#' marks the ball and the paddle.",
        )
    return None


# ------------------------------------------------------------------ any action space

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _annotation(space: spaces.Space[Any]) -> Any:
    if isinstance(space, spaces.Text):
        return str
    if isinstance(space, spaces.Discrete):
        return int
    if isinstance(space, spaces.Box) and space.shape == ():
        return int if np.issubdtype(space.dtype, np.integer) else float
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return list
    if isinstance(space, spaces.Dict):
        return dict
    return None


def _describe(space: spaces.Space[Any]) -> str:
    if isinstance(space, spaces.Text):
        return f"Text of at most {space.max_length} characters."
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return f"An integer from {start} to {start + int(space.n) - 1}."
    if isinstance(space, spaces.Box):
        what = "A number" if space.shape == () else f"A list of numbers, shape {space.shape}"
        return f"{what} between {space.low.min()} and {space.high.max()}."
    return f"A value of {space}."


def _convert(space: spaces.Space[Any], value: Any) -> Any:
    """A tool argument (JSON value) as a value of ``space``."""
    try:
        if value is None:
            raise ValueError("no value")
        if isinstance(space, spaces.Text):
            return str(value)
        if isinstance(space, spaces.Discrete):
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError("not an integer")
            return int(value)
        if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
            return np.asarray(value, dtype=space.dtype).reshape(space.shape)
        if isinstance(space, spaces.Dict):
            return {k: _convert(s, value[k]) for k, s in space.spaces.items()}
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise InvalidActionError(f"{value!r} does not fit {space}") from exc
    return value


def _schema_title_name(schema: Mapping[str, Any] | None) -> str:
    title = str((schema or {}).get("title", ""))
    base = re.sub(r"Action$", "", title)
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    if not name.isidentifier() or name in RESERVED_NAMES:
        return "act"
    return name


Converter = Callable[[Any], Any]


def _enum_converter(values: list[Any], space: spaces.Discrete) -> Converter:
    """Enum value -> the Discrete action that ``codec_from_schema`` maps to it.

    Integers are sorted (the action is ``start`` + their index: the value itself when
    they are consecutive); other values keep schema order.
    """
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        ordered = sorted(set(values))
    else:
        ordered = list(dict.fromkeys(values))
    start = int(space.start)

    def convert(value: Any) -> int:
        if value not in ordered:
            raise InvalidActionError(f"{value!r} is not one of {ordered}")
        return start + ordered.index(value)

    return convert


def _field(
    name: str, space: spaces.Space[Any], props: Mapping[str, Any], required: set[str]
) -> tuple[Param, Converter]:
    """One tool parameter for an action field, and its argument -> action-value converter."""
    prop = props.get(name)
    prop = prop if isinstance(prop, Mapping) else {}
    annotation = _annotation(space)
    description = prop.get("description") or _describe(space)
    convert: Converter = functools.partial(_convert, space)
    enum = prop.get("enum")
    if (
        isinstance(space, spaces.Discrete)
        and isinstance(enum, list)
        and enum
        and all(isinstance(v, str | int) for v in enum)
    ):
        annotation = Literal[tuple(enum)]
        description = prop.get("description") or f"One of {', '.join(map(str, enum))}."
        convert = _enum_converter(enum, space)
    elif annotation is None:
        annotation = _JSON_TYPES.get(str(prop.get("type")))
    if annotation is None:
        raise ConfigurationError(
            f"no tool parameter type fits action field {name!r} ({space}); "
            "pass interface= with your own TextInterface"
        )
    default = prop["default"] if name not in required and "default" in prop else _NO_DEFAULT
    return Param(name, annotation, " ".join(str(description).split()), default), convert


def interface_from_space(
    action_space: spaces.Space[Any],
    *,
    schema: Mapping[str, Any] | None = None,
    tool_name: str | None = None,
) -> TextInterface:
    """A :class:`TextInterface` for any action space: Text, Discrete, Box, or a Dict of them.

    Args:
        action_space: The env's (single) action space.
        schema: The action's JSON schema (``openenv/Generic-v0``: the server's
            ``/schema``): names the tool after the action model, describes parameters,
            maps ``enum`` fields to their values.
        tool_name: The tool's name (default: from the schema's title, else ``act``).

    Raises:
        ConfigurationError: No tool parameter fits the space.
    """
    props: Mapping[str, Any] = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    name = tool_name or _schema_title_name(schema)
    parse: Callable[[str], Any]
    if isinstance(action_space, spaces.Dict):
        fields = {k: _field(k, s, props, required) for k, s in action_space.spaces.items()}

        def to_action(args: Mapping[str, Any]) -> Any:
            values = {k: args.get(k, p.default) for k, (p, _) in fields.items()}
            missing = [k for k, v in values.items() if v is _NO_DEFAULT]
            if missing:
                raise InvalidActionError(f"missing field(s) {', '.join(missing)}")
            return {k: convert(values[k]) for k, (_, convert) in fields.items()}

        params = tuple(param for param, _ in fields.values())
        instructions = f"Answer with a JSON object with the fields {', '.join(fields)}."
        parse = _json_parser(to_action, None)
    else:
        # a one-field action: the schema names that field, if it has just one
        wanted = [k for k in props if k != "metadata"]
        wanted = [k for k in wanted if k in required] or wanted
        key = wanted[0] if len(wanted) == 1 else "action"
        param, convert = _field(key, action_space, props, required)

        def to_action(args: Mapping[str, Any]) -> Any:
            if key not in args:
                raise InvalidActionError(f"missing {key}")
            return convert(args[key])

        params = (param,)
        instructions = f"Answer with the action: {param.description}"
        if isinstance(action_space, spaces.Text):
            parse = _text_parse
        elif isinstance(action_space, spaces.Discrete) and param.annotation is int:
            parse = _parse_int
        else:
            parse = _json_parser(to_action, key)
    return TextInterface(
        name,
        "Take one action in the environment.",
        params,
        to_action,
        parse,
        instructions=instructions,
    )


_INT = re.compile(r"-?\d+")
_JSON_VALUE = re.compile(
    r"\{.*\}|\[.*\]|\"(?:[^\"\\]|\\.)*\"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", re.S
)


def _parse_int(text: str) -> int:
    found = _INT.findall(_answer(text))
    if not found:
        raise InvalidActionError("no action found: answer with an integer")
    return int(found[-1])


def _json_parser(
    to_action: Callable[[Mapping[str, Any]], Any], key: str | None
) -> Callable[[str], Any]:
    """Answers in JSON: an object of the fields (``key`` None), or the one field's value.

    The whole answer is tried first, then the last JSON-looking part of it.
    """

    def parse(text: str) -> Any:
        answer = _answer(text)
        candidates = [answer, *reversed(_JSON_VALUE.findall(answer))]
        for candidate in candidates:
            try:
                value = json.loads(candidate)
            except json.JSONDecodeError:
                continue
            if key is None:
                if isinstance(value, dict):
                    return to_action(value)
                continue
            if isinstance(value, dict) and key in value:
                value = value[key]
            return to_action({key: value})
        what = "a JSON object" if key is None else "a JSON value"
        raise InvalidActionError(f"no action found: answer with {what}")

    return parse


def text_interface(env: Any, *, tool_name: str | None = None) -> TextInterface:
    """The :class:`TextInterface` of an environment (a ``gymnasium.Env`` or ``VectorEnv``).

    Built-in envs get named tools (Wordle ``guess(word)``, Echo ``echo(message)``, Catch
    ``move(direction)``); ``openenv/Generic-v0`` gets one built from its server's action
    schema; any other env one built from its action space.

    Raises:
        ConfigurationError: No tool fits the env's action space.
    """
    unwrapped = getattr(env, "unwrapped", env)
    codec = getattr(unwrapped, "codec", None)
    name = getattr(codec, "name", None)
    if isinstance(name, str):
        builtin = _builtin(name)
        if builtin is not None:
            if tool_name is not None and tool_name != builtin.tool_name:
                return replace(builtin, tool_name=tool_name)
            return builtin
    space = getattr(env, "single_action_space", None) or env.action_space
    schema = None
    if name == GENERIC:
        url = getattr(unwrapped, "base_url", None) or unwrapped.base_urls[0]
        schema = fetch_schema(url).get("action")
    return interface_from_space(space, schema=schema, tool_name=tool_name)
