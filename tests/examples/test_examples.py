"""Every example runs end to end with ``--smoke`` (its own local server, a few seconds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.examples, pytest.mark.integration]


EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", EXAMPLES)
def test_help_shows_every_option_with_its_default(name: str) -> None:
    """tyro everywhere: ``--help`` describes each option and shows its default."""
    import ast

    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--help"],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    tree = ast.parse((ROOT / "examples" / name).read_text())
    (args,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args"]
    fields = [n.target.id for n in args.body if isinstance(n, ast.AnnAssign)]
    assert "smoke" in fields
    for field in fields:
        assert f"--{field.replace('_', '-')}" in text, (field, text)
    assert text.count("(default: ") >= len(fields), text


def run_example(name: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), "--smoke", *args],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_wordle_throughput_smoke(protocol: str) -> None:
    out = run_example("wordle_throughput.py", "--protocol", protocol, "--progress-every", "0.5")
    assert re.search(r"\d+\.\d s: \d+ env-steps, \d+ episodes, \d+ won", out), out
    assert f"protocols: {protocol}" in out
    steps = re.search(r"env-steps/s \(inside envs.step\):\s+(\d+)", out)
    assert steps is not None, out
    assert int(steps.group(1)) > 0
    won = re.search(r"episodes: (\d+)\s+won: (\d+)", out)
    assert won is not None, out
    episodes, wins = int(won.group(1)), int(won.group(2))
    assert episodes > 0
    assert wins > episodes // 2  # the solver wins nearly every game; a broken env would not


def _has_trl() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("trl", "torch", "datasets"))


trl_only = pytest.mark.skipif(not _has_trl(), reason="needs the trl extra")


@trl_only
@pytest.mark.trl
@pytest.mark.timeout(300)  # importing TRL alone takes tens of seconds on a busy machine
@pytest.mark.parametrize("rollout", ["tools", "lockstep"])
def test_trl_wordle_grpo_smoke(rollout: str) -> None:
    out = run_example("trl_wordle_grpo.py", "--rollout", rollout)
    assert f"rollout: {rollout}" in out
    assert "steps: 2 " in out
    rewards = re.search(r"reward per step: (.+)", out)
    assert rewards is not None, out
    assert len(rewards.group(1).split(", ")) == 2  # one logged reward per GRPO step
    assert re.search(r"torch threads: \d+", out), out
    assert re.search(r"step 2/2: reward ", out), out  # a progress line per step
    if rollout == "tools":  # the scripted smoke generation calls the tool: the env steps
        calls = re.search(r"tool calls per rollout: (.+)", out)
        assert calls is not None, out
        assert all(float(c) > 0 for c in calls.group(1).split(", ")), out


@trl_only
@pytest.mark.timeout(300)
def test_vllm_wordle_smoke() -> None:
    out = run_example("vllm_wordle.py")
    games = re.search(r"games: (\d+)\s+finished: (\d+)", out)
    assert games is not None, out
    assert games.group(1) == games.group(2) == "4"  # every game played to its end
    assert "You are Playing Wordle." in out


def _has(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_sb3 = pytest.mark.skipif(
    not _has("stable_baselines3", "tyro", "matplotlib"), reason="needs the sb3 and examples extras"
)
needs_torch = pytest.mark.skipif(
    not _has("torch", "tyro", "matplotlib"), reason="needs torch and the examples extra"
)


@needs_sb3
@pytest.mark.timeout(300)
def test_sb3_catch_ppo_smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path))  # else SB3's logger makes /tmp/SB3-<time>
    png = tmp_path / "curve.png"
    out = run_example("sb3_catch_ppo.py", "--plot", str(png))
    assert re.search(r"torch threads: \d+", out), out
    assert re.search(r"step 1,024/2,048 \(50 %\): mean return of the last", out), out
    assert re.search(r"trained: \d+ steps", out), out
    assert re.search(r"eval mean return: [+-]\d\.\d\d over 20 episodes", out), out
    assert png.stat().st_size > 1000  # a PNG with a curve in it


@needs_torch
@pytest.mark.timeout(300)
def test_ppo_catch_smoke(tmp_path: Path) -> None:
    png = tmp_path / "curve.png"
    out = run_example("ppo_catch.py", "--plot", str(png))
    assert re.search(r"torch threads: \d+", out), out
    assert re.search(r"rollout 2/2: step 2,048, mean return of the last", out), out
    episodes = re.search(r"episodes: (\d+)", out)
    assert episodes is not None, out
    assert int(episodes.group(1)) > 0
    assert png.stat().st_size > 1000


@needs_torch
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ppo_catch_learns() -> None:
    """The single-file PPO reaches a mean return >= 0.9 (random: about -0.6) in 30k steps."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "ppo_catch.py"),
            "--total-steps",
            "30000",
            "--plot",
            "None",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    last = re.search(r"last-tenth mean return: ([+-]\d\.\d\d)", result.stdout)
    assert last is not None, result.stdout
    assert float(last.group(1)) >= 0.9, result.stdout
