"""``openenv_gym.wrappers.RecordEpisodes``: episodes to disk, read back by Minari, datasets, pandas.

Every test compares what the wrapper wrote with what the env returned, step by step (the
expected episodes are kept here from the env's own outputs).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import datasets
import gymnasium
import minari
import numpy as np
import pandas as pd
import pyarrow.dataset as pds
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import ConfigurationError, UsageError
from openenv_gym.wrappers import (
    SCHEMA_VERSION,
    Episode,
    EpisodeWriter,
    RecordEpisodes,
    RecordVectorEpisodes,
)
from openenv_gym_servers.wordle.words import secret_words

pytestmark = pytest.mark.integration


def arrow_files(path: Path) -> list[str]:
    return sorted(str(p) for p in (path / "data").glob("*/*.arrow"))


def load(path: Path, cache: Path) -> datasets.Dataset:
    """The recording through Hugging Face ``datasets`` (Minari's files or the shards)."""
    if arrow_files(path):
        builder, files = "arrow", arrow_files(path)
    else:
        builder, files = "parquet", sorted(str(p) for p in path.glob("data/*.parquet"))
    return datasets.load_dataset(builder, data_files=files, split="train", cache_dir=str(cache))


def play_catch(env: gymnasium.Env[Any, Any], seeds: list[int]) -> list[dict[str, Any]]:
    """Play Catch (left, stay, right in turn); the episodes as the env returned them."""
    played = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        episode: dict[str, Any] = {"seed": seed, "obs": [obs], "actions": [], "rewards": []}
        episode["phase"] = [info["game_phase"]]
        done, t = False, 0
        while not done:
            action = t % 3
            obs, reward, terminated, truncated, info = env.step(action)
            episode["obs"].append(obs)
            episode["actions"].append(action)
            episode["rewards"].append(reward)
            episode["phase"].append(info["game_phase"])
            done, t = terminated or truncated, t + 1
        played.append(episode)
    return played


def test_catch_episodes_are_a_minari_dataset(tmp_path: Path) -> None:
    path = tmp_path / "catch"
    env = RecordEpisodes(gymnasium.make("openenv/Catch-v0"), path, info_keys=["game_phase"])
    try:
        played = play_catch(env, [3, 4, 5])
    finally:
        env.close()
    dataset = minari.MinariDataset(path / "data")
    assert (dataset.total_episodes, dataset.total_steps) == (3, 27)
    assert dataset.observation_space == spaces.Box(0.0, 1.0, (50,), np.float32)
    assert dataset.action_space == spaces.Discrete(3)
    assert dataset.spec.dataset_id == "catch-v0"
    metadata = list(dataset.storage.get_episode_metadata(range(3)))
    assert [m["seed"] for m in metadata] == [3, 4, 5]
    for recorded, expected in zip(dataset.iterate_episodes(), played, strict=True):
        np.testing.assert_array_equal(recorded.observations, np.stack(expected["obs"]))
        assert recorded.actions.tolist() == expected["actions"]
        assert recorded.rewards.tolist() == expected["rewards"]
        assert recorded.terminations.tolist() == [False] * 8 + [True]
        assert not recorded.truncations.any()
        phases = [json.loads(p) for p in recorded.infos["game_phase"]]
        assert phases == expected["phase"]
    # the same files through datasets and pandas: one row per observation
    rows = load(path, tmp_path / "cache")
    assert len(rows) == 30
    assert rows.column_names == [
        "episode_id",
        "seed",
        "observations",
        "actions",
        "rewards",
        "terminations",
        "truncations",
        "infos",
    ]
    frame = pds.dataset(arrow_files(path), format="arrow").to_table().to_pandas()
    first = frame[frame.episode_id == 0]
    assert first.seed.tolist() == [3] * 10
    np.testing.assert_array_equal(np.stack(first.observations), np.stack(played[0]["obs"]))
    assert first.actions.tolist()[:-1] == played[0]["actions"]  # the last row: padding
    assert pd.read_feather(arrow_files(path)[0]).shape == (10, 8)
    meta = json.loads((path / "data" / "metadata.json").read_text())
    assert meta["openenv_gym"] == {
        "schema": SCHEMA_VERSION,
        "format": "minari",
        "info_keys": ["game_phase"],
    }


def test_close_writes_the_unfinished_episode_truncated(tmp_path: Path) -> None:
    env = RecordEpisodes(gymnasium.make("openenv/Catch-v0"), tmp_path / "cut-v2")
    try:
        env.reset(seed=1)
        env.step(0)
        env.reset(seed=2)  # the first is cut here
        env.step(1)
        env.step(2)
    finally:
        env.close()
    dataset = minari.MinariDataset(tmp_path / "cut-v2" / "data")
    assert dataset.spec.dataset_id == "cut-v2"
    episodes = list(dataset.iterate_episodes())
    assert [len(e) for e in episodes] == [1, 2]
    assert [e.truncations.tolist() for e in episodes] == [[True], [False, True]]
    assert [e.actions.tolist() for e in episodes] == [[0], [1, 2]]


def test_parquet_shards_hold_any_space(tmp_path: Path) -> None:
    """Spaces Minari cannot hold (a Sequence) go to Parquet shards, JSON per value."""
    space = spaces.Dict({"items": spaces.Sequence(spaces.Discrete(4)), "name": spaces.Text(8)})
    writer = EpisodeWriter(tmp_path / "seq", space, spaces.Discrete(2), flush_every=2)
    assert writer.format == "parquet"
    episodes = [
        Episode(
            seed=s,
            observations=[{"items": (1, 2), "name": "a"}, {"items": (), "name": "b"}],
            actions=[np.int64(1)],
            rewards=[0.5],
            terminations=[True],
            truncations=[False],
            infos=[{}, {}],
        )
        for s in (7, None, 8)
    ]
    for episode in episodes:
        writer.add(episode)
    assert sorted(p.name for p in (tmp_path / "seq" / "data").glob("*.parquet")) == [
        "episodes-00000.parquet"
    ]  # two episodes flushed, one held
    writer.close()
    frame = pd.read_parquet(tmp_path / "seq" / "data")
    assert frame.episode_id.tolist() == [0, 0, 1, 1, 2, 2]
    assert frame.seed.isna().tolist() == [False, False, True, True, False, False]
    assert frame.seed.tolist()[::4] == [7, 8]
    assert [json.loads(o) for o in frame.observations[:2]] == [
        {"items": [1, 2], "name": "a"},
        {"items": [], "name": "b"},
    ]
    assert frame.actions[0] == "1"
    assert pd.isna(frame.actions[1])  # no action on the last row
    assert len(load(tmp_path / "seq", tmp_path / "cache")) == 6
    with pytest.raises(UsageError):
        writer.add(episodes[0])


def test_bad_arguments_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    box, seq = spaces.Discrete(2), spaces.Sequence(spaces.Discrete(2))
    with pytest.raises(ConfigurationError, match="Minari cannot hold"):
        EpisodeWriter(tmp_path / "a", seq, box, format="minari")
    with pytest.raises(ConfigurationError, match="format must be"):
        EpisodeWriter(tmp_path / "b", box, box, format="hdf5")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="flush_every"):
        EpisodeWriter(tmp_path / "c", box, box, flush_every=0)
    with pytest.raises(ConfigurationError, match="dataset_id"):
        EpisodeWriter(tmp_path / "d", box, box, dataset_id="no version")
    assert not list(tmp_path.iterdir())
    EpisodeWriter(tmp_path / "e", box, box).close()
    with pytest.raises(ConfigurationError, match="already holds a recording"):
        EpisodeWriter(tmp_path / "e", box, box)


