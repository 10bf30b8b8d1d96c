"""Finished episodes to disk: Minari's Arrow layout, or Parquet shards (``docs/recording.md``).

:class:`EpisodeWriter` takes :class:`Episode` records and writes them in batches of
``flush_every`` episodes, so memory holds at most that many finished episodes:

- **Minari's Arrow layout** (``format="minari"``), for spaces Minari can serialize (``Box``,
  ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Text``, and ``Dict`` / ``Tuple`` of
  them): ``PATH/data/metadata.json`` (the dataset's: spaces, counts, ``dataset_id``) and one
  folder per episode, ``PATH/data/<id>/metadata.json`` (``id``, ``total_steps``, ``seed``)
  and ``PATH/data/<id>/part-0.arrow``. ``minari.MinariDataset(PATH / "data")`` reads it.
- **Parquet shards** (``format="parquet"``), for any spaces: ``PATH/metadata.json`` and
  ``PATH/data/episodes-NNNNN.parquet``, one shard per flush, observations and actions as
  JSON text.

Both have one row per observation: an episode of ``n`` steps has ``n + 1`` rows, the reset's
first; row ``t`` holds the action taken on observation ``t`` and the reward, termination and
truncation it brought (the last row has no action and zeros: Minari's padding). Columns:
``episode_id``, ``seed`` (the reset's, null when none was given), ``observations``,
``actions``, ``rewards``, ``terminations``, ``truncations``, and ``infos`` (a struct of the
chosen info keys, each value as JSON text, null when that step's info lacks it).

pyarrow (and Minari, for the spaces' serialization) come with the ``record`` extra.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from openenv_gym.exceptions import ConfigurationError, UsageError

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "Episode",
    "EpisodeWriter",
    "minari_can_hold",
]

SCHEMA_VERSION = 1
"""The version of the layout this module writes (``metadata.json``'s ``openenv_gym.schema``)."""

FORMATS = ("auto", "minari", "parquet")
"""``auto``: Minari's Arrow layout where Minari can hold the spaces, else Parquet shards."""

Format = Literal["auto", "minari", "parquet"]

_INSTALL_HINT = "recording episodes needs pyarrow and minari: pip install 'openenv-gym[record]'"
_DATASET_ID = re.compile(r"(?:[\w:.-]+/)?[\w:.-]+-v\d+")


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ConfigurationError(_INSTALL_HINT) from exc
    return pyarrow


def _serialize_space(space: spaces.Space[Any]) -> str | None:
    """Minari's serialization of ``space``, or None when Minari cannot hold it."""
    try:
        from minari.serialization import serialize_space
    except ImportError as exc:
        raise ConfigurationError(_INSTALL_HINT) from exc
    try:
        text = serialize_space(space)
    except (NotImplementedError, TypeError, ValueError):
        return None
    return text if isinstance(text, str) else json.dumps(text)


def minari_can_hold(space: spaces.Space[Any]) -> bool:
    """Whether Minari can serialize ``space`` (and so the Arrow layout can hold it)."""
    if isinstance(space, spaces.Dict):
        return all(minari_can_hold(s) for s in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return all(minari_can_hold(s) for s in space.spaces)
    return isinstance(
        space,
        spaces.Box | spaces.Discrete | spaces.MultiDiscrete | spaces.MultiBinary | spaces.Text,
    )


@dataclass
class Episode:
    """One episode as recorded: the reset's observation, then one entry per step.

    Attributes:
        seed: The reset's seed (None: not seeded, e.g. an autoreset).
        observations: ``n + 1`` observations, the reset's first.
        actions: ``n`` actions.
        rewards: ``n`` rewards.
        terminations: ``n`` flags.
        truncations: ``n`` flags.
        infos: ``n + 1`` infos (the reset's first), only the chosen keys.
    """

    seed: int | None
    observations: list[Any]
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminations: list[bool] = field(default_factory=list)
    truncations: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        """The number of steps."""
        return len(self.actions)

    @property
    def finished(self) -> bool:
        """Whether the last step ended the episode."""
        return bool(self.actions) and (self.terminations[-1] or self.truncations[-1])

    def cut(self) -> None:
        """Mark an unfinished episode as truncated at its last step (Minari's rule)."""
        if self.actions and not self.terminations[-1]:
            self.truncations[-1] = True


def _jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as plain JSON values (NaN stays NaN)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _json(value: Any) -> str:
    return json.dumps(_jsonable(value), ensure_ascii=False, default=repr)


class _Columns:
    """Builds the Arrow arrays of a batch of episodes, in the space's Arrow type."""

    def __init__(self, pa: Any) -> None:
        self.pa = pa

    def space(self, space: spaces.Space[Any], values: list[Any], pad: int) -> Any:
        """``values`` (one per row) then ``pad`` empty rows, as Minari encodes them."""
        pa = self.pa
        if isinstance(space, spaces.Dict):
            names = list(space.spaces)
            children = [self.space(space[name], [v[name] for v in values], pad) for name in names]
            return pa.StructArray.from_arrays(children, names=names)
        if isinstance(space, spaces.Tuple):
            children = [
                self.space(sub, [v[i] for v in values], pad) for i, sub in enumerate(space.spaces)
            ]
            return pa.StructArray.from_arrays(
                children, names=[str(i) for i in range(len(children))]
            )
        if isinstance(space, spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary):
            size = math.prod(space.shape)
            flat = np.zeros((len(values) + pad, size), dtype=space.dtype)
            if values:
                flat[: len(values)] = np.asarray(values, dtype=space.dtype).reshape(len(values), -1)
            kind = pa.list_(pa.from_numpy_dtype(space.dtype), list_size=size)
            return pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), type=kind)
        if isinstance(space, spaces.Discrete):
            ints = np.zeros(len(values) + pad, dtype=space.dtype)
            ints[: len(values)] = np.asarray(values, dtype=space.dtype).reshape(-1)
            return pa.array(ints, type=pa.from_numpy_dtype(space.dtype))
        if isinstance(space, spaces.Text):
            return pa.array([str(v) for v in values] + [None] * pad, type=pa.string())
        raise ConfigurationError(f"Minari's layout cannot hold {space}")  # pragma: no cover

    def infos(self, keys: Sequence[str], infos: list[dict[str, Any]]) -> Any:
        pa = self.pa
        children = [
            pa.array([_json(i[k]) if k in i else None for i in infos], type=pa.string())
            for k in keys
        ]
        return pa.StructArray.from_arrays(children, names=list(keys))


