"""Echo for openenv-gym's client side: its codec and its text interface.

The codec of ``openenv/Echo-v0`` speaks both echo servers: the legacy ``EchoAction``
one (ours, and OpenEnv's until 2026) and OpenEnv's MCP echo since; the text interface is
the ``echo(message)`` tool. Its record (:func:`~openenv_gym_servers.echo.record.record`) names both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.spaces import (
    CALL_TOOL,
    Codec,
    is_mcp_schema,
    printable_texts,
    text_space,
    to_printable,
    tool_result_text,
)

if TYPE_CHECKING:
    from openenv_gym.integrations.text import TextInterface

__all__ = ["ECHO_MAX", "ECHO_TOOL", "codec", "text_interface"]

ECHO_MAX = 4096

ECHO_TOOL = "echo_message"
"""The tool of OpenEnv's MCP echo server (``envs/echo_env`` since 2026) that echoes."""


class _EchoWire:
    """Which echo server an Echo codec talks to, and the conversions for it.

    *Legacy* (``EchoAction{message}`` -> ``EchoObservation{echoed_message, ...}``): our
    server, and OpenEnv's echo until 2026. *MCP* (``CallToolAction`` ->
    ``CallToolObservation``): OpenEnv's echo since, whose tool ``echo_message`` echoes. The
    layout is set from the server's ``/schema`` where the facade reads it
    (:attr:`Codec.bind_schema`), else from the first reply (an MCP echo never sends
    ``echoed_message``); then it stays. Either way the spaces are the same ``Text``.
    """

    __slots__ = ("mcp",)

    def __init__(self) -> None:
        self.mcp: bool | None = None

    def bind_schema(self, schema: Mapping[str, Any]) -> None:
        self.mcp = is_mcp_schema(schema)

    def _is_mcp(self, obs: Mapping[str, Any]) -> bool:
        if self.mcp is None:
            self.mcp = "echoed_message" not in obs
        return self.mcp

    def decode(self, obs: Mapping[str, Any]) -> str:
        text = _echo_tool_text(obs) if self._is_mcp(obs) else _echoed(obs)
        return to_printable(text)[:ECHO_MAX]

    def columns(self, columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> Any:
        texts = columns.get("echoed_message")
        if self.mcp or not isinstance(texts, list):
            return None  # decoded reply by reply
        self.mcp = False
        return printable_texts(texts, ECHO_MAX)

    def encode(self, action: Any) -> dict[str, Any]:
        if self.mcp:
            return {
                "type": CALL_TOOL,
                "tool_name": ECHO_TOOL,
                "arguments": {"message": str(action)},
            }
        return {"message": str(action)}

    def encode_many(self, actions: list[Any]) -> dict[str, list[Any]] | None:
        return None if self.mcp else {"message": [a if type(a) is str else str(a) for a in actions]}


def _echo_tool_text(obs: Mapping[str, Any]) -> str:
    """The MCP echo's text: the tool's result, or after reset the server's greeting."""
    if obs.get("tool_name") is None and obs.get("result") is None and obs.get("error") is None:
        metadata = obs.get("metadata")  # reset: {"status": "ready", "message": ...} (>= 0.4)
        message = metadata.get("message") if isinstance(metadata, Mapping) else None
        return message if isinstance(message, str) else ""
    return tool_result_text(obs)[0]


def codec() -> Codec:
    """The codec of ``openenv/Echo-v0``: Text observations and actions, on either server."""
    wire = _EchoWire()
    return Codec(
        "echo",
        text_space(ECHO_MAX),
        text_space(ECHO_MAX, min_length=1),
        wire.encode,
        wire.decode,
        wire.decode,
        decode_columns=wire.columns,
        encode_actions=wire.encode_many,
        bind_schema=wire.bind_schema,
        reads_metadata=True,
    )


def _echoed(obs: Mapping[str, Any]) -> str:
    value = obs.get("echoed_message")
    if not isinstance(value, str):
        raise RemoteProtocolError(
            f"observation field 'echoed_message' missing or not {str}: {value!r}"
        )
    return value


def _text_action(args: Mapping[str, Any]) -> str:
    return str(args["message"])


def text_interface() -> TextInterface:
    """The ``echo(message)`` tool; a plain-text answer is the message."""
    from openenv_gym.integrations.text import Param, TextInterface, text_answer

    return TextInterface(
        "echo",
        "Send a message to the echo environment, which echoes it back.",
        (Param("message", str, "The message to send."),),
        _text_action,
        text_answer,
        str,
        instructions="Answer with the message to send.",
        returns="The echoed message.",
    )