def _guesses() -> list[str]:
    words = secret_words()
    return [f"[{words[k * 97 % len(words)]}]" for k in range(7)]


def test_256_wordle_envs_round_trip(tmp_path: Path) -> None:
    """256 sub-envs, NEXT_STEP autoreset, flushes of 100: every episode comes back whole."""
    n, flush_every = 256, 100
    path = tmp_path / "wordle"
    envs = RecordEpisodes(
        gymnasium.make_vec("openenv/Wordle-v0", num_envs=n),
        path,
        info_keys=["info"],
        flush_every=flush_every,
    )
    assert isinstance(envs, RecordVectorEpisodes)
    guesses = _guesses()
    expected: dict[int, list[list[Any]]] = {i: [] for i in range(n)}  # sub-env -> episodes
    try:
        obs, _ = envs.reset(seed=100)
        current = [[(None, o, None)] for o in obs]  # (action, obs, reward) rows
        restart = np.zeros(n, dtype=bool)
        for t in range(9):  # six guesses end every game; then a few steps of the next
            actions = [guesses[(t + i) % 7] if i % 5 else "[zzzzz]" for i in range(n)]
            obs, rewards, terminations, truncations, _ = envs.step(actions)
            for i in range(n):
                if restart[i]:
                    current[i] = [(None, obs[i], None)]
                    continue
                current[i].append((actions[i], obs[i], float(rewards[i])))
                if terminations[i] or truncations[i]:
                    expected[i].append(current[i])
            restart = terminations | truncations
            assert len(envs.writer._pending) < flush_every  # bounded: flushed by episodes
    finally:
        envs.close()
    for i in range(n):
        if len(current[i]) > 1 and not restart[i]:
            expected[i].append(current[i])  # close() writes what was still running
    rows = load(path, tmp_path / "cache").to_pandas()
    dataset = minari.MinariDataset(path / "data")
    assert dataset.total_episodes == rows.episode_id.nunique()
    # the same episodes, seed and every row (episode ids follow the order they finished)
    recorded = Counter(
        (
            None if pd.isna(group.seed.iloc[0]) else int(group.seed.iloc[0]),
            tuple(group.observations),
            tuple(group.actions.tolist()[:-1]),
            tuple(group.rewards.tolist()[:-1]),
        )
        for _, group in rows.groupby("episode_id")
    )
    wanted = Counter(
        (
            100 + i if k == 0 else None,
            tuple(r[1] for r in episode),
            tuple(r[0] for r in episode[1:]),
            tuple(r[2] for r in episode[1:]),
        )
        for i, episodes in expected.items()
        for k, episode in enumerate(episodes)
    )
    assert recorded == wanted
    assert sum(recorded.values()) > 2 * n  # first games, second games, unfinished thirds
    # infos go with observations (row t: the info that came with observation t), so a
    # finished game's reason is on its last row
    episodes = rows.groupby("episode_id")
    ended = episodes.terminations.any()
    last_infos = episodes.infos.last()[ended]
    assert len(last_infos) == sum(len(e) for e in expected.values()) - sum(
        1 for i in range(n) if len(current[i]) > 1 and not restart[i]
    )
    reasons = [json.loads(info["info"])["reason"] for info in last_infos]
    assert any(r.startswith("Invalid Move") for r in reasons)
    assert all(r.startswith(("Invalid Move", "Congratulations", "The turn limit")) for r in reasons)


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_other_autoreset_modes_record_the_same_episodes(tmp_path: Path, mode) -> None:
    """Catch's episodes are 9 steps whatever the mode; SAME_STEP's last obs is final_obs."""
    envs = RecordEpisodes(
        gymnasium.make_vec("openenv/Catch-v0", num_envs=3, autoreset_mode=mode),
        tmp_path / "catch",
    )
    try:
        first, _ = envs.reset(seed=7)
        last = None
        for _ in range(9):
            obs, _, terminations, _, infos = envs.step(np.array([0, 1, 2]))
        assert terminations.all()
        last = infos["final_obs"] if mode is AutoresetMode.SAME_STEP else obs
        if mode is AutoresetMode.DISABLED:  # every sub-env must be reset, in two goes
            envs.reset(options={"reset_mask": np.array([True, False, True])})
            envs.reset(options={"reset_mask": np.array([False, True, False])})
        envs.step(np.array([1, 1, 1]))
    finally:
        envs.close()
    dataset = minari.MinariDataset(tmp_path / "catch" / "data")
    episodes = list(dataset.iterate_episodes())
    full = [e for e in episodes if len(e) == 9]
    assert len(full) == 3
    for episode in full:
        i = int(episode.actions[0])
        np.testing.assert_array_equal(episode.observations[0], first[i])
        np.testing.assert_array_equal(episode.observations[-1], last[i])
        assert episode.terminations[-1]
    # the step after: three new episodes, one step each, cut by close()
    rest = [e for e in episodes if len(e) == 1]
    assert len(rest) == 3
    assert all(e.truncations.tolist() == [True] for e in rest)


