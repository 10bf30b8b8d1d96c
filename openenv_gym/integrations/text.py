"""How a language model talks to an environment: tools, text actions, text observations.

A :class:`TextInterface` is everything an LLM integration needs to know about one
environment:

* the **tool** TRL exposes to the model (``guess(word: str)`` for Wordle): its name, typed
  parameters, docstring, and how the tool's arguments become a Gymnasium action;
* how a **plain-text answer** becomes an action (:attr:`TextInterface.parse_action`, used by
  the lockstep rollout and the vLLM loop, where the model answers in text);
* how a **Gymnasium observation** becomes text for the model.

:func:`text_interface` picks one for an environment: its own, when its
:class:`~openenv_gym.envs.EnvRecord` has one (Wordle, Echo, Catch), one built from the
server's action schema for
``openenv/Generic-v0``, and one built from the action space for any other Gymnasium env
(Text, Discrete, or a Dict of those). Pass your own to override it.

One cohesive concern, over 600 lines: the text interface of an environment, and the three
ways one is built (a record's own, from a server's action schema, from an action space).
"""

from __future__ import annotations

import functools
import inspect
import json
import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from openenv_gym import envs
from openenv_gym.assemble import fetch_schema
from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.spaces import GENERIC, McpTool, ToolActions, enum_action, schema_node

__all__ = [
    "RESERVED_NAMES",
    "Param",
    "TextInterface",
    "Tool",
    "action_check",
    "interface_from_space",
    "interface_from_tools",
    "observation_to_text",
    "strip_reasoning",
    "text_answer",
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


def _check_tool(name: str, params: tuple[Param, ...]) -> None:
    if not name.isidentifier() or name.startswith("_") or name in RESERVED_NAMES:
        raise ConfigurationError(
            f"tool name {name!r} must be a Python identifier, not private, and none of "
            f"{sorted(RESERVED_NAMES)}"
        )
    names = [p.name for p in params]
    if len(set(names)) != len(names) or not all(
        n.isidentifier() and not keyword.iskeyword(n) for n in names
    ):
        raise ConfigurationError(f"tool parameters must be distinct identifiers: {names}")
    if "self" in names:
        raise ConfigurationError("a tool parameter may not be called 'self'")


def _docstring(description: str, params: tuple[Param, ...], returns: str) -> str:
    lines = [description.strip(), ""]
    if params:
        lines.append("Args:")
        lines += [f"    {p.name}: {p.description}" for p in params]
        lines.append("")
    lines += ["Returns:", f"    {returns}"]
    return "\n".join(lines)


def _signature(params: tuple[Param, ...]) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    listed = [inspect.Parameter("self", kind)]
    # parameters with a default go last (Python's rule); TRL passes them by name
    ordered = sorted(params, key=lambda p: p.default is not _NO_DEFAULT)
    listed += [
        inspect.Parameter(p.name, kind, annotation=p.annotation, default=p.default) for p in ordered
    ]
    return inspect.Signature(listed, return_annotation=str)


@dataclass(frozen=True)
class Tool:
    """One tool a model may call: its name, typed parameters, docstring and action.

    Attributes:
        name: A Python identifier, not private, none of :data:`RESERVED_NAMES`.
        description: What the tool does (first lines of its docstring).
        params: Its parameters.
        to_action: Its arguments (by parameter name) -> Gymnasium action.
        returns: The ``Returns:`` line of its docstring.
    """

    name: str
    description: str
    params: tuple[Param, ...]
    to_action: Callable[[Mapping[str, Any]], Any]
    returns: str = "What the environment shows after the action."

    def __post_init__(self) -> None:
        _check_tool(self.name, self.params)

    def docstring(self) -> str:
        """The tool's Google-style docstring (TRL builds the tool schema from it)."""
        return _docstring(self.description, self.params, self.returns)

    def signature(self) -> inspect.Signature:
        """The tool's signature, ``self`` first."""
        return _signature(self.params)


@dataclass(frozen=True)
class TextInterface:
    """An environment as a language model sees it.

    The first five attributes describe its tool; an environment with several (an MCP
    server's) lists the others in ``more_tools``. :attr:`tools` has them all.

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
        more_tools: The environment's other tools, if it has several.
    """

    tool_name: str
    description: str
    params: tuple[Param, ...]
    to_action: Callable[[Mapping[str, Any]], Any]
    parse_action: Callable[[str], Any]
    observation_text: Callable[[Any], str] = field(default=_observation_text)
    instructions: str = ""
    returns: str = "What the environment shows after the action."
    more_tools: tuple[Tool, ...] = ()

    def __post_init__(self) -> None:
        _check_tool(self.tool_name, self.params)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"tool names must be distinct: {names}")

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every tool: the first one (``tool_name``, ...), then ``more_tools``."""
        first = Tool(self.tool_name, self.description, self.params, self.to_action, self.returns)
        return (first, *self.more_tools)

    def docstring(self) -> str:
        """The (first) tool's Google-style docstring (TRL builds the tool schema from it)."""
        return _docstring(self.description, self.params, self.returns)

    def signature(self) -> inspect.Signature:
        """The (first) tool's signature, ``self`` first."""
        return _signature(self.params)


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


