""":func:`codec_from_schema`: the codec of any OpenEnv server, from its ``GET /schema``.

What ``openenv/Generic-v0`` acts with (``docs/spaces.md`` has the mapping table): the spaces
of the action's and the observation's fields come from :mod:`openenv_gym.spaces.fields`;
an MCP tool server (:mod:`openenv_gym.spaces.tools`) gets a codec whose actions call its
tools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, RemoteProtocolError
from openenv_gym.spaces.codec import Codec
from openenv_gym.spaces.convert import BoolConverter, Converter, DictConverter, TextConverter
from openenv_gym.spaces.fields import action_converters, observation_converters
from openenv_gym.spaces.printable import text_space
from openenv_gym.spaces.schema import (
    GENERIC,
    NOT_IN_OBSERVATION,
    FieldSpaces,
    brief_json,
    json_text,
)
from openenv_gym.spaces.tools import (
    CALL_TOOL,
    TOOL_TEXT_MAX,
    McpTool,
    ToolActions,
    is_mcp_schema,
    listed_tools,
    tool_result_text,
)

__all__ = ["codec_from_schema"]

logger = logging.getLogger("openenv_gym.spaces")


def codec_from_schema(
    schema: Mapping[str, Any],
    *,
    name: str = GENERIC,
    action_fields: FieldSpaces | None = None,
    observation_fields: FieldSpaces | None = None,
    tool: str | None = None,
) -> Codec:
    """The codec of any OpenEnv server, from its ``GET /schema`` body (no I/O).

    The observation space is a ``Dict`` of the observation's fields, less ``done``,
    ``reward`` and ``metadata`` (they travel separately) and the fields no space fits
    (free-form dicts, ``Any``, recursive models): those go to ``info``, which holds exactly
    the fields the observation leaves out. The action space is the space of the action's
    one field (the action is that field's value), or a ``Dict`` of its fields. Action
    fields with a default are left to the server unless the action has no required field
    (or you choose them with ``action_fields``); ``metadata`` is never sent.
    ``docs/spaces.md`` has the full mapping table.

    Args:
        schema: ``{"action": <JSON schema>, "observation": <JSON schema>, ...}``.
        name: The codec's name.
        action_fields: Per action field, the space to use instead (e.g.
            ``{"action_id": Discrete(3)}`` when the schema says only ``integer``), or
            None to leave a field with a default out.
        observation_fields: Per observation field, the space to use instead (e.g.
            ``{"board": Box(0, 1, (50,))}``), or None to move the field to ``info``.
        tool: MCP servers only: act with this one tool (the action space is its arguments').

    An MCP tool server (its action is OpenEnv's ``CallToolAction``: see
    :func:`is_mcp_schema`) gets tool actions instead: ``schema["tools"]`` must list its
    tools (:func:`openenv_gym.assemble.fetch_schema` adds them), and the action space is a
    ``Dict`` of ``tool`` (``Discrete`` over the tools) and ``arguments`` (per tool, a
    ``Dict`` of its arguments' spaces), or with ``tool=`` that tool's arguments alone;
    ``action_fields`` then names tools (``{tool: Dict({argument: space})}``, or None to
    leave a tool out), or with ``tool=`` that tool's arguments. The observation holds
    the tool's result as ``text`` and ``is_error``, beside the observation model's other
    fields (:func:`tool_result_text`); the raw ``result`` and ``error`` go to ``info``.

    Raises:
        ConfigurationError: ``schema`` is not such an object, a required action field has
            no space (choose one with ``action_fields`` or pass your own codec), an
            ``*_fields`` key is not a field of the schema, or ``tool=`` does not fit (no
            MCP server, or no such tool).

    Example:
        >>> from pydantic import BaseModel
        >>> class Move(BaseModel):
        ...     direction: int
        >>> class Board(BaseModel):
        ...     cells: tuple[int, int, int]
        ...     turn: str
        ...     done: bool = False
        >>> codec = codec_from_schema(
        ...     {"action": Move.model_json_schema(), "observation": Board.model_json_schema()},
        ...     action_fields={"direction": spaces.Discrete(4)},
        ... )
        >>> codec.action_space, codec.encode_action(2)
        (Discrete(4), {'direction': 2})
        >>> sorted(codec.observation_space.keys())
        ['cells', 'turn']
        >>> codec.observation_space["cells"]
        Box(-9223372036854775808, 9223372036854775807, (3,), int64)
        >>> codec.decode_observation({"cells": [1, 2, 0], "turn": "x"})
        {'cells': array([1, 2, 0]), 'turn': 'x'}
    """
    if not isinstance(schema, Mapping) or not all(
        isinstance(schema.get(k), Mapping) for k in ("action", "observation")
    ):
        raise ConfigurationError(
            "schema must be a /schema body: an object with 'action' and 'observation' "
            f"JSON schemas, got {brief_json(schema)}"
        )
    if is_mcp_schema(schema):
        return _tool_codec(
            schema,
            name=name,
            tool=tool,
            action_fields=action_fields or {},
            observation_fields=observation_fields or {},
        )
    if tool is not None:
        raise ConfigurationError(
            f"tool={tool!r} picks a tool of an MCP server, and this server's action is "
            "not OpenEnv's CallToolAction (see docs/spaces.md)"
        )
    actions = action_converters(schema["action"], action_fields or {})
    observations = observation_converters(schema["observation"], observation_fields or {})
    observation = DictConverter(observations)
    keys = list(observations)

    def render(obs: Mapping[str, Any]) -> str:
        shown = keys or [k for k in obs if k != "metadata"]
        return "\n".join(f"{k}: {json_text(obs.get(k))}" for k in shown)

    action_space: spaces.Space[Any]
    encode_action: Callable[[Any], dict[str, Any]]
    if len(actions) == 1:
        ((key, conv),) = actions.items()
        action_space = conv.space
        encode = conv.encode

        def encode_one(action: Any) -> dict[str, Any]:
            return {key: encode(action)}

        encode_action = encode_one
    else:
        action = DictConverter(actions)
        action_space = action.space
        encode_action = action.encode
    return Codec(
        name,
        observation.space,
        action_space,
        encode_action,
        observation.decode,
        render,
        observed=frozenset(observations),
        schema=schema,
    )


# ------------------------------------------------------------------ MCP tool servers
_TOOL_OBSERVATION = frozenset({"result", "error"}) | NOT_IN_OBSERVATION
"""``CallToolObservation`` fields the tool codec turns into ``text`` / ``is_error``."""

_TOOL_OUTPUTS = ("text", "is_error")


def _call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": CALL_TOOL, "tool_name": name, "arguments": arguments}


def _tool_arguments(tool: McpTool, chosen: FieldSpaces, *, single: bool) -> dict[str, Converter]:
    def hint(key: str) -> str:
        if single:
            return f"action_fields={{{key!r}: <space>}}"
        return f"action_fields={{{tool.name!r}: Dict({{{key!r}: <space>, ...}})}}"

    return action_converters(
        tool.input_schema,
        chosen,
        what=f"tool {tool.name!r} argument",
        option="action_fields" if single else f"action_fields[{tool.name!r}]",
        skip=frozenset(),
        allow_empty=True,
        hint=hint,
    )


def _pick_tools(
    tools: tuple[McpTool, ...], chosen: FieldSpaces
) -> dict[str, tuple[McpTool, dict[str, Converter]]]:
    """The tools the action calls, each with its arguments' converters.

    A tool ``chosen`` maps to None is left out; to a ``Dict``, those are its arguments'
    spaces. A tool with a required argument no space fits is left out with a warning
    (unless chosen), so one odd tool does not make the server unusable.
    """
    names = [t.name for t in tools]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"action_fields names {unknown}, not tools of the server: its tools are {names}"
        )
    picked: dict[str, tuple[McpTool, dict[str, Converter]]] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise RemoteProtocolError(f"the server lists tool {tool.name!r} twice")
        seen.add(tool.name)
        if tool.name in chosen:
            space = chosen[tool.name]
            if space is None:
                continue
            if not isinstance(space, spaces.Dict):
                raise ConfigurationError(
                    f"action_fields[{tool.name!r}] must be a Dict of argument spaces (or None "
                    f"to leave the tool out), got {space!r}"
                )
            fields = _tool_arguments(tool, dict(space.spaces), single=False)
            picked[tool.name] = (tool, fields)
            continue
        try:
            picked[tool.name] = (tool, _tool_arguments(tool, {}, single=False))
        except ConfigurationError as exc:
            logger.warning("tool %r left out of the action space: %s", tool.name, exc)
            problems.append(str(exc))
    if not picked:
        raise ConfigurationError(
            f"no tool of the server fits an action space (tools: {names})"
            + "".join(f"; {p}" for p in problems)
        )
    return picked


def _tool_codec(
    schema: Mapping[str, Any],
    *,
    name: str,
    tool: str | None,
    action_fields: FieldSpaces,
    observation_fields: FieldSpaces,
) -> Codec:
    """The codec of an MCP tool server (see :func:`codec_from_schema`)."""
    tools = listed_tools(schema)
    if tool is not None:
        found = [t for t in tools if t.name == tool]
        if not found:
            raise ConfigurationError(
                f"tool={tool!r}: the server has no such tool; its tools are "
                f"{[t.name for t in tools]}"
            )
        action_space, encode, contains, actions = _one_tool(found[0], action_fields)
    else:
        action_space, encode, contains, actions = _many_tools(tools, action_fields)

    fields = observation_converters(schema["observation"], observation_fields, _TOOL_OBSERVATION)
    clash = sorted(set(fields) & set(_TOOL_OUTPUTS))
    if clash:
        raise ConfigurationError(
            f"the observation has fields named {clash}, which the tool codec fills itself: "
            "move them to info with observation_fields={name: None}"
        )
    base = DictConverter(fields)
    text = TextConverter(text_space(TOOL_TEXT_MAX))
    space = spaces.Dict(
        {
            **{k: c.space for k, c in fields.items()},
            "text": text.space,
            "is_error": BoolConverter().space,
        }
    )

    def decode(obs: Mapping[str, Any]) -> dict[str, Any]:
        out = base.decode(obs)
        said, failed = tool_result_text(obs)
        out["text"] = text.decode(said)
        out["is_error"] = np.int64(failed)
        return out

    def render(obs: Mapping[str, Any]) -> str:
        said, failed = tool_result_text(obs)
        called = obs.get("tool_name")
        head = f"{called}: " if isinstance(called, str) and called else ""
        return f"{head}{'error: ' if failed else ''}{said}"

    return Codec(
        name,
        space,
        action_space,
        encode,
        decode,
        render,
        contains_action=contains,
        observed=frozenset(fields),
        tool_actions=actions,
        reads_metadata=True,
        schema=schema,
    )


_Encode = Callable[[Any], dict[str, Any]]


def _one_tool(
    tool: McpTool, chosen: FieldSpaces
) -> tuple[spaces.Space[Any], _Encode, Callable[[Any], bool], ToolActions]:
    """``tool=``: the action is that tool's arguments, as Generic-v0 makes an action."""
    fields = _tool_arguments(tool, chosen, single=True)
    if not fields:
        action_space: spaces.Space[Any] = spaces.Discrete(1)

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, {})

    elif len(fields) == 1:
        ((key, conv),) = fields.items()
        action_space = conv.space

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, {key: conv.encode(action)})

    else:
        arguments = DictConverter(fields)
        action_space = arguments.space

        def encode(action: Any) -> dict[str, Any]:
            return _call_tool(tool.name, arguments.encode(action))

    listed = {tool.name: spaces.Dict({k: c.space for k, c in fields.items()})} if fields else {}
    actions = ToolActions((tool,), single=True, arguments=listed)
    return action_space, encode, action_space.contains, actions


def _many_tools(
    tools: tuple[McpTool, ...], chosen: FieldSpaces
) -> tuple[spaces.Space[Any], _Encode, Callable[[Any], bool], ToolActions]:
    """``Dict(tool=Discrete(n), arguments=Dict({tool: Dict(its arguments)}))``.

    Tools without arguments have no entry in ``arguments`` (an empty ``Dict`` breaks
    Gymnasium's batching), and ``arguments`` is left out when no tool has any. An action
    needs the chosen tool's entry only: the others are not read.
    """
    picked = _pick_tools(tools, chosen)
    names = list(picked)
    converters = {k: DictConverter(fields) for k, (_, fields) in picked.items() if fields}
    tool_index = spaces.Discrete(len(names))
    parts: dict[str, spaces.Space[Any]] = {"tool": tool_index}
    if converters:
        parts["arguments"] = spaces.Dict({k: c.space for k, c in converters.items()})
    action_space = spaces.Dict(parts)

    def encode(action: Any) -> dict[str, Any]:
        name = names[int(action["tool"])]
        conv = converters.get(name)
        return _call_tool(name, {} if conv is None else conv.encode(action["arguments"][name]))

    def contains(action: Any) -> bool:
        if not isinstance(action, Mapping) or not tool_index.contains(action.get("tool")):
            return False
        conv = converters.get(names[int(action["tool"])])
        if conv is None:
            return True
        arguments = action.get("arguments")
        name = names[int(action["tool"])]
        return (
            isinstance(arguments, Mapping)
            and name in arguments
            and bool(conv.space.contains(arguments[name]))
        )

    actions = ToolActions(
        tuple(t for t, _ in picked.values()),
        single=False,
        arguments={k: c.space for k, c in converters.items()},
    )
    return action_space, encode, contains, actions
