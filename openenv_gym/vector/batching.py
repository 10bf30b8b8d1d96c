"""Outcomes to a step's arrays and infos, and single replies to one observation and info.

:class:`Batcher` turns the received pieces of a vector call into what ``step`` returns:
observations batched as Gymnasium batches them (a ``Box`` column becomes one ndarray, a
``Text`` column a tuple of str), rewards and flags as arrays, infos as
``VectorEnv._add_info`` builds them (:mod:`openenv_gym.infos`). Columns that came off the
wire stay columns (:meth:`Batcher.batch`); the general per-env assembly
(:meth:`Batcher.per_env_batch`) is for steps that also carry SAME_STEP resets or lost
servers, and for an :class:`~openenv_gym.exceptions.EnvErrorGroup`'s results.

:meth:`Batcher.observation` and :meth:`Batcher.info` are one reply's, which is all a
single env returns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from openenv_gym.infos import InfoColumns, Nested, batch_info_columns, batch_infos
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.replies import reply_info, wire_observation
from openenv_gym.spaces import Codec
from openenv_gym.transport.outcome import Outcome
from openenv_gym.vector.actions import take_column
from openenv_gym.vector.episodes import Received

__all__ = ["Batcher", "Taken", "place"]

Int = np.ndarray[Any, np.dtype[np.intp]]
Taken = list[tuple[Received, Int]]
"""Received pieces and, per piece, the positions taken from it."""
Step = tuple[Any, Any, Any, Any, dict[str, Any]]


class Batcher:
    """Builds what the facades return (see the module docstring).

    Args:
        codec: The env's codec.
        num_envs: How many sub-envs.
    """

    def __init__(self, codec: Codec, num_envs: int) -> None:
        self.codec = codec
        self.space = codec.observation_space
        self.num_envs = num_envs
        self.observed = codec.observed | {"metadata"}
        self._decode = codec.decode_observation
        self._decode_columns = codec.decode_columns

    # ------------------------------------------------------------------ one reply
    def observation(self, reply: ObservationReceived) -> Any:
        """The Gymnasium observation of one reply."""
        return self._decode(wire_observation(self.codec, reply.observation, reply.metadata))

    def info(self, reply: ObservationReceived) -> dict[str, Any]:
        """The ``info`` of one reply."""
        return reply_info(reply, self.codec.observed)

    def render(self, reply: ObservationReceived | None, mode: str | None) -> Any:
        """One reply as ``mode`` renders it: ANSI text, or an RGB picture (``"rgb_array"``).

        None without a reply or a mode.
        """
        if reply is None or mode is None:
            return None
        wire = wire_observation(self.codec, reply.observation, reply.metadata)
        if mode == "rgb_array" and self.codec.render_rgb is not None:
            return self.codec.render_rgb(wire)
        return self.codec.render(wire)

    # ------------------------------------------------------------------ batches
    def batch(self, taken: Taken, order: Int | None) -> Step:
        """The arrays of received pieces, in piece order or reordered by ``order``.

        Every position taken succeeded (the engine raised for failures first).
        """
        if any(r.fresh is not None or r.lost is not None for r, _ in taken):
            return self.per_env_batch(taken, order)
        single = len(taken) == 1
        received, sel = taken[0]
        if single and len(sel) == len(received.ids):  # one whole outcome: no copies
            ids, rewards = received.ids, received.rewards.copy()
            terminations, truncations = received.terminated.copy(), received.truncated.copy()
        else:
            ids = np.concatenate([r.ids[sel] for r, sel in taken])
            rewards = np.concatenate([r.rewards[sel] for r, sel in taken])
            terminations = np.concatenate([r.terminated[sel] for r, sel in taken])
            truncations = np.concatenate([r.truncated[sel] for r, sel in taken])
        obs = _join(self.space, [self._obs_piece(r, sel) for r, sel in taken])
        rows: Int | None = None  # None: row k of the batch is row k of the pieces
        if order is not None and not (len(ids) == len(order) and bool((ids == order).all())):
            where = np.empty(self.num_envs, dtype=np.intp)
            where[order] = np.arange(len(order))
            perm = np.argsort(where[ids], kind="stable")  # back to env order
            rewards, terminations, truncations = (
                rewards[perm],
                terminations[perm],
                truncations[perm],
            )
            obs = _take(self.space, obs, perm)
            rows = np.empty(len(ids), dtype=np.intp)
            rows[perm] = np.arange(len(ids))
        elif not single:
            rows = np.arange(len(ids))
        chunks = []
        start = 0
        for received, sel in taken:
            count = len(sel)
            at = None if rows is None else rows[start : start + count]
            chunks.extend(self._info_chunks(received.outcome, sel, at))
            start += count
        infos = batch_info_columns(len(ids), chunks)
        return obs, rewards, terminations, truncations, infos

    def _obs_piece(self, received: Received, sel: Int) -> Any:
        """The observations at ``sel`` of one outcome, in batched form."""
        outcome = received.outcome
        if not received.decoded:
            decode = self._decode_columns
            if decode is not None and outcome.columns is not None and not outcome.errors:
                received.piece = decode(outcome.columns, outcome.numeric, len(outcome.ids))
            else:
                received.piece = None
        piece = received.piece
        if piece is not None:
            return piece if len(sel) == len(received.ids) else _take(self.space, piece, sel)
        return self.stack([self.obs_at(outcome, k) for k in sel.tolist()])

    def stack(self, items: list[Any]) -> Any:
        """Single observations batched (a fresh buffer; Text spaces give a tuple)."""
        buffer = create_empty_array(self.space, len(items))
        assert buffer is not None
        return concatenate(self.space, items, buffer)

    def _info_chunks(self, outcome: Outcome, sel: Int, rows: Int | None) -> list[InfoColumns]:
        """The infos of the sub-envs at ``sel``, by column, placed at ``rows`` of the batch.

        ``rows`` None: the batch is exactly these sub-envs, in this order. An outcome that
        came as rows (JSON, version 1) is grouped by key set into columns first.
        """
        if outcome.columns is None:
            return self._row_info_chunks(outcome, sel, rows)
        full = len(sel) == len(outcome.ids)
        chunks: list[InfoColumns] = []
        observed = self.observed
        columns = {
            key: (column if full else take_column(column, sel))
            for key, column in outcome.columns.items()
            if key not in observed
        }
        if outcome.meta_columns is not None:
            nested = Nested(
                (key, column if full else [column[k] for k in sel.tolist()])
                for key, column in outcome.meta_columns.items()
            )
            if nested:  # every sub-env reports this metadata: the same chunk
                columns["metadata"] = nested
        if columns:
            chunks.append(InfoColumns(rows, columns, outcome.numeric))
        if outcome.meta_columns is None and outcome.meta_rows is not None:
            at = np.arange(len(sel)) if rows is None else rows
            present = [
                (row, meta)
                for row, k in zip(at.tolist(), sel.tolist(), strict=True)
                if (meta := outcome.meta_rows[k])
            ]
            if present:
                chunks.append(
                    InfoColumns(
                        np.array([row for row, _ in present], dtype=np.intp),
                        {"metadata": [meta for _, meta in present]},
                    )
                )
        return chunks

    def _row_info_chunks(self, outcome: Outcome, sel: Int, rows: Int | None) -> list[InfoColumns]:
        infos = [self.info_at(outcome, k) for k in sel.tolist()]
        at = np.arange(len(sel)) if rows is None else rows
        by_keys: dict[tuple[str, ...], list[int]] = {}
        for j, info in enumerate(infos):
            by_keys.setdefault(tuple(info), []).append(j)
        return [
            InfoColumns(at[members], {key: [infos[j][key] for j in members] for key in keys})
            for keys, members in by_keys.items()
            if keys
        ]

    def obs_at(self, outcome: Outcome | ObservationReceived, k: int) -> Any:
        """The observation of position ``k`` of an outcome (or of one reply)."""
        if isinstance(outcome, ObservationReceived):
            return self.observation(outcome)
        obs = outcome.observation(k)
        assert obs is not None, "a failed sub-env has no observation"
        if self.codec.reads_metadata:
            return self._decode(wire_observation(self.codec, obs, outcome.meta(k)))
        return self._decode(obs)

    def info_at(self, outcome: Outcome | ObservationReceived, k: int) -> dict[str, Any]:
        """The info of position ``k`` of an outcome (or of one reply; {} if it failed)."""
        reply = outcome if isinstance(outcome, ObservationReceived) else outcome.reply(k)
        return {} if reply is None else reply_info(reply, self.codec.observed)

    def per_env(self, taken: Taken) -> dict[int, tuple[Any, ...]]:
        """Each succeeded sub-env's ``(obs, reward, terminated, truncated, info)``."""
        results = {}
        for received, sel in taken:
            outcome = received.outcome
            lost = received.lost
            fresh = received.fresh
            for k in sel.tolist():
                if k in outcome.errors:
                    continue
                gone = lost is not None and bool(lost.mask[k])
                last, at = lost.final[k] if lost is not None and gone else (outcome, k)
                obs = self.obs_at(last, at)
                info = self.info_at(last, at)
                if fresh is not None and fresh[1][k] >= 0:
                    reset, at = fresh[0], int(fresh[1][k])
                    info = {"final_obs": obs, "final_info": info, **self.info_at(reset, at)}
                    obs = self.obs_at(reset, at)
                if gone:
                    info["server_lost"] = True
                results[int(received.ids[k])] = (
                    obs,
                    float(received.rewards[k]),
                    bool(received.terminated[k]),
                    bool(received.truncated[k]),
                    info,
                )
        return results

    def per_env_batch(self, taken: Taken, order: Int | None) -> Step:
        """The general (per-env) assembly: SAME_STEP resets, lost servers."""
        results = self.per_env(taken)
        ids = [int(r.ids[k]) for r, sel in taken for k in sel.tolist()]
        if order is not None:
            rank = {int(i): r for r, i in enumerate(order.tolist())}
            ids = sorted(ids, key=lambda i: rank[i])
        outs = [results[i] for i in ids]
        obs = self.stack([o[0] for o in outs])
        rewards = np.array([o[1] for o in outs], dtype=np.float64)
        terminations = np.array([o[2] for o in outs], dtype=np.bool_)
        truncations = np.array([o[3] for o in outs], dtype=np.bool_)
        return obs, rewards, terminations, truncations, batch_infos([o[4] for o in outs])