def strip_reasoning(text: str) -> str:
    """The model's answer without its reasoning.

    What follows the last ``</think>`` (the template may have opened ``<think>`` in the
    prompt), less any ``<think>`` block left (cut off while thinking: nothing).
    """
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return _THINK.sub("", text).strip()


def text_answer(text: str) -> str:
    """A plain-text answer as a Text action: the answer less its reasoning.

    Raises:
        InvalidActionError: The answer is empty.
    """
    answer = strip_reasoning(text)
    if not answer:
        raise InvalidActionError("the answer is empty")
    return answer


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
    """Enum value -> the Discrete action ``codec_from_schema`` maps it to.

    The one mapping of :func:`openenv_gym.spaces.enum_action` (``True`` and ``1`` apart).
    """
    mapped, action = enum_action(values)
    shown = [v for v in values if v is not None]
    offset = int(space.start) - int(mapped.start)  # 0 unless the user chose the space

    def convert(value: Any) -> int:
        found = action(value)
        if found is None:
            raise InvalidActionError(f"{value!r} is not one of {shown}")
        return found + offset

    return convert


def _boolean(value: Any) -> int:
    """A JSON boolean (or 0 / 1) as the ``Discrete(2)`` action ``codec_from_schema`` maps it to."""
    if isinstance(value, bool) or value in (0, 1):
        return int(bool(value))
    raise InvalidActionError(f"{value!r} is not a boolean")


def _field(
    name: str,
    space: spaces.Space[Any],
    props: Mapping[str, Any],
    required: set[str],
    root: Mapping[str, Any] | None = None,
) -> tuple[Param, Converter]:
    """One tool parameter for an action field, and its argument -> action-value converter.

    ``root`` is the JSON schema ``props`` come from: ``$ref`` (an ``Enum`` class), a
    one-element ``allOf`` and ``X | None`` are resolved in it.
    """
    prop = schema_node(root or {}, props.get(name))
    annotation = _annotation(space)
    description = prop.get("description") or _describe(space)
    convert: Converter = functools.partial(_convert, space)
    enum = prop.get("enum")
    if isinstance(space, spaces.Discrete) and int(space.n) == 2 and prop.get("type") == "boolean":
        annotation = bool
        convert = _boolean
    elif (
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
        fields = {k: _field(k, s, props, required, schema) for k, s in action_space.spaces.items()}

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
        param, convert = _field(key, action_space, props, required, schema)

        def to_action(args: Mapping[str, Any]) -> Any:
            if key not in args:
                raise InvalidActionError(f"missing {key}")
            return convert(args[key])

        params = (param,)
        instructions = f"Answer with the action: {param.description}"
        if isinstance(action_space, spaces.Text):
            parse = text_answer
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
    found = _INT.findall(strip_reasoning(text))
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
        answer = strip_reasoning(text)
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


# ------------------------------------------------------------------ MCP tool servers

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$", re.M
)
_ARG_LINE = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _tool_docs(tool: McpTool) -> tuple[str, dict[str, str]]:
    """A tool's summary (its description less Google-style sections) and ``Args:`` lines.

    FastMCP 3 and later already cut the docstring to its summary (and put the argument
    lines into the input schema); other servers send the docstring whole.
    """
    text = tool.description.strip()
    found = _SECTION.search(text)
    summary = text[: found.start()].strip() if found else text
    args: dict[str, str] = {}
    section = re.search(r"^\s*(?:Args|Arguments|Parameters):\s*$", text, re.M)
    if section is not None:
        for line in text[section.end() :].splitlines()[1:]:
            if _SECTION.match(line):
                break
            matched = _ARG_LINE.match(line)
            if matched:
                args[matched.group(1)] = matched.group(2).strip()
    return summary or f"Call the {tool.name} tool.", args


