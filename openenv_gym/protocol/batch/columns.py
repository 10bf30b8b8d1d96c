"""Version 2's columns (``docs/protocol.md`` section 3.9.2): maps of one entry per slot.

A column is a list, or an ndarray whose first dimension is the slot; ``numeric`` names the
ndarray columns that stand for JSON numbers. Here: checking a map of columns received
(:func:`parse_columns`) or about to be sent (:func:`encode_columns`), and turning columns
into the per-slot maps of version 1 (:func:`columns_to_rows`, :func:`column_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import numpy as np

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.openenv.messages import brief

__all__ = ["column_value", "columns_to_rows", "encode_columns", "is_map", "parse_columns"]


def parse_columns(
    value: Any, numeric: Any, n: int, name: str
) -> tuple[dict[str, Any], frozenset[str]]:
    """Check a map of columns (section 3.9): string keys, each column n entries long."""
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise RemoteProtocolError(f"{name!r} must be a map with string keys, got {brief(value)}")
    for key, column in value.items():
        if isinstance(column, np.ndarray):
            if column.ndim == 0 or column.shape[0] != n:
                raise RemoteProtocolError(
                    f"{name!r} column {brief(key)}: ndarray of shape {column.shape}, "
                    f"needs ({n}, ...)"
                )
        elif not isinstance(column, list) or len(column) != n:
            raise RemoteProtocolError(f"{name!r} column {brief(key)} must hold {n} entries")
    if not isinstance(numeric, list) or not all(
        isinstance(k, str) and isinstance(value.get(k), np.ndarray) for k in numeric
    ):
        raise RemoteProtocolError(
            f"'numeric' must list ndarray columns of {name!r}, got {brief(numeric)}"
        )
    return value, frozenset(numeric)


def column_value(column: Any, k: int, numeric: bool) -> Any:
    """Entry ``k`` of a column, as it would travel in a per-slot map.

    A ``numeric`` ndarray column stands for JSON numbers: its entry becomes Python numbers
    (``tolist``); another ndarray column gives a copy of its row.
    """
    if isinstance(column, np.ndarray):
        row = column[k]
        return row.tolist() if numeric else np.array(row)
    return column[k]


def columns_to_rows(
    columns: Mapping[str, Any], numeric: frozenset[str], n: int
) -> list[dict[str, Any]]:
    """Per-slot maps from a map of columns (the v1 form of v2's ``cols``)."""
    if not columns:
        return [{} for _ in range(n)]
    items = iter(columns.items())
    key, column = next(items)
    # the first column makes the maps (a dict display is far cheaper than dict(zip()))
    rows = [{key: value} for value in _values(key, column, numeric)]
    for key, column in items:
        for row, value in zip(rows, _values(key, column, numeric), strict=True):
            row[key] = value
    return rows


def _values(key: str, column: Any, numeric: frozenset[str]) -> Any:
    """A column's entries as the per-slot maps hold them (3.9.2)."""
    if isinstance(column, np.ndarray):
        return column.tolist() if key in numeric else [np.array(row) for row in column]
    return column


def is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, without the ABC check for a dict."""
    return value.__class__ is dict or isinstance(value, Mapping)


def encode_columns(columns: Mapping[str, Any], numeric: frozenset[str], n: int) -> dict[str, Any]:
    """Check a map of columns we are about to send (what :func:`parse_columns` accepts)."""
    for key, column in columns.items():
        if not isinstance(key, str):
            raise LocalProtocolError(f"column names must be strings, got {brief(key)}")
        if column.__class__ is list or isinstance(column, list | tuple):
            length = len(column)
        elif isinstance(column, np.ndarray):
            length = column.shape[0] if column.ndim else -1
        else:
            raise LocalProtocolError(
                f"column {key!r} must be a list or an ndarray, got {type(column).__name__}"
            )
        if length != n:
            raise LocalProtocolError(f"column {key!r} must hold {n} entries")
    if numeric and not all(isinstance(columns.get(k), np.ndarray) for k in numeric):
        raise LocalProtocolError("'numeric' may only name ndarray columns")
    return dict(columns)
