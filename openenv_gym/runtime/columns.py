"""Observation models -> the columns of a batched reply (``docs/protocol.md`` section 3.9).

The runtime steps many environment instances per request and gets one observation model
per slot. :func:`result_table` turns them into one :class:`~openenv_gym.protocol.batch.ResultTable`
without a ``model_dump`` per slot where the fields are known: a plan made once per
observation class says, per field, whether its values go out as they are (strings,
booleans, numbers of mixed kinds), stacked into one ndarray (numbers of one kind, lists of
numbers of one length), or through one Pydantic serialiser call for the whole column
(nested models, lists of them, dicts, enums...). Classes with their own serialisers, extra
fields or computed fields are dumped per slot, as before.

The result is the same data ``model_dump`` would give slot by slot (python mode), so a
version-1 client, which gets one map per slot made from these columns, sees exactly what
it saw before.
"""

from __future__ import annotations

import math
import operator
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter

from openenv_gym.protocol import batch as bp
from openenv_gym.runtime.environment import ObservationBatch

__all__ = ["batch_table", "result_table"]

_WIRE_APART = frozenset({"done", "reward", "metadata"})  # travel in their own keys
_PLAIN = (str, bool)  # written as they are
_NUMBERS = {int: np.int64, float: np.float64}
_STACK_FROM = 16  # fewer numbers (or lists of them) go out as plain arrays: cheaper there


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    get: Callable[[Any], Any]
    kind: str  # "plain" | "raw" | "number" | "numbers" | "dump"
    number: type | None = None
    dump: Callable[[list[Any]], list[Any]] | None = None


@dataclass(frozen=True, slots=True)
class _Plan:
    fields: tuple[_Field, ...] | None  # None: dump each slot with the model's serialiser
    serializer: Any
    names: tuple[str, ...] | None = None  # the fields' names, in order
    name_set: frozenset[str] | None = None
    specs: dict[str, _Field] | None = None  # by name


_plans: dict[type, _Plan] = {}


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _field_plan(name: str, annotation: Any) -> _Field:
    get = operator.attrgetter(name)
    bare = _strip_optional(annotation)
    if bare in _PLAIN:
        return _Field(name, get, "plain")
    if bare in _NUMBERS:
        return _Field(name, get, "number", bare)
    if typing.get_origin(bare) is list:
        (item,) = typing.get_args(bare) or (Any,)
        if item in _NUMBERS:
            return _Field(name, get, "numbers", item)
    try:
        adapter: TypeAdapter[list[Any]] = TypeAdapter(list[annotation])
    except PydanticSchemaGenerationError:  # an arbitrary type: dumped as it is
        return _Field(name, get, "raw")
    return _Field(name, get, "dump", dump=adapter.dump_python)


def _plan(model: type) -> _Plan:
    plan = _plans.get(model)
    if plan is not None:
        return plan
    serializer = getattr(model, "__pydantic_serializer__", None)
    fields: tuple[_Field, ...] | None = None
    if isinstance(model, type) and issubclass(model, BaseModel) and not _custom(model):
        fields = tuple(
            _field_plan(name, info.annotation)
            for name, info in model.model_fields.items()
            if name not in _WIRE_APART and not info.exclude
        )
    if fields is None:
        plan = _plans[model] = _Plan(None, serializer)
    else:
        names = tuple(spec.name for spec in fields)
        specs = dict(zip(names, fields, strict=True))
        plan = _plans[model] = _Plan(fields, serializer, names, frozenset(names), specs)
    return plan


def _custom(model: type[BaseModel]) -> bool:
    """Whether ``model_dump`` does more than dump the declared fields."""
    decorators = model.__pydantic_decorators__
    config = model.model_config
    return bool(
        decorators.model_serializers
        or decorators.field_serializers
        or model.model_computed_fields
        or config.get("extra") == "allow"
        or config.get("serialize_by_alias")
        or any(getattr(info, "exclude_if", None) for info in model.model_fields.values())
    )


