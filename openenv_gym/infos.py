"""Batched infos, as Gymnasium's ``VectorEnv._add_info`` builds them.

A vector env's ``infos`` is one dict: for every key some sub-env reported, an array of
length N and a bool mask ``_key``; nested dicts recurse; numbers get the dtype of the first
sub-env reporting them; ``final_obs`` and other objects become object arrays.

Two ways in, one result:

* :func:`batch_infos` -- from one info dict per sub-env (what Gymnasium does).
* :func:`batch_info_columns` -- from **columns**: the info fields of many sub-envs as they
  came off the wire (one list, or one ndarray, per field). No per-env dict is built, and a
  column every sub-env reported becomes its array in one call.

Both give exactly what Gymnasium gives where Gymnasium is well-defined; where a key's
values do not share a kind, Gymnasium truncates or raises and these widen the column
instead (an int column with a float becomes float64; a number column with ``None``
becomes an object column).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, cast

import numpy as np

__all__ = ["InfoColumns", "Nested", "batch_info_columns", "batch_infos", "info_at"]


class Nested(dict[str, Any]):
    """A column of dicts, itself by column: every row reports a dict with these keys.

    Key -> one entry per row, as in :attr:`InfoColumns.columns` (no numeric ndarrays).
    """

    def rows(self, count: int) -> list[dict[str, Any]]:
        """The per-row dicts it stands for."""
        if not self:
            return [{} for _ in range(count)]
        keys = list(self)
        columns = [c.rows(count) if isinstance(c, Nested) else c for c in self.values()]
        return [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]


@dataclass(frozen=True, slots=True)
class InfoColumns:
    """The info fields of some sub-envs, by column.

    Attributes:
        rows: The sub-envs (indices into the batch, distinct), in column order; None for
            every sub-env of the batch, in order.
        columns: Key -> one entry per row: a list, or an ndarray whose first dimension is
            the row. Every row reports every key of this chunk.
        numeric: The ndarray columns that stand for JSON numbers (their entries are Python
            numbers or lists of them, as a per-env info would hold).
    """

    rows: np.ndarray[Any, np.dtype[np.intp]] | None
    columns: Mapping[str, Any]
    numeric: frozenset[str] = field(default_factory=frozenset)

    def row_indices(self, n: int) -> np.ndarray[Any, np.dtype[np.intp]]:
        """:attr:`rows` as an array (``0..n-1`` when it is None)."""
        return np.arange(n) if self.rows is None else self.rows

    def count(self, n: int) -> int:
        """How many rows the chunk holds."""
        return n if self.rows is None else len(self.rows)


def _fits(kind: type, value: Any) -> bool:
    """Whether ``value`` goes into a ``kind`` column without loss."""
    if value is None:
        return False
    if issubclass(kind, bool | np.bool_):
        return isinstance(value, bool | np.bool_)
    if issubclass(kind, int | np.integer):
        return isinstance(value, int | np.integer)
    return isinstance(value, int | float | np.number)


_Index = np.ndarray[Any, np.dtype[np.intp]]


def _at(rows: list[int], at: _Index | None) -> _Index:
    """``rows`` as an index array: numpy indexes by one far faster than by a list."""
    return np.array(rows, dtype=np.intp) if at is None else at


def _numeric_column(
    n: int, kind: type, rows: list[int], values: list[Any], full: bool, at: _Index | None = None
) -> Any:
    """A column typed by its first value, as Gymnasium's ``_add_info`` types it.

    ``at``: ``rows`` as an index array, if the caller has it.

    Where a later value does not fit, Gymnasium raises (``None`` in a number column) or
    silently truncates (``0.75`` in an int column); here the column widens instead: to
    float64 when every value is a number, else to an object array.
    """
    kinds = set(map(type, values))
    if kinds == {kind}:  # one kind throughout: the usual case
        if full:
            return np.array(values, dtype=kind)
        same: np.ndarray[Any, Any] = np.zeros(n, dtype=kind)
        same[_at(rows, at)] = values
        return same
    if all(_fits(kind, v) for v in values):
        column: np.ndarray[Any, Any] = np.zeros(n, dtype=kind)
        column[_at(rows, at)] = values
        return column
    numbers = all(isinstance(v, int | float | np.number) for v in values) and not any(
        isinstance(v, bool) for v in values
    )
    array = np.zeros(n, dtype=np.float64) if numbers else np.full(n, None, dtype=object)
    for i, value in zip(rows, values, strict=True):
        array[i] = value
    return array


def _uniform(infos: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Any]]] | None:
    """Each key of ``infos[0]`` with its values, in order, if every info has exactly its keys.

    For rows that are not all plain dicts (plain dicts take :func:`_batch_dicts`): another
    Mapping's ``[]`` may answer a missing key (a ``defaultdict`` even adds it), so the key
    sets are compared before any ``[]``.
    """
    first = infos[0]
    width = len(first)
    if not all(map(width.__eq__, map(len, infos))):
        return None
    keys = first.keys()
    # ``==``, not ``keys.__eq__``: a dict's keys answer NotImplemented to another
    # Mapping's (which ``==`` then asks), and NotImplemented is truthy
    if not all(keys == info.keys() for info in infos):
        return None
    try:
        return [(key, [info[key] for info in infos]) for key in first]
    except KeyError:
        return None


def _objects(values: Sequence[Any], n: int) -> np.ndarray[Any, Any]:
    return np.fromiter(values, dtype=object, count=n)


def _full_column(key: str, values: Sequence[Any], n: int) -> Any:
    """The array of a key every sub-env reported (``values`` in env order)."""
    first = values[0]
    if key == "final_obs" or not isinstance(
        first, int | float | bool | dict | np.ndarray | np.generic
    ):
        # the first value is an object (str, list, None...): an object column, as
        # Gymnasium types a column by its first value (decided before any type count)
        return _objects(values, n)
    kinds = set(map(type, values))
    if kinds == {dict}:
        return _batch_dicts(values, len(values))
    if len(kinds) == 1:
        if first.__class__ in (int, float, bool):  # what np.array(values, dtype=...) gives
            return np.fromiter(values, dtype=first.__class__, count=n)
        if isinstance(first, np.number):
            return np.array(values, dtype=first.__class__)
    # mixed numbers, arrays: the general path decides
    return _partial_column(key, list(range(n)), list(values), n)


def _batch_uniform(columns: list[tuple[str, list[Any]]], n: int) -> dict[str, Any]:
    """Batch infos that all have the same keys (the usual case): whole columns at once."""
    out: dict[str, Any] = {}
    every = np.ones(n, dtype=np.bool_)
    for key, values in columns:
        out[key] = _full_column(key, values, n)
        out[f"_{key}"] = every.copy()
    return out


def batch_infos(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Batch per-env info dicts exactly as ``VectorEnv._add_info`` does, column by column.

    >>> out = batch_infos([{"score": 1}, {}, {"score": 3}])
    >>> out["score"].tolist(), out["_score"].tolist()
    ([1, 0, 3], [True, False, True])
    """
    n = len(infos)
    if not n:
        return {}
    if set(map(type, infos)) == {dict}:
        return _batch_dicts(cast("Sequence[dict[str, Any]]", infos), n)
    # another Mapping: its items() as it gives them
    uniform = _uniform(infos)
    if uniform is not None:
        return _batch_uniform(uniform, n)
    columns: dict[str, tuple[list[int], list[Any]]] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            column[0].append(i)
            column[1].append(value)
    out: dict[str, Any] = {}
    for key, (rows, values) in columns.items():
        at = np.array(rows, dtype=np.intp)
        out[key] = _partial_column(key, rows, values, n, at)
        out[f"_{key}"] = _mask(at, n)
    return out