def _identifier(name: str, taken: set[str]) -> str:
    """``name`` as a Python identifier that is no keyword, reserved name, nor ``taken``."""
    ident = re.sub(r"\W", "_", name).strip("_") or "tool"
    if ident[0].isdigit():
        ident = f"tool_{ident}"
    if keyword.iskeyword(ident) or ident in RESERVED_NAMES or ident == "self":
        ident = f"{ident}_"
    unique, n = ident, 2
    while unique in taken:
        unique, n = f"{ident}_{n}", n + 1
    taken.add(unique)
    return unique


_TOOL_RETURNS = "The tool's result, as text."


def _tool_observation_text(obs: Any) -> str:
    """A tool server's observation (``text``, ``is_error``, ...) as the model reads it."""
    if isinstance(obs, Mapping) and isinstance(obs.get("text"), str):
        text = obs["text"]
        return f"Error: {text}" if obs.get("is_error") else text
    return observation_to_text(obs)


def _blank(space: spaces.Space[Any]) -> Any:
    """A value of ``space`` for an argument left to a ``None`` default."""
    if isinstance(space, spaces.Text):
        charset = space.character_set
        return (" " if " " in charset else min(charset)) * space.min_length
    if isinstance(space, spaces.Discrete):
        return int(space.start)
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, space.dtype), space.low, space.high)
    if isinstance(space, spaces.Dict):
        return {k: _blank(s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Sequence):
        return ()
    return space.sample()


def _tool_of_many(index: int, tool: McpTool, arguments: Any, name: str) -> Tool:
    """One tool of a ``Dict(tool, arguments)`` action: it fills its own entry only."""
    schema = tool.input_schema
    summary, documented = _tool_docs(tool)
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    taken: set[str] = set()
    fields: list[tuple[str, Param, Converter, spaces.Space[Any]]] = []
    given = dict(arguments.spaces) if arguments is not None else {}
    for key in [k for k in props if k in given] + [k for k in given if k not in props]:
        space = given[key]  # in the schema's order (a Dict space sorts its keys)
        param, convert = _field(key, space, props, required, schema)
        described = (
            param.description
            if schema_node(schema, props.get(key)).get("description")
            else documented.get(key, param.description)
        )
        param = replace(param, name=_identifier(key, taken), description=described)
        fields.append((key, param, convert, space))

    def to_action(args: Mapping[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        missing = []
        for key, param, convert, space in fields:
            value = args.get(param.name, args.get(key, param.default))
            if value is _NO_DEFAULT:
                missing.append(param.name)
            elif value is None and param.default is None:
                values[key] = _blank(space)  # left to the server's None: the space's blank
            else:
                values[key] = convert(value)
        if missing:
            raise InvalidActionError(f"{name}(): missing argument(s) {', '.join(missing)}")
        if arguments is None:
            return {"tool": index}
        return {"tool": index, "arguments": {tool.name: values}}

    params = tuple(param for _, param, _, _ in fields)
    return Tool(name, summary, params, to_action, _TOOL_RETURNS)


def _tool_call_parser(tools: tuple[Tool, ...], real: Mapping[str, str]) -> Callable[[str], Any]:
    """Plain-text answers holding ``{"tool": name, "arguments": {...}}`` (or ``"name"``)."""
    by_name = {t.name: t for t in tools}
    by_name |= {server: by_name[ours] for server, ours in real.items()}
    listing = ", ".join(t.name for t in tools)

    def parse(text: str) -> Any:
        answer = strip_reasoning(text)
        for candidate in [answer, *reversed(_JSON_VALUE.findall(answer))]:
            try:
                value = json.loads(candidate)
            except json.JSONDecodeError:
                continue
            if not isinstance(value, dict):
                continue
            called = by_name.get(str(value.get("tool", value.get("name"))))
            arguments = value.get("arguments", {})
            if called is not None and isinstance(arguments, dict):
                return called.to_action(arguments)
        raise InvalidActionError(
            'no tool call found: answer with {"tool": <name>, "arguments": {...}}; '
            f"the tools are {listing}"
        )

    return parse


def interface_from_tools(actions: ToolActions, *, tool_name: str | None = None) -> TextInterface:
    """The :class:`TextInterface` of an MCP tool server: one tool per MCP tool.

    Each tool is named after the server's (made a Python identifier if it is none),
    typed from its JSON input schema (as :func:`interface_from_space` types action fields),
    and documented with the server's description of it. With the codec's ``tool=`` (one
    tool), ``tool_name`` renames it.

    Raises:
        ConfigurationError: ``tool_name`` for several tools, or no parameter type fits.
    """
    if actions.single:
        (tool,) = actions.tools
        summary, _ = _tool_docs(tool)
        name = tool_name or _identifier(tool.name, set())
        arguments = actions.arguments.get(tool.name)
        if not isinstance(arguments, spaces.Dict):  # no arguments: Discrete(1)
            return TextInterface(
                name, summary, (), lambda args: 0, lambda text: 0,
                _tool_observation_text, f"Any answer calls {tool.name}.", _TOOL_RETURNS,
            )  # fmt: skip
        fields = list(arguments.spaces.values())
        space = fields[0] if len(fields) == 1 else arguments
        one = interface_from_space(space, schema=tool.input_schema, tool_name=name)
        return replace(
            one, description=summary, returns=_TOOL_RETURNS, observation_text=_tool_observation_text
        )
    if tool_name is not None:
        raise ConfigurationError(
            "tool_name= renames the one tool of an env; an MCP server's tools keep their "
            "names (make the env with tool=... to use one of them)"
        )
    taken: set[str] = set()
    names = [_identifier(t.name, taken) for t in actions.tools]
    tools = tuple(
        _tool_of_many(i, t, actions.arguments.get(t.name), name)
        for i, (t, name) in enumerate(zip(actions.tools, names, strict=True))
    )
    first = tools[0]
    signatures = "\n".join(
        f"- {t.name}({', '.join(p.name for p in t.params)}): {t.description}" for t in tools
    )
    return TextInterface(
        first.name,
        first.description,
        first.params,
        first.to_action,
        _tool_call_parser(tools, {t.name: n for t, n in zip(actions.tools, names, strict=True)}),
        _tool_observation_text,
        'Answer with one tool call as JSON: {"tool": <name>, "arguments": {...}}. '
        f"The tools:\n{signatures}",
        _TOOL_RETURNS,
        more_tools=tools[1:],
    )


def action_check(env: Any) -> Callable[[Any], bool]:
    """Whether an action is one ``env`` (single or vector) accepts.

    Its codec's check for our envs (a tool server's action needs the called tool's
    arguments only), else the action space's ``contains``.
    """
    codec = getattr(getattr(env, "unwrapped", env), "codec", None)
    check = getattr(codec, "contains_action", None)
    if callable(check):
        return check  # type: ignore[no-any-return]
    space = getattr(env, "single_action_space", None) or env.action_space
    return space.contains  # type: ignore[no-any-return]


def text_interface(env: Any, *, tool_name: str | None = None) -> TextInterface:
    """The :class:`TextInterface` of an environment (a ``gymnasium.Env`` or ``VectorEnv``).

    An env whose record has a text interface gets it (Wordle ``guess(word)``, Echo
    ``echo(message)``, Catch ``move(direction)``); ``openenv/Generic-v0`` gets one built
    from its server's action schema (the one its codec was built from), or on an MCP
    server one per MCP tool (:func:`interface_from_tools`); any other env one built from
    its action space.

    Raises:
        ConfigurationError: No tool fits the env's action space.
    """
    unwrapped = getattr(env, "unwrapped", env)
    codec = getattr(unwrapped, "codec", None)
    name = getattr(codec, "name", None)
    tools = getattr(codec, "tool_actions", None)
    if isinstance(tools, ToolActions):
        return interface_from_tools(tools, tool_name=tool_name)
    if isinstance(name, str) and name != GENERIC:
        record = envs.environment(name)
        own = record.make_text_interface() if record is not None else None
        if own is not None:
            if not isinstance(own, TextInterface):
                raise ConfigurationError(
                    f"the text interface factory of {name!r} made {own!r}, not a TextInterface"
                )
            if tool_name is not None and tool_name != own.tool_name:
                return replace(own, tool_name=tool_name)
            return own
    space = getattr(env, "single_action_space", None) or env.action_space
    schema = None
    built_from = getattr(codec, "schema", None)
    if isinstance(built_from, Mapping):  # the /schema body the codec was built from
        schema = built_from.get("action")
    elif name == GENERIC:
        url = getattr(unwrapped, "base_url", None) or unwrapped.base_urls[0]
        schema = fetch_schema(url, headers=unwrapped.request_headers(0)).get("action")
    return interface_from_space(space, schema=schema, tool_name=tool_name)