def merge_outcomes(outcomes: list[Outcome], ids: Int) -> Outcome:
    """One outcome over ``ids`` (in order) from several (SAME_STEP's resets)."""
    if len(outcomes) == 1:
        return outcomes[0]
    rows: list[dict[str, Any] | None] = []
    meta: list[dict[str, Any] | None] = []
    errors: dict[int, BaseException] = {}
    for outcome in outcomes:
        for k in range(len(outcome.ids)):
            if k in outcome.errors:
                errors[len(rows)] = outcome.errors[k]
            rows.append(outcome.observation(k))
            meta.append(outcome.meta(k))
    return Outcome(
        ids.tolist(),
        "reset",
        None,
        rows,
        frozenset(),
        np.concatenate([o.rewards for o in outcomes]),
        np.concatenate([o.dones for o in outcomes]),
        None,
        meta,
        errors,
    )


def place(infos: dict[str, Any], rows: Int, n: int) -> dict[str, Any]:
    """Infos batched over ``len(rows)`` sub-envs, spread to the rows of an n-env batch."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if isinstance(value, dict):
            out[key] = place(value, rows, n)
            continue
        if key.startswith("_") and isinstance(value, np.ndarray) and value.dtype == np.bool_:
            mask = np.zeros(n, dtype=np.bool_)
            mask[rows] = value
            out[key] = mask
            continue
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                array = np.full((n, *value.shape[1:]), None, dtype=object)
            else:
                array = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
            array[rows] = value
            out[key] = array
        else:
            out[key] = value
    return out


def _join(space: spaces.Space[Any], pieces: list[Any]) -> Any:
    """Batched observations of several pieces, one after the other."""
    if len(pieces) == 1:
        piece = pieces[0]
        return tuple(piece) if isinstance(piece, list) else piece
    first = pieces[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(pieces)
    if isinstance(space, spaces.Dict):
        return {key: _join(space[key], [p[key] for p in pieces]) for key in space.spaces}
    if isinstance(space, spaces.Tuple):
        return tuple(_join(sub, [p[j] for p in pieces]) for j, sub in enumerate(space.spaces))
    return tuple(item for piece in pieces for item in piece)


def _take(space: spaces.Space[Any], batch: Any, rows: Any) -> Any:
    """Batched observations at ``rows`` (an index array)."""
    if isinstance(batch, np.ndarray):
        return batch[rows]
    if isinstance(space, spaces.Dict):
        return {key: _take(space[key], batch[key], rows) for key in space.spaces}
    if isinstance(space, spaces.Tuple):
        return tuple(_take(sub, batch[j], rows) for j, sub in enumerate(space.spaces))
    items = [batch[k] for k in rows.tolist()]
    return items if isinstance(batch, list) else tuple(items)
