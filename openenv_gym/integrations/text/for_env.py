"""The text interface of an environment: its record's own, or one built for it.

:func:`text_interface` picks one for an environment: its own, when its
:class:`~openenv_gym.envs.EnvRecord` has one (Wordle, Echo, Catch), one built from the
server's action schema for ``openenv/Generic-v0`` (one per tool on an MCP server), and one
built from the action space for any other Gymnasium env (Text, Discrete, or a Dict of
those).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from openenv_gym import envs
from openenv_gym.assemble import fetch_schema
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.integrations.text.from_space import interface_from_space
from openenv_gym.integrations.text.from_tools import interface_from_tools
from openenv_gym.integrations.text.interface import TextInterface
from openenv_gym.spaces import GENERIC, ToolActions

__all__ = ["action_check", "text_interface"]


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
