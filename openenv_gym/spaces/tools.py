"""MCP tool servers: their tools, their ``/schema``, and their results as text.

An OpenEnv ``MCPEnvironment`` acts with ``CallToolAction`` (:func:`is_mcp_schema`): the
action space of its codec (:func:`~openenv_gym.spaces.codec_from_schema`) picks a tool and
fills its arguments (:class:`ToolActions`), and its observation is the tool's result as
text (:func:`tool_result_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, RemoteProtocolError
from openenv_gym.spaces.schema import SchemaReader, brief_json, json_text

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
            raise RemoteProtocolError(f"not a tool: {brief_json(entry)}")
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
    reader = SchemaReader(action, lossless=False)
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


def tool_result_text(obs: Mapping[str, Any]) -> tuple[str, bool]:
    """A tool server's observation as ``(text, is_error)``.

    ``text`` is the tool's result: the text parts of its MCP ``content``, else its
    structured content (or ``data``) as JSON, else the result itself; when the call failed
    (``error``, or ``is_error`` in the result), the error's message. An observation with no
    tool result (a reset) gives its ``metadata`` as JSON (openenv >= 0.4 sends it), or "".
    """
    error = obs.get("error")
    if isinstance(error, Mapping):
        return str(error.get("message") or json_text(error)), True
    if error is not None:
        return json_text(error), True
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
                return json_text(result[key]), failed
        return ("" if content is not None else json_text(result)), failed
    if result is not None:
        return json_text(result), False
    if obs.get("tool_name") is None:
        metadata = obs.get("metadata")
        return (json_text(metadata) if metadata else ""), False
    return "", False
