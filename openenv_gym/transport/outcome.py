"""What one request to one shard gave: an :class:`Outcome`, the results of its sub-envs by column.

A batched reply arrives as columns (one per observation field, a reward column, a done
column) and stays so; JSON replies, one per sub-env, are put in the same form (or kept as
rows when they did not come as columns), so callers never care which protocol a server
speaks. Also the two forms of a request's arguments (:data:`Args`) and their ids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import ObservationReceived

__all__ = ["Args", "Ids", "Outcome", "rows_of"]

Args = Sequence[Mapping[str, Any]] | Mapping[str, Any] | None
"""Per-request arguments: one map per sub-env, or a map of columns (field -> n entries)."""

Ids = Sequence[int] | np.ndarray[Any, Any]
"""Global sub-env indices of a request, in request order (a list or an int array)."""


def rows_of(
    args: Args, n: int, numeric: frozenset[str] = frozenset()
) -> Sequence[Mapping[str, Any]]:
    """Per-sub-env maps from ``args`` in either form."""
    if args is None:
        return [{} for _ in range(n)]
    if isinstance(args, Mapping):
        return bp.columns_to_rows(args, numeric, n)
    return list(args)


@dataclass(slots=True)
class Outcome:
    """The results of one request on one shard, in request order, by column.

    Attributes:
        ids: Global sub-env indices, in request order.
        op: ``"reset"``, ``"step"`` or ``"state"``.
        columns: Observation field -> column (one entry per sub-env; a list, or an
            ndarray whose first dimension is the sub-env), or None: see :attr:`rows`.
        rows: One observation (or state) map per sub-env (None where it failed), when
            the results did not come as columns.
        numeric: ndarray columns that stand for JSON numbers.
        rewards: float64, NaN where the server sent no reward (or the sub-env failed).
        dones: bool.
        meta_columns: Metadata key -> list, or None: see :attr:`meta_rows`.
        meta_rows: One metadata map (or None) per sub-env, or None when none had any.
        errors: Position in :attr:`ids` -> the exception that failed that sub-env.
        failure: Set when the whole request failed (then every position is in errors).
    """

    ids: Ids
    op: str
    columns: dict[str, Any] | None = None
    rows: list[dict[str, Any] | None] | None = None
    numeric: frozenset[str] = frozenset()
    rewards: np.ndarray[Any, np.dtype[np.float64]] = field(default_factory=lambda: np.zeros(0))
    dones: np.ndarray[Any, np.dtype[np.bool_]] = field(
        default_factory=lambda: np.zeros(0, dtype=bool)
    )
    meta_columns: dict[str, list[Any]] | None = None
    meta_rows: list[dict[str, Any] | None] | None = None
    errors: dict[int, BaseException] = field(default_factory=dict)
    failure: BaseException | None = None

    @classmethod
    def failed(cls, ids: Ids, op_: str, error: BaseException) -> Outcome:
        """Every sub-env of the request failed with ``error``."""
        n = len(ids)
        return cls(
            ids,
            op_,
            rows=[None] * n,
            rewards=np.full(n, math.nan),
            dones=np.zeros(n, dtype=bool),
            errors=dict.fromkeys(range(n), error),
            failure=error,
        )

    def observation(self, k: int) -> dict[str, Any] | None:
        """Position ``k``'s observation (or state) as a map; None if it failed."""
        if k in self.errors:
            return None
        if self.columns is None:
            assert self.rows is not None
            return self.rows[k]
        numeric = self.numeric
        return {key: bp.column_value(col, k, key in numeric) for key, col in self.columns.items()}

    def meta(self, k: int) -> dict[str, Any] | None:
        """Position ``k``'s metadata, or None."""
        if k in self.errors:
            return None
        if self.meta_columns is not None:
            return {key: col[k] for key, col in self.meta_columns.items()} or None
        return None if self.meta_rows is None else self.meta_rows[k]

    def reward(self, k: int) -> float | None:
        """Position ``k``'s reward as the server sent it (None: no reward)."""
        value = float(self.rewards[k])
        return None if value != value else value

    def reply(self, k: int) -> ObservationReceived | None:
        """Position ``k`` as one OpenEnv observation reply (None if it failed)."""
        obs = self.observation(k)
        if obs is None:
            return None
        return ObservationReceived(obs, self.reward(k), bool(self.dones[k]), self.meta(k))
