"""Gymnasium spaces and codecs: how a wire observation/action maps to a Gymnasium one.

A :class:`Codec` bundles an environment's spaces with the two conversions the facade
needs: Gymnasium action -> action fields sent on the wire, and wire observation fields ->
Gymnasium observation. :func:`codec_for` returns the codec of a known environment (its
:class:`~openenv_gym.envs.EnvRecord` makes it); :func:`codec_from_schema` builds one for
any OpenEnv server from its ``GET /schema`` (``docs/spaces.md`` has the mapping table).

The package's modules:

* :mod:`~openenv_gym.spaces.printable`: Text over printable ASCII and its fast checks;
* :mod:`~openenv_gym.spaces.convert`: converters between JSON values and space values;
* :mod:`~openenv_gym.spaces.schema`: the one JSON-schema walker (spaces, tool parameters,
  example values, the ``enum`` -> ``Discrete`` mapping);
* :mod:`~openenv_gym.spaces.fields`: the spaces of an action's and an observation's fields;
* :mod:`~openenv_gym.spaces.tools`: MCP tool servers (their tools, results as text);
* :mod:`~openenv_gym.spaces.codec`: :class:`Codec`, :func:`codec_for`, error messages
  about actions;
* :mod:`~openenv_gym.spaces.generic`: :func:`codec_from_schema` (a tool server's included).

Each imports only the ones listed before it.

The game-specific codecs live with their environments (``openenv_gym_servers.wordle.gym``,
...); the names this module always had for them (:data:`WORDLE_OBS_MAX`,
:func:`catch_grid`, :data:`ECHO_TOOL`, ...) are looked up there on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from openenv_gym.spaces.codec import (
    Codec,
    action_error,
    codec_for,
    describe_space,
    known_envs,
    short_repr,
    why_not_in,
)
from openenv_gym.spaces.codec import (
    ColumnDecoder as ColumnDecoder,
)
from openenv_gym.spaces.codec import (
    discrete_contains as discrete_contains,
)
from openenv_gym.spaces.generic import codec_from_schema
from openenv_gym.spaces.printable import (
    PRINTABLE,
    to_printable,
)
from openenv_gym.spaces.printable import (
    TEXT_CHARSET as TEXT_CHARSET,
)
from openenv_gym.spaces.printable import (
    printable_texts as printable_texts,
)
from openenv_gym.spaces.printable import (
    text_contains as text_contains,
)
from openenv_gym.spaces.printable import (
    text_space as text_space,
)
from openenv_gym.spaces.printable import (
    texts_contain as texts_contain,
)
from openenv_gym.spaces.schema import (
    DEFAULT_TEXT_LENGTH,
    GENERIC,
    deref,
    enum_action,
    example_value,
    schema_node,
)
from openenv_gym.spaces.schema import (
    FieldSpaces as FieldSpaces,
)
from openenv_gym.spaces.tools import (
    CALL_TOOL,
    LIST_TOOLS,
    TOOL_TEXT_MAX,
    TOOLS,
    McpTool,
    ToolActions,
    is_mcp_schema,
    listed_tools,
    tool_result_text,
)

__all__ = [
    "CALL_TOOL",
    "DEFAULT_TEXT_LENGTH",
    "ECHO_TOOL",
    "GENERIC",
    "LIST_TOOLS",
    "PRINTABLE",
    "TOOLS",
    "TOOL_TEXT_MAX",
    "Codec",
    "McpTool",
    "ToolActions",
    "action_error",
    "catch_grid",
    "codec_for",
    "codec_from_schema",
    "deref",
    "describe_space",
    "enum_action",
    "example_value",
    "is_mcp_schema",
    "known_envs",
    "listed_tools",
    "schema_node",
    "short_repr",
    "to_printable",
    "tool_result_text",
    "why_not_in",
]

_GAMES = {
    "WORDLE_OBS_MAX": "openenv_gym_servers.wordle.gym",
    "ECHO_MAX": "openenv_gym_servers.echo.gym",
    "ECHO_TOOL": "openenv_gym_servers.echo.gym",
    "CATCH_ROWS": "openenv_gym_servers.catch.gym",
    "CATCH_COLUMNS": "openenv_gym_servers.catch.gym",
    "catch_grid": "openenv_gym_servers.catch.gym",
}
"""Names of the shipped games' codecs, kept here for code written before they moved."""


def __getattr__(name: str) -> Any:
    module = _GAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