def _batch_dicts(
    infos: Sequence[dict[str, Any]],
    n: int,
    rows: list[int] | None = None,
    at: _Index | None = None,
) -> dict[str, Any]:
    """:func:`batch_infos` of plain dicts placed at ``rows`` (ascending, distinct; None: 0..n-1).

    Keys in order of first appearance (row by row, each row's keys in its order), each
    gathered in one pass: a key every row holds is a whole column (at ``rows``), a key
    some rows hold is gathered from them. The usual case, every key of the first row in
    every row, costs one ``[]`` per value and one ``len`` per row: the rows of the first's
    length then hold exactly its keys, and only the longer ones are searched for others.
    A plain dict's ``[]`` raises on a missing key and lists a key once, so neither a
    failed gather nor a count can be wrong.
    """
    count = len(infos)
    first = infos[0]
    candidates: Sequence[int]  # the rows that may hold keys not in ``whole``
    try:
        whole = {key: [info[key] for info in infos] for key in first}
    except KeyError:  # a row lacks a key of the first: count every key's rows
        seen = Counter(chain.from_iterable(infos))
        whole = {key: [info[key] for info in infos] for key, k in seen.items() if k == count}
        keys: Mapping[str, Any] = seen
        candidates = range(count)
    else:
        width = len(first)
        sizes = list(map(len, infos))
        if sizes.count(width) == count:  # the same keys throughout
            keys = whole
            candidates = ()
        else:
            candidates = [j for j, size in enumerate(sizes) if size != width]
            keys = dict.fromkeys(chain(first, *(infos[j] for j in candidates)))
    out: dict[str, Any] = {}
    shared: np.ndarray[Any, Any] | None = None  # the mask of a key every row holds
    for key in keys:
        values = whole.get(key)
        if values is not None:
            if shared is None:
                if rows is None:
                    shared = np.ones(n, dtype=np.bool_)
                else:
                    at = _at(rows, at)
                    shared = _mask(at, n)
            if rows is None:
                out[key] = _full_column(key, values, n)
            else:
                out[key] = _partial_column(key, rows, values, n, at)
            out[f"_{key}"] = shared.copy()
            continue
        holders = [j for j in candidates if key in infos[j]]
        values = [infos[j][key] for j in holders]
        if rows is not None:
            holders = [rows[j] for j in holders]
        key_at = np.array(holders, dtype=np.intp)
        out[key] = _partial_column(key, holders, values, n, key_at)
        out[f"_{key}"] = _mask(key_at, n)
    return out


