"""MCP tool servers: their tools, their ``/schema``, and the codec that calls the tools.

An OpenEnv ``MCPEnvironment`` acts with ``CallToolAction`` (:func:`is_mcp_schema`): the
action space of its codec picks a tool and fills its arguments (:class:`ToolActions`), and
its observation is the tool's result as text (:func:`tool_result_text`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, RemoteProtocolError
from openenv_gym.spaces.codec import Codec, text_space
from openenv_gym.spaces.convert import _Bool, _Conv, _Dict, _Text
from openenv_gym.spaces.fields import _action_fields, _observation_fields
from openenv_gym.spaces.schema import (
    _NOT_IN_OBSERVATION,
    FieldSpaces,
    _brief,
    _Reader,
    _show,
)

__all__ = [
    "CALL_TOOL",
    "LIST_TOOLS",
    "TOOLS",
    "TOOL_TEXT_MAX",
    "McpTool",
    "ToolActions",
    "is_mcp_schema",
    "listed_tools",
    "tool_result_text",
]

logger = logging.getLogger("openenv_gym.spaces")


CALL_TOOL = "call_tool"
"""``CallToolAction.type``: the action calls a tool."""

LIST_TOOLS = "list_tools"
"""``ListToolsAction.type``: the step lists the tools (:func:`openenv_gym.assemble.list_tools`)."""

TOOLS = "tools"
"""Key of the tool list that :func:`openenv_gym.assemble.fetch_schema` adds to an MCP server's
``/schema`` body (the server's own body has no such key)."""

TOOL_TEXT_MAX = 65536
"""``max_length`` of the ``text`` observation of a tool server (longer results are cut;
the whole result stays in ``info["result"]``)."""

_TOOL_OBSERVATION = frozenset({"result", "error"}) | _NOT_IN_OBSERVATION
"""``CallToolObservation`` fields the tool codec turns into ``text`` / ``is_error``."""

_TOOL_OUTPUTS = ("text", "is_error")


@dataclass(frozen=True)
class McpTool:
    """One tool of an MCP environment, as its server lists it.

    Attributes:
        name: What ``CallToolAction.tool_name`` names it.
        description: What it does (a FastMCP tool's: from its docstring).
        input_schema: The JSON schema of its arguments (an object).
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]

    @classmethod
    def from_listing(cls, entry: Any) -> McpTool:
        """A tool from one entry of a tool list.

        Both spellings are read: ``input_schema`` (OpenEnv's ``ListToolsObservation``, and
        MCP SDK 2) and ``inputSchema`` (MCP's ``tools/list``, SDK 1).

        Raises:
            RemoteProtocolError: Not a tool (no name, or a schema that is not an object).
        """
        if isinstance(entry, McpTool):
            return entry
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise RemoteProtocolError(f"not a tool: {_brief(entry)}")
        schema = entry.get("input_schema", entry.get("inputSchema"))
        if schema is None:
            schema = {"type": "object", "properties": {}}
        if not isinstance(schema, Mapping):
            raise RemoteProtocolError(f"tool {name!r}: its input schema is not an object")
        return cls(name, str(entry.get("description") or ""), schema)

    def as_json(self) -> dict[str, Any]:
        """``{"name", "description", "input_schema"}`` (as :data:`TOOLS` holds it)."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


@dataclass(frozen=True)
class ToolActions:
    """How the actions of a tool server's codec call its tools.

    Attributes:
        tools: The tools, in the order of the action's ``tool`` index.
        single: The action is one tool's arguments (``tool=``), not
            ``{"tool": index, "arguments": {name: arguments}}``.
        arguments: Per tool with arguments, the ``Dict`` of its arguments' spaces. In
            ``single`` mode the action follows Generic-v0's rule: one argument's value, a
            ``Dict`` of several, ``Discrete(1)`` (action 0) for none.
    """

    tools: tuple[McpTool, ...]
    single: bool
    arguments: Mapping[str, spaces.Space[Any]]


def is_mcp_schema(schema: Mapping[str, Any]) -> bool:
    """Whether a ``/schema`` body is an MCP tool server's: its action is ``CallToolAction``.

    That is an action with ``tool_name`` and ``arguments`` fields and, if it has a ``type``
    field, ``type`` ``"call_tool"``: what OpenEnv's ``MCPEnvironment`` apps publish (echo,
    coding_tools, finqa, jupyter, opencode, terminus), subclasses of it included. (``GET
    /metadata`` tells nothing more: name, description, readme, version, author.)
    """
    action = schema.get("action") if isinstance(schema, Mapping) else None
    if not isinstance(action, Mapping):
        return False
    reader = _Reader(action, lossless=False)
    props, _ = reader.properties(action)
    if not isinstance(props.get("tool_name"), Mapping) or "arguments" not in props:
        return False
    if "type" not in props:
        return True
    kind = reader.deref(props["type"]) or {}
    values = [kind["const"]] if "const" in kind else kind.get("enum") or [kind.get("default")]
    return isinstance(values, list) and CALL_TOOL in values


def listed_tools(schema: Mapping[str, Any]) -> tuple[McpTool, ...]:
    """The tools a ``/schema`` body carries under :data:`TOOLS`.

    Raises:
        ConfigurationError: There is no tool list (a body read by plain ``GET /schema``).
        RemoteProtocolError: An entry is not a tool.
    """
    listed = schema.get(TOOLS)
    if not isinstance(listed, list | tuple):
        raise ConfigurationError(
            "this is an MCP tool server's /schema, and it lists no tools: read it with "
            "openenv_gym.assemble.fetch_schema, which adds them (see docs/spaces.md)"
        )
    return tuple(McpTool.from_listing(entry) for entry in listed)


def _call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": CALL_TOOL, "tool_name": name, "arguments": arguments}


def tool_result_text(obs: Mapping[str, Any]) -> tuple[str, bool]:
    """A tool server's observation as ``(text, is_error)``.

    ``text`` is the tool's result: the text parts of its MCP ``content``, else its
    structured content (or ``data``) as JSON, else the result itself; when the call failed
    (``error``, or ``is_error`` in the result), the error's message. An observation with no
    tool result (a reset) gives its ``metadata`` as JSON (openenv >= 0.4 sends it), or "".
    """
    error = obs.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or _show(error)), True
    if error is not None:
        return _show(error), True
    result = obs.get("result")
    if isinstance(result, Mapping):
        failed = bool(result.get("is_error") or result.get("isError"))
        content = result.get("content")
        texts = [
            part["text"]
            for part in (content if isinstance(content, list) else ())
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        if texts:
            return "\n".join(texts), failed
        for key in ("structured_content", "structuredContent", "data"):
            if result.get(key) is not None:
                return _show(result[key]), failed
        return ("" if content is not None else _show(result)), failed
    if result is not None:
        return _show(result), False
    if obs.get("tool_name") is None:
        metadata = obs.get("metadata")
        return (_show(metadata) if metadata else ""), False
    return "", False


def _tool_arguments(tool: McpTool, chosen: FieldSpaces, *, single: bool) -> dict[str, _Conv]:
    def hint(key: str) -> str:
        if single:
            return f"action_fields={{{key!r}: <space>}}"
        return f"action_fields={{{tool.name!r}: Dict({{{key!r}: <space>, ...}})}}"

    return _action_fields(
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
) -> dict[str, tuple[McpTool, dict[str, _Conv]]]:
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
    picked: dict[str, tuple[McpTool, dict[str, _Conv]]] = {}
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

    fields = _observation_fields(schema["observation"], observation_fields, _TOOL_OBSERVATION)
    clash = sorted(set(fields) & set(_TOOL_OUTPUTS))
    if clash:
        raise ConfigurationError(
            f"the observation has fields named {clash}, which the tool codec fills itself: "
            "move them to info with observation_fields={name: None}"
        )
    base = _Dict(fields)
    text = _Text(text_space(TOOL_TEXT_MAX))
    space = spaces.Dict(
        {**{k: c.space for k, c in fields.items()}, "text": text.space, "is_error": _Bool().space}
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
        arguments = _Dict(fields)
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
    converters = {k: _Dict(fields) for k, (_, fields) in picked.items() if fields}
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
