"""The supported Gymnasium 1.x forms, each in a fresh interpreter (and a fresh venv)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def run_python(code: str, python: str = sys.executable, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_without_import_in_a_fresh_interpreter() -> None:
    out = run_python(
        """
        import gymnasium
        env = gymnasium.make("openenv_gym:openenv/Wordle-v0")
        obs, info = env.reset(seed=1)
        print(type(env.unwrapped).__name__, obs.startswith("You are Playing Wordle"))
        env.close()
        """
    )
    assert out.split() == ["OpenEnvEnv", "True"]


def test_import_then_make_in_a_fresh_interpreter() -> None:
    out = run_python(
        """
        import gymnasium, openenv_gym
        gymnasium.register_envs(openenv_gym)
        ids = sorted(i for i in gymnasium.registry if i.startswith("openenv/"))
        print(*ids)
        env = gymnasium.make("openenv/Catch-v0")
        obs, _ = env.reset(seed=0)
        print(obs.shape)
        env.close()
        """
    )
    assert out.splitlines() == [
        "openenv/Catch-v0 openenv/Echo-v0 openenv/Generic-v0 openenv/Wordle-v0",
        "(50,)",
    ]


@pytest.mark.slow
@pytest.mark.timeout(900)  # pip installs a fresh venv: minutes on a loaded machine
def test_fresh_venv_after_pip_install(tmp_path: Path) -> None:
    """`pip install .` into a new venv: make works, no top-level `servers`, no orphans."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("openenv_gym-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel), "psutil"],
        check=True,
        timeout=600,
    )
    out = run_python(
        """
        import importlib.util, psutil, gymnasium
        assert importlib.util.find_spec("servers") is None, "top-level 'servers' installed"
        env = gymnasium.make("openenv_gym:openenv/Wordle-v0")
        obs, info = env.reset(seed=1)
        pids = env.unwrapped._provider.pids
        env.close()
        gone = all(not psutil.pid_exists(p) or psutil.Process(p).status() == "zombie" for p in pids)
        print(obs.splitlines()[0], gone)
        """,
        python=python,
        cwd=tmp_path,
    )
    assert out.strip() == "You are Playing Wordle. True"
