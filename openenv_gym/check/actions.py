"""An example action made from an action JSON schema (when none is given to the check).

The walking is :func:`openenv_gym.spaces.example_value`'s, the package's one JSON-schema
walker (the checks that read a schema's shape follow its ``$ref`` with
:func:`openenv_gym.spaces.deref`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_gym.spaces import example_value

__all__ = ["example_action"]


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