class EpisodeWriter:
    """Writes :class:`Episode` records under ``path``, ``flush_every`` episodes at a time.

    Args:
        path: The folder (created; an existing recording there is refused).
        observation_space: Space of one observation.
        action_space: Space of one action.
        info_keys: The info keys to record (each value as JSON text).
        format: ``"auto"``, ``"minari"`` or ``"parquet"`` (:data:`FORMATS`).
        flush_every: Finished episodes kept in memory before they are written.
        dataset_id: Minari's ``dataset_id`` (default: the folder's name, ``-v0`` added).
        env_spec: The env's ``EnvSpec`` as JSON, stored for ``recover_environment``.

    Raises:
        ConfigurationError: A bad argument, a recording already at ``path``, ``"minari"``
            for spaces Minari cannot hold, or the ``record`` extra missing.
    """

    def __init__(
        self,
        path: str | Path,
        observation_space: spaces.Space[Any],
        action_space: spaces.Space[Any],
        *,
        info_keys: Sequence[str] = (),
        format: Format = "auto",
        flush_every: int = 64,
        dataset_id: str | None = None,
        env_spec: str | None = None,
    ) -> None:
        if format not in FORMATS:
            raise ConfigurationError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        if isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1:
            raise ConfigurationError(f"flush_every must be a positive integer, got {flush_every!r}")
        if isinstance(info_keys, str) or not all(isinstance(k, str) for k in info_keys):
            raise ConfigurationError(f"info_keys must be a list of str, got {info_keys!r}")
        self._pa = _pyarrow()
        self.path = Path(path)
        self.info_keys = tuple(dict.fromkeys(info_keys))
        holdable = minari_can_hold(observation_space) and minari_can_hold(action_space)
        if format == "minari" and not holdable:
            raise ConfigurationError(
                f"Minari cannot hold these spaces ({observation_space}, {action_space}): "
                "use format='parquet' (or 'auto')"
            )
        self.format: Literal["minari", "parquet"] = (
            "minari" if format == "minari" or (format == "auto" and holdable) else "parquet"
        )
        self.observation_space = observation_space
        self.action_space = action_space
        self.flush_every = flush_every
        self.dataset_id = dataset_id if dataset_id is not None else _default_id(self.path)
        if self.format == "minari" and not _DATASET_ID.fullmatch(self.dataset_id):
            raise ConfigurationError(
                f"dataset_id must be Minari's (namespace/)name-vN, got {self.dataset_id!r}"
            )
        self.root = self.path / "data" if self.format == "minari" else self.path
        if (self.root / "metadata.json").exists():
            raise ConfigurationError(f"{self.root} already holds a recording: choose another path")
        (self.path / "data").mkdir(parents=True, exist_ok=True)
        self._env_spec = env_spec
        self._pending: list[Episode] = []
        self._episodes = 0
        self._steps = 0
        self._shards = 0
        self._closed = False
        self._write_metadata()

    @property
    def total_episodes(self) -> int:
        """Episodes written so far."""
        return self._episodes

    def add(self, episode: Episode) -> None:
        """Queue a finished episode; the queue is written once it holds ``flush_every``."""
        if self._closed:
            raise UsageError("the episode writer is closed")
        if not episode.actions:
            return  # a reset alone: nothing happened
        self._pending.append(episode)
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the queued episodes now."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        if self.format == "minari":
            for episode in pending:
                self._write_minari(episode)
        else:
            self._write_shard(pending)
        self._write_metadata()

    def close(self) -> None:
        """Write what is queued; later :meth:`add` calls raise. Idempotent."""
        if not self._closed:
            self.flush()
            self._closed = True

    # ------------------------------------------------------------------ writing

    def _table(self, episodes: list[Episode], first_id: int, *, minari: bool) -> Any:
        pa = self._pa
        ids: list[int] = []
        seeds: list[int | None] = []
        observations: list[Any] = []
        actions: list[Any] = []
        rewards: list[float] = []
        terminations: list[bool] = []
        truncations: list[bool] = []
        infos: list[dict[str, Any]] = []
        for k, episode in enumerate(episodes):
            rows = len(episode) + 1
            ids += [first_id + k] * rows
            seeds += [episode.seed] * rows
            observations += episode.observations
            rewards += [float(r) for r in episode.rewards] + [0.0]
            terminations += [bool(t) for t in episode.terminations] + [False]
            truncations += [bool(t) for t in episode.truncations] + [False]
            infos += episode.infos
            actions += episode.actions
            if not minari:
                actions.append(None)
        columns: dict[str, Any] = {
            "episode_id": pa.array(ids, type=pa.int64()),
            "seed": pa.array(seeds, type=pa.int64()),
        }
        if minari:
            build = _Columns(pa)
            columns["observations"] = build.space(self.observation_space, observations, 0)
            columns["actions"] = build.space(self.action_space, actions, 1)
        else:
            columns["observations"] = pa.array([_json(o) for o in observations], type=pa.string())
            columns["actions"] = pa.array(
                [None if a is None else _json(a) for a in actions], type=pa.string()
            )
        columns["rewards"] = pa.array(rewards, type=pa.float64())
        columns["terminations"] = pa.array(terminations, type=pa.bool_())
        columns["truncations"] = pa.array(truncations, type=pa.bool_())
        if self.info_keys:
            columns["infos"] = _Columns(pa).infos(self.info_keys, infos)
        return pa.Table.from_pydict(columns)

    def _write_minari(self, episode: Episode) -> None:
        pa = self._pa
        episode_id = self._episodes
        folder = self.root / str(episode_id)
        folder.mkdir(parents=True, exist_ok=True)
        table = self._table([episode], episode_id, minari=True)
        with (
            pa.OSFile(str(folder / "part-0.arrow"), "wb") as sink,
            pa.ipc.new_file(sink, table.schema) as writer,
        ):
            writer.write_table(table)
        meta: dict[str, Any] = {"id": episode_id, "total_steps": len(episode)}
        if episode.seed is not None:
            meta["seed"] = episode.seed
        (folder / "metadata.json").write_text(json.dumps(meta))
        self._episodes += 1
        self._steps += len(episode)

    def _write_shard(self, episodes: list[Episode]) -> None:
        table = self._table(episodes, self._episodes, minari=False)
        name = f"episodes-{self._shards:05d}.parquet"
        self._pa.parquet.write_table(table, str(self.path / "data" / name))
        self._shards += 1
        self._episodes += len(episodes)
        self._steps += sum(len(e) for e in episodes)

    def _write_metadata(self) -> None:
        ours: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "format": self.format,
            "info_keys": list(self.info_keys),
        }
        meta: dict[str, Any] = {
            "total_episodes": self._episodes,
            "total_steps": self._steps,
            "dataset_id": self.dataset_id,
            "openenv_gym": ours,
        }
        if self.format == "minari":
            import minari

            meta.update(
                data_format="arrow",
                jpeg_encoding=False,
                observation_space=_serialize_space(self.observation_space),
                action_space=_serialize_space(self.action_space),
                minari_version=minari.__version__,
                dataset_size=round(_size(self.root) / 2**20, 1),
            )
            if self._env_spec is not None:
                meta["env_spec"] = self._env_spec
        else:
            ours.update(
                observation_space=str(self.observation_space),
                action_space=str(self.action_space),
                shards=self._shards,
            )
        temporary = self.root / "metadata.json.tmp"
        temporary.write_text(json.dumps(meta, indent=1))
        temporary.replace(self.root / "metadata.json")


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _default_id(path: Path) -> str:
    name = re.sub(r"[^\w.-]+", "-", path.resolve().name).strip("-") or "episodes"
    return name if _DATASET_ID.fullmatch(name) else f"{name}-v0"