def _mask(rows: Sequence[int] | np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    mask = np.zeros(n, dtype=np.bool_)
    mask[rows] = True
    return mask


def _partial_column(
    key: str, rows: list[int], values: list[Any], n: int, at: _Index | None = None
) -> Any:
    """The array of a key some sub-envs reported (``rows`` ascending, ``values`` theirs)."""
    full = len(rows) == n
    first = values[0]
    kind = type(first)
    if key != "final_obs" and kind is dict:
        return _dict_column(rows, values, n, at)
    if key != "final_obs" and (kind in (int, float, bool) or isinstance(first, np.number)):
        return _numeric_column(n, kind, rows, values, full, at)
    if key != "final_obs" and isinstance(first, np.ndarray):
        array = np.zeros((n, *first.shape), dtype=first.dtype)
        for i, value in zip(rows, values, strict=True):
            array[i] = value
        return array
    objects = np.full(n, None, dtype=object)
    for i, value in zip(rows, values, strict=True):
        objects[i] = value
    return objects


def _dict_column(
    rows: list[int], values: list[Any], n: int, at: _Index | None = None
) -> dict[str, Any]:
    """:func:`batch_infos` of ``values`` placed at ``rows`` (``{}`` elsewhere; non-dicts too)."""
    if set(map(type, values)) == {dict} and len(set(rows)) == len(rows):
        if len(rows) == n:  # rows ascending and distinct: 0..n-1
            return _batch_dicts(values, n)
        return _batch_dicts(values, n, rows, at)
    nested: list[Mapping[str, Any]] = [{}] * n
    for i, value in zip(rows, values, strict=True):
        if isinstance(value, dict):
            nested[i] = value
    return batch_infos(nested)


def _entries(column: Any, numeric: bool, count: int) -> list[Any]:
    """A column's entries as a per-env info would hold them."""
    if isinstance(column, Nested):
        return list(column.rows(count))
    if isinstance(column, np.ndarray):
        # a per-env info holds Python numbers (numeric) or its own array (a 0-d one for a
        # 1-D column), never a view of the column
        return column.tolist() if numeric else [np.array(row) for row in column]
    return list(column)


def _array_column(key: str, column: np.ndarray[Any, Any], numeric: bool, n: int) -> Any | None:
    """A full ndarray column's batched array without going through Python values, if it can."""
    if key == "final_obs":
        return None
    if not numeric:  # the sub-envs reported arrays of one shape and dtype: stack them
        return np.array(column)
    if column.ndim == 1 and column.dtype.kind in "bif":
        # numbers of one kind: what np.array(values, dtype=int|float|bool) gives
        return np.array(column, dtype={"b": bool, "i": int, "f": float}[column.dtype.kind])
    return None


def batch_info_columns(n: int, chunks: Sequence[InfoColumns]) -> dict[str, Any]:
    """Batched infos from columns; equal to :func:`batch_infos` of the per-env dicts.

    Every sub-env in no chunk reported nothing. A key that one chunk holds for every
    sub-env, in order, becomes its array in one call; otherwise the values are gathered
    in env order and typed as :func:`batch_infos` types them.
    """
    if n == 0:
        return {}
    if len(chunks) == 1 and chunks[0].rows is None:
        return _every_row(n, chunks[0])
    parts = [_Part(i, chunk.rows, chunk.columns, chunk.numeric) for i, chunk in enumerate(chunks)]
    return _merged(n, parts, {})


@dataclass(slots=True)
class _Part:
    """A chunk's columns (or a Nested column of it) inside :func:`batch_info_columns`."""

    chunk: int  # the chunk's index: parts of one chunk share its rows
    rows: np.ndarray[Any, np.dtype[np.intp]] | None
    columns: Mapping[str, Any]
    numeric: frozenset[str]


@dataclass(slots=True)
class _Merge:
    """Where the rows of some chunks go in the batch: computed once per set of chunks."""

    rows: np.ndarray[Any, np.dtype[np.intp]]  # every chunk's rows, in chunk order
    order: list[int]  # positions in ``rows``, in env order (stable)
    take: Callable[[Sequence[Any]], list[Any]]  # values in chunk order -> in env order
    at: _Index  # the rows, in env order
    sorted_rows: list[int]
    mask: np.ndarray[Any, Any]


def _merge(n: int, holders: list[_Part]) -> _Merge:
    rows = np.concatenate([np.arange(n) if p.rows is None else p.rows for p in holders])
    order = np.argsort(rows, kind="stable")
    sorted_rows = rows[order]
    positions = order.tolist()
    take: Callable[[Sequence[Any]], list[Any]]
    if positions == list(range(len(positions))):  # the chunks came in env order
        take = list
    else:
        getter = operator.itemgetter(*positions)
        take = lambda values: list(getter(values))  # noqa: E731
    return _Merge(rows, positions, take, sorted_rows, sorted_rows.tolist(), _mask(sorted_rows, n))


_KINDS: dict[str, type] = {"b": bool, "i": int, "f": float}
_LISTED = (bool, int, float, dict)


def _holder_kind(key: str, holders: list[_Part], columns: list[Any]) -> type | None:
    """``bool``/``int``/``float``/``dict``, if every holder's entries are of that one type.

    A holder counts if it is a non-empty plain list of values of exactly one of these
    types (a bool is no int; a small chunk sends its numbers as a list), or, for the
    numbers, a ``numeric`` 1-D ndarray of that kind (its ``tolist()``: such numbers).
    Every value of the key is then of that type: a number column is what
    :func:`_full_column` / :func:`_numeric_column` give the values, and a dict column
    what :func:`_batch_dicts` gives them.
    """
    kind = None
    found: type | None
    for part, column in zip(holders, columns, strict=True):
        if type(column) is list:
            types = set(map(type, column))
            if len(types) != 1:
                return None
            found = types.pop()
            if found not in _LISTED:
                return None
        elif isinstance(column, np.ndarray) and column.ndim == 1 and key in part.numeric:
            found = _KINDS.get(column.dtype.kind)
            if found is None:
                return None
        else:
            return None
        if kind is None:
            kind = found
        elif found is not kind:
            return None
    return kind


def _merged(n: int, parts: list[_Part], merges: dict[tuple[int, ...], _Merge]) -> dict[str, Any]:
    keys: dict[str, list[_Part]] = {}
    for part in parts:
        for key in part.columns:
            holders = keys.get(key)
            if holders is None:
                keys[key] = [part]
            else:
                holders.append(part)
    out: dict[str, Any] = {}
    for key in _in_env_order(keys, parts, n):
        holders = keys[key]
        if len(holders) == 1 and holders[0].rows is None:  # one chunk holds every row
            part = holders[0]
            out[key] = _whole(key, part.columns[key], key in part.numeric, n)
            out[f"_{key}"] = np.ones(n, dtype=np.bool_)
            continue
        merge = _merge_of(n, holders, merges)
        out[key] = _merged_column(n, key, holders, merge, merges)
        out[f"_{key}"] = merge.mask.copy()
    return out


def _in_env_order(keys: dict[str, list[_Part]], parts: list[_Part], n: int) -> list[str]:
    """The keys in the order Gymnasium's ``_add_info`` meets them.

    That is by the first sub-env reporting each key, then in that sub-env's own order
    (its chunk's column order).
    """
    if len(parts) == 1:
        return list(keys)
    first = {
        part.chunk: (0 if part.rows is None else int(part.rows.min()) if len(part.rows) else n)
        for part in parts
    }
    position = {part.chunk: {key: i for i, key in enumerate(part.columns)} for part in parts}

    def rank(key: str) -> tuple[int, int]:
        part = min(keys[key], key=lambda p: first[p.chunk])
        return first[part.chunk], position[part.chunk][key]

    return sorted(keys, key=rank)


def _merge_of(n: int, holders: list[_Part], merges: dict[tuple[int, ...], _Merge]) -> _Merge:
    """The :class:`_Merge` of ``holders`` (made once per set of chunks)."""
    ids = tuple(part.chunk for part in holders)
    merge = merges.get(ids)
    if merge is None:
        merge = merges[ids] = _merge(n, holders)
    return merge


def _merged_dicts(
    n: int, holders: list[_Part], key: str, merge: _Merge, merges: dict[tuple[int, ...], _Merge]
) -> dict[str, Any]:
    """A key whose every holder is a list of plain dicts: what its values give, in env order.

    The values path would type the column (``_full_column`` / ``_dict_column``: plain
    dicts at distinct rows) and batch the dicts with :func:`_batch_dicts`; this calls it
    directly. A holder whose dicts are all empty adds no key and no value at any level
    (only the key's own mask, which is ``merge``'s): its rows are left out, so that the
    others' keys, every row of them holding them, take the whole-column path.
    """
    kept = [part for part in holders if any(part.columns[key])]
    if not kept:
        return {}
    if len(kept) < len(holders):
        merge = _merge_of(n, kept, merges)
    columns = [part.columns[key] for part in kept]
    values = merge.take(columns[0] if len(columns) == 1 else list(chain.from_iterable(columns)))
    if len(values) == n:
        return _batch_dicts(values, n)
    return _batch_dicts(values, n, merge.sorted_rows, merge.at)


def _merged_column(
    n: int, key: str, holders: list[_Part], merge: _Merge, merges: dict[tuple[int, ...], _Merge]
) -> Any:
    """The array of a key several chunks (or one, for some rows) hold."""
    columns = [part.columns[key] for part in holders]
    if key != "final_obs":
        if all(isinstance(column, Nested) for column in columns):
            return _merged(
                n,
                [
                    _Part(p.chunk, p.rows, column, frozenset())
                    for p, column in zip(holders, columns, strict=True)
                ],
                merges,
            )
        kind = _holder_kind(key, holders, columns)
        if kind is dict:
            return _merged_dicts(n, holders, key, merge, merges)
        if kind is not None:
            # numbers of one kind: what the per-env values would give, without them
            array: np.ndarray[Any, Any] = np.zeros(n, dtype=kind)
            for part, column in zip(holders, columns, strict=True):
                array[slice(None) if part.rows is None else part.rows] = column
            return array
    columns = [
        column
        if type(column) is list
        else _entries(column, key in part.numeric, n if part.rows is None else len(part.rows))
        for part, column in zip(holders, columns, strict=True)
    ]
    values = columns[0] if len(columns) == 1 else list(chain.from_iterable(columns))
    sorted_values = merge.take(values)
    if len(sorted_values) == n:
        return _full_column(key, sorted_values, n)
    return _partial_column(key, merge.sorted_rows, sorted_values, n, merge.at)


def _whole(key: str, column: Any, numeric: bool, n: int) -> Any:
    """The array of a key one chunk holds for every row, in order."""
    if isinstance(column, Nested) and key != "final_obs":
        return _every_row(n, InfoColumns(None, column))
    if isinstance(column, np.ndarray):
        array = _array_column(key, column, numeric, n)
        if array is not None:
            return array
    return _full_column(key, _entries(column, numeric, n), n)


def _every_row(n: int, chunk: InfoColumns) -> dict[str, Any]:
    """:func:`batch_info_columns` of one chunk holding every row, in order (the usual case)."""
    out: dict[str, Any] = {}
    numeric = chunk.numeric
    for key, column in chunk.columns.items():
        out[key] = _whole(key, column, key in numeric, n)
        out[f"_{key}"] = np.ones(n, dtype=np.bool_)
    return out


def info_at(infos: Mapping[str, Any], j: int) -> dict[str, Any]:
    """Sub-env ``j``'s info out of a vector env's batched infos (``_key`` masks honoured).

    >>> info_at(batch_infos([{"score": 1}, {}]), 0), info_at(batch_infos([{"score": 1}, {}]), 1)
    ({'score': np.int64(1)}, {})
    """
    info: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[j]:
            continue
        info[key] = info_at(value, j) if isinstance(value, Mapping) else value[j]
    return info