def _column(spec: _Field, values: list[Any], ok: list[int], n: int) -> tuple[Any, bool]:
    """``(column, numeric)`` of one field; ``values`` are the successful slots' (at ``ok``)."""
    if spec.kind == "dump":
        assert spec.dump is not None
        values = spec.dump(values)
    elif spec.kind == "raw" and values and all(isinstance(v, np.ndarray) for v in values):
        first = values[0]
        if all(v.shape == first.shape and v.dtype == first.dtype for v in values):
            return _spread(np.stack(values), ok, n), False  # one array, rows are the slots'
        values = list(values)
    elif (
        spec.kind == "number"
        and len(values) >= _STACK_FROM
        and set(map(type, values)) == {spec.number}
    ):
        return _spread(np.array(values, dtype=_NUMBERS[spec.number]), ok, n), True  # type: ignore[index]
    elif spec.kind == "numbers" and len(values) >= _STACK_FROM:
        try:
            array = np.array(values)
        except ValueError:  # ragged
            array = None
        if (
            array is not None and array.ndim == 2 and array.dtype == _NUMBERS[spec.number]  # type: ignore[index]
        ):
            return _spread(array, ok, n), True
    if len(ok) == n:
        return values, False
    column: list[Any] = [None] * n
    for k, value in zip(ok, values, strict=True):
        column[k] = value
    return column, False


_PLAIN_REWARDS = frozenset({float, int, type(None)})  # numpy converts these as float() does
_BOOLS = {bool}


