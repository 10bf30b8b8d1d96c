"""``RecordEpisodes``: every episode an env plays, written to disk as it finishes.

The wrappers follow the env's episodes (for a vector env, each sub-env's, through its
autoreset mode) and hand each finished one to an
:class:`~openenv_gym.wrappers.storage.EpisodeWriter`; ``close()`` writes the rest, an
unfinished episode marked truncated at its last step (as Minari's ``DataCollector`` does).
The layout and its columns: ``docs/recording.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import iterate

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.infos import info_at
from openenv_gym.wrappers.storage import Episode, EpisodeWriter, Format

__all__ = ["RecordEpisodes", "RecordVectorEpisodes"]


def _chosen(info: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: info[k] for k in keys if k in info}


def _spec_json(env: Any) -> str | None:
    spec = getattr(env, "spec", None)
    if spec is None:
        return None
    try:
        text: str = spec.to_json()
    except (TypeError, ValueError):
        return None  # kwargs that are not JSON (a codec, a provider)
    return text


def _writer(
    env: Any,
    path: str | Path,
    observation_space: Any,
    action_space: Any,
    info_keys: Sequence[str],
    format: Format,
    flush_every: int,
    dataset_id: str | None,
) -> EpisodeWriter:
    return EpisodeWriter(
        path,
        observation_space,
        action_space,
        info_keys=info_keys,
        format=format,
        flush_every=flush_every,
        dataset_id=dataset_id,
        env_spec=_spec_json(env),
    )


class RecordEpisodes(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Record every episode of ``env`` under ``path``, as each one finishes.

    ``RecordEpisodes(envs, path)`` on a vector env gives a :class:`RecordVectorEpisodes`.

    Example:
        >>> import tempfile, gymnasium, minari, openenv_gym
        >>> from openenv_gym.wrappers import RecordEpisodes
        >>> folder = tempfile.mkdtemp()
        >>> env = RecordEpisodes(gymnasium.make("openenv/Catch-v0"), folder + "/catch")
        >>> obs, info = env.reset(seed=0)
        >>> for _ in range(9):
        ...     obs, reward, terminated, truncated, info = env.step(1)
        >>> env.close()
        >>> dataset = minari.MinariDataset(folder + "/catch/data")
        >>> dataset.total_episodes, dataset.total_steps
        (1, 9)

    Args:
        env: A Gymnasium env (any, ours or not).
        path: The folder to write (``docs/recording.md``).
        info_keys: The info keys to record alongside (default none).
        format: ``"auto"`` (Minari's Arrow layout where Minari can hold the spaces, else
            Parquet shards), ``"minari"`` or ``"parquet"``.
        flush_every: Finished episodes held in memory before they are written.
        dataset_id: Minari's ``dataset_id`` (default: the folder's name plus ``-v0``).

    Raises:
        ConfigurationError: A bad argument, a recording already at ``path``, or the
            ``record`` extra missing (``pip install 'openenv-gym[record]'``).
    """

    def __new__(cls, env: Any, *args: Any, **kwargs: Any) -> Any:
        """A :class:`RecordVectorEpisodes` for a vector env, else this wrapper."""
        if isinstance(env, VectorEnv):
            return RecordVectorEpisodes(env, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        env: gymnasium.Env[Any, Any],
        path: str | Path,
        *,
        info_keys: Sequence[str] = (),
        format: Format = "auto",
        flush_every: int = 64,
        dataset_id: str | None = None,
    ) -> None:
        super().__init__(env)
        self.writer = _writer(
            env,
            path,
            env.observation_space,
            env.action_space,
            info_keys,
            format,
            flush_every,
            dataset_id,
        )
        self._episode: Episode | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; an unfinished episode is written, truncated at its last step."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._end_unfinished()
        keys = self.writer.info_keys
        self._episode = Episode(seed, [obs], infos=[_chosen(info, keys)])
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step, and record the step; a finished episode is handed to the writer."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        episode = self._episode
        if episode is not None:
            episode.observations.append(obs)
            episode.actions.append(action)
            episode.rewards.append(float(reward))
            episode.terminations.append(bool(terminated))
            episode.truncations.append(bool(truncated))
            episode.infos.append(_chosen(info, self.writer.info_keys))
            if terminated or truncated:
                self.writer.add(episode)
                self._episode = None
        return obs, reward, terminated, truncated, info

    def _end_unfinished(self) -> None:
        episode, self._episode = self._episode, None
        if episode is not None and episode.actions:
            episode.cut()
            self.writer.add(episode)

    def close(self) -> None:
        """Write every episode (an unfinished one truncated), then close the env."""
        try:
            self._end_unfinished()
            self.writer.close()
        finally:
            super().close()


