"""The spaces of a server's action and observation fields, from its JSON schemas.

:func:`action_converters` and :func:`observation_converters` pick the fields an action is made
of and those an observation shows, each with its converter (built by the one walker,
:class:`~openenv_gym.spaces.schema.SchemaReader`, or from a space the user chose). Used by
:func:`~openenv_gym.spaces.codec_from_schema` and the MCP tool codec.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.spaces.convert import Converter, FallbackConverter, converter_for_space
from openenv_gym.spaces.schema import (
    NOT_IN_ACTION,
    NOT_IN_OBSERVATION,
    FieldSpaces,
    SchemaReader,
    brief_json,
    default_of,
)

__all__ = [
    "action_converters",
    "observation_converters",
]


def _check_names(kind: str, chosen: FieldSpaces, names: Iterable[str]) -> None:
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{kind}_fields names {unknown}, not fields of the server's {kind}: "
            f"its fields are {sorted(names)}"
        )


def action_converters(
    document: Mapping[str, Any],
    chosen: FieldSpaces,
    *,
    what: str = "action",
    option: str = "action_fields",
    skip: frozenset[str] = NOT_IN_ACTION,
    allow_empty: bool = False,
    hint: Callable[[str], str] | None = None,
) -> dict[str, Converter]:
    """The converters of the fields an action (or a tool's arguments) is made of.

    ``what`` names the object in messages ("action", "tool 'move' argument"), ``option``
    the keyword that chooses spaces for its fields (``hint(field)``: how to, in Python);
    ``skip`` are never sent.
    """
    reader = SchemaReader(document, lossless=False)
    props, required = reader.properties(document)
    names = [k for k in props if k not in skip]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{option} names {unknown}, not fields of the server's {what}: "
            f"its fields are {sorted(names)}"
        )
    # the fields the server needs; those with a default are left to it, unless none is needed
    wanted = {k for k in names if k in required} or set(names)
    fields: dict[str, Converter] = {}
    unmapped: list[str] = []
    for key in names:
        if key in chosen:
            space = chosen[key]
            if space is None:
                if key in required:
                    raise ConfigurationError(
                        f"{what} field {key!r} is required by the server: it cannot be left out"
                    )
                continue
            fields[key] = converter_for_space(space, f"{option}[{key!r}]")
        elif key in wanted:
            conv = reader.build(props[key])
            if conv is not None:
                fields[key] = conv
            elif key in required:
                unmapped.append(key)
    if unmapped:
        detail = "; ".join(f"{k!r}: {brief_json(props[k])}" for k in unmapped)
        how = hint(unmapped[0]) if hint else f"{option}={{{unmapped[0]!r}: <space>, ...}}"
        raise ConfigurationError(
            f"no Gymnasium space fits the {what} field(s) {detail}. Give one with {how}, "
            "or pass your own codec= (see docs/spaces.md)"
        )
    if not fields and not allow_empty:
        raise ConfigurationError(
            f"the server's {what} has no field to act with (fields: {names}); choose spaces "
            f"with {option}= or pass your own codec= (see docs/spaces.md)"
        )
    return fields


def observation_converters(
    document: Mapping[str, Any],
    chosen: FieldSpaces,
    skip: frozenset[str] = NOT_IN_OBSERVATION,
) -> dict[str, Converter]:
    """The converters of the fields an observation shows (the others go to ``info``)."""
    reader = SchemaReader(document, lossless=True)
    props, _ = reader.properties(document)
    names = [k for k in props if k not in skip]
    _check_names("observation", chosen, names)
    fields: dict[str, Converter] = {}
    for key in names:
        if key in chosen:
            space = chosen[key]
            if space is not None:
                fields[key] = FallbackConverter(
                    converter_for_space(space, f"observation_fields[{key!r}]")
                )
            continue
        conv = reader.build(props[key])
        if conv is not None:
            fields[key] = FallbackConverter(conv, default_of(props[key]))
    return fields