def test_minari_data_collector_on_our_envs(tmp_path: Path, monkeypatch) -> None:
    """Minari's own DataCollector over the single env: Catch and Wordle datasets."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    for env_id, action, dataset_id in [
        ("openenv/Catch-v0", 1, "openenv/catch-v0"),
        ("openenv/Wordle-v0", "[crane]", "openenv/wordle-v0"),
    ]:
        env = minari.DataCollector(gymnasium.make(env_id), data_format="arrow")
        try:
            for seed in (1, 2):
                env.reset(seed=seed)
                done = False
                while not done:
                    _, _, terminated, truncated, _ = env.step(action)
                    done = terminated or truncated
            env.create_dataset(
                dataset_id=dataset_id,
                eval_env=env_id,
                algorithm_name="scripted",
                author="openenv-gym tests",
                author_email="tests@openenv-gym.invalid",
                code_permalink="https://github.com/openenv-gym/openenv-gym",
                description=f"{env_id}, two scripted episodes",
            )
        finally:
            env.close()
        dataset = minari.load_dataset(dataset_id)
        assert dataset.total_episodes == 2
        episode = next(dataset.iterate_episodes())
        assert len(episode.observations) == len(episode.actions) + 1
        if env_id.endswith("Wordle-v0"):
            assert episode.observations[0].startswith("You are Playing Wordle")
            assert list(episode.actions) == ["[crane]"] * len(episode.actions)