def _rewards(values: Sequence[Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """A batch's rewards as float64, NaN for None (as ``float`` converts each)."""
    if set(map(type, values)) <= _PLAIN_REWARDS:
        return np.array(values, dtype=np.float64)
    return np.array([math.nan if r is None else float(r) for r in values], dtype=np.float64)


def _dones(values: Sequence[Any]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """A batch's dones as bool (as ``bool`` converts each)."""
    if set(map(type, values)) == _BOOLS:
        return np.array(values, dtype=np.bool_)
    return np.array(list(map(bool, values)), dtype=np.bool_)


def _placed(values: list[Any], ok: list[int], n: int) -> list[Any]:
    if len(ok) == n:
        return values
    column: list[Any] = [None] * n
    for k, value in zip(ok, values, strict=True):
        column[k] = value
    return column


def _spread(array: np.ndarray[Any, Any], ok: list[int], n: int) -> np.ndarray[Any, Any]:
    if len(ok) == n:
        return array
    full = np.zeros((n, *array.shape[1:]), dtype=array.dtype)
    full[ok] = array
    return full


def _metadata(found: list[Any], ok: list[int], n: int) -> Any:
    """Metadata by column when every slot has the same non-empty keys, else one map per slot."""
    if len(ok) == n and found and all(found):
        keys = found[0].keys()
        if all(m.keys() == keys for m in found):
            return {key: [m[key] for m in found] for key in keys}
    if not any(found):
        return None
    rows: list[Any] = [None] * n
    for k, meta in zip(ok, found, strict=True):
        rows[k] = meta or None
    return rows


def result_table(
    results: Sequence[BaseModel | bp.SlotError], *, version: int = 2
) -> bp.ResultTable:
    """One request's results (an observation model or an error per slot) as a table.

    Args:
        results: Per slot, in request order.
        version: The connection's protocol version; version 1 takes one map per slot.
    """
    n = len(results)
    errors = {k: r for k, r in enumerate(results) if r.__class__ is bp.SlotError}
    observations: list[Any]
    if errors:
        ok = [k for k in range(n) if k not in errors]
        observations = [results[k] for k in ok]
        rewards = [math.nan] * n
        dones = [False] * n
        for k, obs in zip(ok, observations, strict=True):
            reward = obs.reward
            rewards[k] = math.nan if reward is None else float(reward)
            dones[k] = bool(obs.done)
    else:
        ok, observations = _ALL[n] if n < len(_ALL) else list(range(n)), list(results)
        rewards = [math.nan if (r := o.reward) is None else float(r) for o in observations]
        dones = [bool(o.done) for o in observations]
    metadata = _metadata([getattr(o, "metadata", None) or {} for o in observations], ok, n)
    first = observations[0].__class__ if observations else None
    plan = (
        _plan(first)
        if first is not None and all(o.__class__ is first for o in observations)
        else None
    )
    reward_array = np.array(rewards, dtype=np.float64)
    done_array = np.array(dones, dtype=np.bool_)
    if plan is None or plan.fields is None or version < 2:
        rows: list[dict[str, Any] | None] = [None] * n
        apart = set(_WIRE_APART)
        for k, obs in zip(ok, observations, strict=True):
            serializer = typing.cast(BaseModel, obs).__pydantic_serializer__
            rows[k] = serializer.to_python(obs, exclude=apart)
        return bp.ResultTable(rows, reward_array, done_array, frozenset(), metadata, errors)
    columns: dict[str, Any] = {}
    numeric = set()
    for spec in plan.fields:
        column, is_numeric = _column(spec, list(map(spec.get, observations)), ok, n)
        columns[spec.name] = column
        if is_numeric:
            numeric.add(spec.name)
    return bp.ResultTable(columns, reward_array, done_array, frozenset(numeric), metadata, errors)


_ALL = [list(range(n)) for n in range(65)]


def batch_table(
    batch: ObservationBatch,
    model: type,
    results: Sequence[Any],
    covered: Sequence[int],
    version: int = 2,
) -> bp.ResultTable:
    """The table of a request whose slots at ``covered`` a batched hook answered.

    Args:
        batch: The hook's observations, one entry per covered slot.
        model: The observation model (its fields decide what is stacked).
        results: Per slot of the request: a SlotError, or None (answered by ``batch``).
        covered: Positions in the request of the batch's entries, in order.
        version: The connection's protocol version.

    Raises:
        ValueError: The batch's fields are not the model's.
    """
    n = len(results)
    plan = _plan(model)
    names = plan.names if plan.names is not None else tuple(batch.fields)
    if plan.name_set is not None and batch.fields.keys() != plan.name_set:
        raise ValueError(f"the batch's fields {sorted(batch.fields)} are not {sorted(names)}")
    if results.count(None) == n and len(covered) == n:  # every slot answered by the batch
        errors: dict[int, bp.SlotError] = {}
        keep, ok, whole = _ALL[n] if n < len(_ALL) else list(range(n)), list(covered), True
        rewards, dones = _rewards(batch.rewards), _dones(batch.dones)
    else:
        errors = {k: r for k, r in enumerate(results) if isinstance(r, bp.SlotError)}
        keep = [j for j in range(len(covered)) if covered[j] not in errors]
        ok = [covered[j] for j in keep]
        whole = len(keep) == len(covered)
        rewards = np.full(n, math.nan)
        dones = np.zeros(n, dtype=np.bool_)
        for j, k in zip(keep, ok, strict=True):
            reward = batch.rewards[j]
            rewards[k] = math.nan if reward is None else float(reward)
            dones[k] = bool(batch.dones[j])
    columns: dict[str, Any] = {}
    numeric = set()
    specs = plan.specs or {}
    for name in names:
        values = batch.fields[name]
        chosen = values if whole else [values[j] for j in keep]
        spec = specs.get(name)
        if spec is not None and spec.kind in ("number", "numbers"):
            column, is_numeric = _column(spec, chosen, ok, n)
        else:  # already what model_dump gives
            column, is_numeric = _placed(chosen, ok, n), False
        columns[name] = column
        if is_numeric:
            numeric.add(name)
    metadata: Any = batch.metadata
    if isinstance(metadata, dict):
        if len(ok) != n:
            metadata = _placed(
                [{key: col[j] for key, col in metadata.items()} or None for j in keep], ok, n
            )
    elif metadata is not None:  # one dict per instance: columns when they share keys
        metadata = _metadata([metadata[j] or {} for j in keep], ok, n)
    return bp.ResultTable(columns, rewards, dones, frozenset(numeric), metadata, errors)