class RecordVectorEpisodes(VectorWrapper):
    """Record every sub-env's episodes of a vector env under ``path``.

    Follows the vector env's ``metadata["autoreset_mode"]``: ``NEXT_STEP`` (the step after
    an episode ended starts the next one; its action was ignored and is not recorded),
    ``SAME_STEP`` (the ended episode's last observation and info come from ``final_obs``
    / ``final_info``) and ``DISABLED`` (``reset(options={"reset_mask": ...})`` restarts
    the masked sub-envs). Episodes get ids in the order they finish. A sub-env reset with
    ``seed=s`` records ``s + i`` (Gymnasium's rule), an autoreset none.

    Args:
        env: A Gymnasium vector env (any, ours or not).
        path: The folder to write.
        info_keys: The info keys to record (from each sub-env's info).
        format: As :class:`RecordEpisodes`.
        flush_every: Finished episodes held in memory before they are written.
        dataset_id: Minari's ``dataset_id``.
    """

    def __init__(
        self,
        env: VectorEnv[Any, Any, Any],
        path: str | Path,
        *,
        info_keys: Sequence[str] = (),
        format: Format = "auto",
        flush_every: int = 64,
        dataset_id: str | None = None,
    ) -> None:
        super().__init__(env)
        self.writer = _writer(
            env,
            path,
            env.single_observation_space,
            env.single_action_space,
            info_keys,
            format,
            flush_every,
            dataset_id,
        )
        self.autoreset_mode = AutoresetMode(
            env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        )
        self._episodes: list[Episode | None] = [None] * env.num_envs
        self._restart = np.zeros(env.num_envs, dtype=bool)  # NEXT_STEP: resets this step

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset (every sub-env, or the masked ones); unfinished episodes are cut."""
        mask = None if options is None else options.get("reset_mask")
        obs, infos = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        n = self.num_envs
        which = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        seeds = _seeds(seed, n)
        observations = list(iterate(self.single_observation_space_batched, obs))
        for i in np.flatnonzero(which).tolist():
            self._end(i, cut=True)
            self._start(i, seeds[i], observations[i], info_at(infos, i))
        self._restart[which] = False
        return obs, infos

    @property
    def single_observation_space_batched(self) -> Any:
        """The batched observation space (what ``iterate`` walks)."""
        return self.env.observation_space

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env, and record each one's step."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        observations = list(iterate(self.env.observation_space, obs))
        taken = list(iterate(self.env.action_space, actions))
        ended = np.logical_or(terminations, truncations)
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        final_obs = infos.get("final_obs") if same_step else None
        final_info = infos.get("final_info") if same_step else None
        for i in range(self.num_envs):
            info = info_at(infos, i)
            if self._restart[i]:  # NEXT_STEP: this step was the reset
                self._start(i, None, observations[i], info)
                continue
            episode = self._episodes[i]
            if episode is None:
                continue  # never reset (DISABLED, masked out)
            last_obs, last_info = observations[i], info
            if same_step and ended[i]:
                if final_obs is not None:
                    last_obs = final_obs[i]
                if isinstance(final_info, dict):
                    last_info = info_at(final_info, i)
            episode.observations.append(last_obs)
            episode.actions.append(taken[i])
            episode.rewards.append(float(rewards[i]))
            episode.terminations.append(bool(terminations[i]))
            episode.truncations.append(bool(truncations[i]))
            episode.infos.append(_chosen(last_info, self.writer.info_keys))
            if ended[i]:
                self._end(i, cut=False)
                if same_step:
                    self._start(i, None, observations[i], info)
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._restart = ended.copy()
        return obs, rewards, terminations, truncations, infos

    def _start(self, i: int, seed: int | None, obs: Any, info: dict[str, Any]) -> None:
        self._episodes[i] = Episode(seed, [obs], infos=[_chosen(info, self.writer.info_keys)])

    def _end(self, i: int, *, cut: bool) -> None:
        episode, self._episodes[i] = self._episodes[i], None
        if episode is not None and episode.actions:
            if cut:
                episode.cut()
            self.writer.add(episode)

    def close(self, **kwargs: Any) -> None:
        """Write every episode (unfinished ones truncated), then close the vector env."""
        try:
            for i in range(self.num_envs):
                self._end(i, cut=True)
            self.writer.close()
        finally:
            super().close(**kwargs)


def _seeds(seed: Any, n: int) -> list[int | None]:
    """Each sub-env's reset seed, by Gymnasium's rule (``s + i``, or one each)."""
    if seed is None:
        return [None] * n
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        return [int(seed) + i for i in range(n)]
    if isinstance(seed, Sequence) and len(seed) == n:
        return [None if s is None else int(s) for s in seed]
    raise ConfigurationError(f"seed must be an int, a list of {n} or None, got {seed!r}")
