"""The :class:`~openenv_gym.integrations.text.TextInterface` of an MCP tool server.

One tool per MCP tool, each named after the server's (made a Python identifier), typed from
its JSON input schema and documented with the server's description of it.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, InvalidActionError
from openenv_gym.integrations.text.from_space import (
    JSON_VALUE,
    Converter,
    interface_from_space,
    param_for_field,
)
from openenv_gym.integrations.text.interface import (
    NO_DEFAULT,
    RESERVED_NAMES,
    Param,
    TextInterface,
    Tool,
    observation_to_text,
    strip_reasoning,
)
from openenv_gym.spaces import McpTool, ToolActions, schema_node

__all__ = ["interface_from_tools"]


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
        param, convert = param_for_field(key, space, props, required, schema)
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
            if value is NO_DEFAULT:
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
        for candidate in [answer, *reversed(JSON_VALUE.findall(answer))]:
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
