"""Actions to columns, and the plan of requests a call sends.

:class:`Planner` checks a batch of actions against the action space in one pass
(:meth:`Planner.split`), turns it into wire columns (:meth:`Planner.encode`), and cuts an
operation on some sub-envs into one request per server and frame (:meth:`Planner.requests`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ActionBatchError, EnvErrorGroup, InvalidActionError
from openenv_gym.spaces import Codec, action_error
from openenv_gym.transport.dispatch import Request
from openenv_gym.transport.shards import Shard

__all__ = ["Planner", "is_scalar", "take_column"]

Int = np.ndarray[Any, np.dtype[np.intp]]
Bool = np.ndarray[Any, np.dtype[np.bool_]]


class Planner:
    """Actions and requests for the sub-envs of some shards.

    Args:
        codec: The env's codec (its action space and conversions).
        num_envs: How many sub-envs.
        shards: The shards, in order (their ``indices`` say which sub-envs they hold).
        frame_size: Most sub-envs per frame (None: one frame per server and operation).
    """

    def __init__(
        self, codec: Codec, num_envs: int, shards: Sequence[Shard], frame_size: int | None
    ) -> None:
        self.codec = codec
        self.space = codec.action_space
        self.num_envs = num_envs
        self.frame_size = frame_size
        self.shard_of = np.zeros(num_envs, dtype=np.intp)
        self.position = np.zeros(num_envs, dtype=np.intp)
        self.shards = len(shards)
        for k, shard in enumerate(shards):
            self.shard_of[shard.indices] = k
            self.position[shard.indices] = np.arange(len(shard.indices))

    # ------------------------------------------------------------------ actions
    def split(self, actions: Any, env_ids: Int, skip: Bool) -> list[Any]:
        """One action per sub-env of ``env_ids``, each checked against the action space.

        ``skip``: per env (all N), sub-envs whose action is ignored (they autoreset).

        Raises:
            ActionBatchError: Not a batch of ``len(env_ids)`` actions.
            EnvErrorGroup: Actions outside the action space, by env index.
        """
        per_env = self.per_env(actions, len(env_ids))
        contain = self.codec.contain_actions
        if contain is not None and contain(per_env):  # the usual case: one pass
            return per_env
        contains = self.codec.contains_action or self.space.contains
        bad = {
            int(i): InvalidActionError(action_error(self.space, a))
            for i, a in zip(env_ids.tolist(), per_env, strict=True)
            if not skip[i] and not contains(a)
        }
        if bad:
            raise EnvErrorGroup(f"{len(bad)} action(s) outside the action space", bad)
        return per_env

    def per_env(self, actions: Any, count: int) -> list[Any]:
        """One action per sub-env from a batch of ``count``.

        A batch is a sequence or array of per-env actions, an array-like (a torch tensor),
        or, for a ``Dict`` action space, Gymnasium's batched form: a mapping of batches
        (what ``action_space.sample()`` gives).

        Raises:
            ActionBatchError: Not a batch of ``count`` actions.
        """
        single = self.space
        if isinstance(actions, Mapping):
            if not isinstance(single, spaces.Dict):
                raise ActionBatchError(
                    f"got a mapping of actions, but the action space {single} is not a Dict"
                )
            return _dict_rows(single, actions, count)
        if is_scalar(actions) and hasattr(actions, "__array__"):
            actions = np.asarray(actions)  # a tensor of the policy's
        if is_scalar(actions):
            raise ActionBatchError(
                f"got the single action {actions!r:.200}, not a batch; pass a sequence or an "
                f"array of {count} action(s), one per sub-environment"
            )
        found = len(actions)
        if found != count:
            raise ActionBatchError(
                f"got {found} actions for {count} sub-environments "
                f"(num_envs={self.num_envs}); pass exactly one action per sub-environment"
            )
        return list(actions)

    def encode(self, actions: list[Any]) -> Any:
        """The wire actions: columns when the codec can, else one map per action."""
        encode_many = self.codec.encode_actions
        if encode_many is not None:
            columns = encode_many(actions)
            if columns is not None:
                return columns
        encode = self.codec.encode_action
        return [encode(a) for a in actions]

    # ------------------------------------------------------------------ requests
    def requests(self, op_: str, ids: Int, args: Any) -> list[Request]:
        """One request per shard and frame, in env order; ``args`` rows or columns."""
        requests: list[Request] = []
        size = self.frame_size
        single = self.shards == 1
        shard_of = None if single else self.shard_of[ids]
        for k in range(self.shards):
            if shard_of is None:
                chosen: Any = slice(None)
                shard_ids = ids
            else:
                chosen = np.flatnonzero(shard_of == k)
                if not len(chosen):
                    continue
                shard_ids = ids[chosen]
            shard_args = _take_args(args, chosen)
            positions = shard_ids if single else self.position[shard_ids]
            count = len(shard_ids)
            if size is None or count <= size:
                requests.append(Request(k, op_, positions.tolist(), shard_ids, shard_args))
                continue
            for start in range(0, count, size):
                window = slice(start, start + size)
                requests.append(
                    Request(
                        k,
                        op_,
                        positions[window].tolist(),
                        shard_ids[window],
                        _take_args(shard_args, window),
                    )
                )
        return requests


def is_scalar(actions: Any) -> bool:
    """Whether ``actions`` is one action rather than a batch (a sequence, array or dict)."""
    if isinstance(actions, np.ndarray):
        return actions.ndim == 0
    if isinstance(actions, str | bytes):
        return True
    return not isinstance(actions, Sequence | Mapping)


def _dict_rows(space: spaces.Dict, batch: Mapping[str, Any], count: int) -> list[Any]:
    """Per-env dicts from a ``Dict`` space's batched form (keys left out stay out)."""
    rows: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, column in batch.items():
        sub = space.spaces.get(key)
        if sub is None:
            raise ActionBatchError(f"unknown action key {key!r}; the space has {list(space)}")
        if isinstance(column, Mapping) and isinstance(sub, spaces.Dict):
            values = _dict_rows(sub, column, count)
        else:
            if is_scalar(column) and hasattr(column, "__array__"):
                column = np.asarray(column)
            if is_scalar(column) or len(column) != count:
                got = "one value" if is_scalar(column) else f"{len(column)} values"
                raise ActionBatchError(
                    f"action key {key!r}: got {got}, need one per sub-environment ({count})"
                )
            values = list(column)
        for row, value in zip(rows, values, strict=True):
            row[key] = value
    return rows


def _take_args(args: Any, chosen: Any) -> Any:
    """Rows or columns of ``args`` at ``chosen`` (a slice or an index array)."""
    if args is None or (isinstance(chosen, slice) and chosen == slice(None)):
        return args
    if isinstance(args, Mapping):
        return {key: take_column(column, chosen) for key, column in args.items()}
    if isinstance(chosen, slice):
        return args[chosen]
    return [args[k] for k in chosen.tolist()]


def take_column(column: Any, chosen: Any) -> Any:
    """Entries of one column (a list or an ndarray) at ``chosen`` (a slice or indices)."""
    if isinstance(column, np.ndarray) or isinstance(chosen, slice):
        return column[chosen]
    return [column[k] for k in chosen.tolist()]
