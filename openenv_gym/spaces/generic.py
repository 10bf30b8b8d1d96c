""":func:`codec_from_schema`: the codec of any OpenEnv server, from its ``GET /schema``.

What ``openenv/Generic-v0`` acts with (``docs/spaces.md`` has the mapping table): the spaces
come from :mod:`openenv_gym.spaces.schema`, an MCP tool server's from
:mod:`openenv_gym.spaces.tools`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.spaces.codec import Codec
from openenv_gym.spaces.convert import _Dict
from openenv_gym.spaces.fields import _action_fields, _observation_fields
from openenv_gym.spaces.schema import (
    GENERIC,
    FieldSpaces,
    _brief,
    _show,
)
from openenv_gym.spaces.tools import _tool_codec, is_mcp_schema

__all__ = ["codec_from_schema"]


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
            f"JSON schemas, got {_brief(schema)}"
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
    actions = _action_fields(schema["action"], action_fields or {})
    observations = _observation_fields(schema["observation"], observation_fields or {})
    observation = _Dict(observations)
    keys = list(observations)

    def render(obs: Mapping[str, Any]) -> str:
        shown = keys or [k for k in obs if k != "metadata"]
        return "\n".join(f"{k}: {_show(obs.get(k))}" for k in shown)

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
        action = _Dict(actions)
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
