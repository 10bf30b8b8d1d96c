"""Method ``official``'s pieces that need no Docker: turns, actions, its report, its plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "benchmarks"))  # last: nothing of benchmarks/ may shadow a module
from _official import PLANS, Turns, containers_for, gym_action, memory_for  # noqa: E402
from _official_plan import official_cells  # noqa: E402
from _official_report import official_lines  # noqa: E402
from official_images import FAMILIES, dockerfile  # noqa: E402

from openenv_gym.spaces import codec_from_schema  # noqa: E402


def test_turns_reset_an_ended_episode_then_start_over() -> None:
    turns = Turns(3)
    turns.ended([False, True, False])
    assert (turns.turn, turns.resetting) == ([1, 0, 1], [False, True, False])
    turns.ended([False, False, True])  # sub-env 1 was reset this round, not stepped
    assert (turns.turn, turns.resetting) == ([2, 0, 0], [False, False, True])
    turns.ended([False, False, False])
    assert (turns.turn, turns.resetting) == ([3, 1, 0], [False, False, False])


def test_json_actions_become_the_gym_actions_that_encode_to_them() -> None:
    grid = {
        "action": {
            "type": "object",
            "properties": {"action": {"$ref": "#/$defs/MoveAction"}},
            "required": ["action"],
            "$defs": {"MoveAction": {"type": "string", "enum": ["UP", "DOWN", "LEFT", "RIGHT"]}},
        },
        "observation": {"type": "object", "properties": {"x": {"type": "integer"}}},
    }
    codec = codec_from_schema(grid)
    for action in PLANS["grid_world"].actions:
        made = gym_action(codec, action)
        assert codec.encode_action(made) == action
    connect4 = {
        "action": {
            "type": "object",
            "properties": {"column": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["column"],
        },
        "observation": {"type": "object", "properties": {}},
    }
    made = gym_action(codec_from_schema(connect4), {"column": 3})  # the required field only
    assert int(np.asarray(made)) == 3


def test_the_report_gives_the_ratios_and_the_targets() -> None:
    rates = {
        "official client native": 1000.0,
        "our json native": 1100.0,
        "our batch derived": 8000.0,
        "in process": 10000.0,
    }
    summary = {
        ("official", "echo", 64, v): {"steps_per_s": r, "params": {"containers": 1}}
        for v, r in rates.items()
    }
    lines = official_lines(summary)
    row = next(line for line in lines if line.startswith("| echo | 64 |"))
    assert "| 0.80x | 8.00x | 10.00x |" in row
    assert (
        "- official echo N=64: batch/in-process 0.80x (>= 0.70x), batch/official 8.00x (>= 3x)"
        in lines
    )
    assert official_lines({}) == []


def test_the_plan_gives_single_session_families_1_and_16() -> None:
    args = argparse.Namespace(
        official_images=["echo=e:1", "grid_world=g:1"], official_n=None, smoke=False
    )
    specs, notes = official_cells(args, have_openenv=False)
    assert {s["n"] for s in specs if s["family"] == "echo"} == {1, 64, 256}
    assert {s["n"] for s in specs if s["family"] == "grid_world"} == {1, 16}
    assert all(s["variant"] != "official client native" for s in specs)
    assert any("grid_world" in note for note in notes)
    assert containers_for("grid_world", 16) == 16
    assert containers_for("echo", 256) == 1
    # a container of TextArena's Wordle grows with its sessions; the others keep 1 GiB
    assert memory_for("textarena", 1) == 1024
    assert memory_for("textarena", 64) > 1024 + 64 * 22
    assert memory_for("echo", 256) == 1024


def test_the_image_layouts_follow_upstream_commands() -> None:
    text = {name: dockerfile(family, "base:1") for name, family in FAMILIES.items()}
    assert 'CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app' in text["echo"]
    assert '"uvicorn", "finqa_env.server.app:app"' in text["finqa"]
    assert '"envs.grid_world_env.server.app:app"' in text["grid_world"]
    assert "--workers ${WORKERS}" in text["openspiel"]
    assert all(t.startswith("FROM base:1\n") for t in text.values())
