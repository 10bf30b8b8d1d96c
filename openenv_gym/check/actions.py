"""Actions for the checks when none is given.

One made from the action JSON schema (:func:`example_action`), and the example actions of
the environments we know whose action schema fits (:func:`known_actions`).

The walking is :func:`openenv_gym.spaces.example_value`'s, the package's one JSON-schema
walker (the checks that read a schema's shape follow its ``$ref`` with
:func:`openenv_gym.spaces.deref`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_gym import envs
from openenv_gym.spaces import deref, example_value

__all__ = ["example_action", "known_actions"]


def example_action(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """Make a plausible action from an action JSON schema: its required fields only.

    Strings become ``"a"`` (repeated to ``minLength``), integers their ``minimum`` (or 0),
    numbers likewise, booleans ``false``, enums their first value; ``const``, ``default``
    and ``examples`` are used when given; ``$ref`` into ``$defs`` is followed. Returns
    None when some required field cannot be made (the caller then needs a given action).

    >>> example_action({"properties": {"message": {"type": "string"}}, "required": ["message"]})
    {'message': 'a'}
    >>> example_action(
    ...     {
    ...         "properties": {
    ...             "action_id": {"type": "integer", "minimum": 2},
    ...             "game_name": {"type": "string", "default": "catch"},
    ...         },
    ...         "required": ["action_id"],
    ...     }
    ... )
    {'action_id': 2}
    """
    try:
        value = example_value(schema)
    except LookupError:
        return None
    return value if isinstance(value, dict) else None


def known_actions(schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The example actions of known environments that fit this action JSON schema.

    An :class:`~openenv_gym.envs.EnvRecord`'s ``example_actions`` fit when each of their
    fields is a property of the schema and every required property is among them (a
    valid Wordle guess for any server with Wordle's or TextArena's action schema).

    >>> known_actions({"properties": {"message": {"type": "string"}}, "required": ["message"]})
    [{'message': '[crane]'}]
    >>> known_actions({"properties": {"action_id": {"type": "integer"}}})
    []
    """
    resolved = deref(schema, schema)
    if not isinstance(resolved, Mapping):
        return []
    properties = resolved.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = {k for k in resolved.get("required") or () if isinstance(k, str)}
    found: list[dict[str, Any]] = []
    for record in envs.environments().values():
        for action in record.example_actions:
            if set(action) <= set(properties) and required <= set(action) and action not in found:
                found.append(dict(action))
    return found
