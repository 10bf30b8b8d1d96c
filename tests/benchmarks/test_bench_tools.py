"""The benchmark tools: latency percentiles from numpy, plot.py's exit status, the process floor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results" / "20261124T212908Z.jsonl"

sys.path.append(str(BENCH))  # last: nothing of benchmarks/ may shadow a module
from _harness import percentile  # noqa: E402


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 0.99, 5.0),
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([float(v) for v in range(1, 101)], 0.99, 99.0),  # index round(0.99 * 99) = 98
        ([float(v) for v in range(1, 101)], 0.5, 51.0),  # index round(49.5): 50, half to even
        ([1.0, 2.0, 3.0, 4.0], 1.0, 4.0),
        ([1.0, 2.0, 3.0, 4.0], 0.0, 1.0),
    ],
)
def test_percentile_is_a_measured_value_at_the_nearest_index(values, q, expected):
    got = percentile(values, q)
    assert got in values  # never interpolated
    assert got == float(np.quantile(values, q, method="nearest"))
    ordered = sorted(values)
    assert got == ordered[round(q * (len(values) - 1))]


def _plot(*args: str, hide_matplotlib: bool = False) -> subprocess.CompletedProcess[str]:
    code = "import sys, runpy\n"
    if hide_matplotlib:
        code += "sys.modules['matplotlib'] = None\n"  # import matplotlib -> ImportError
    code += "sys.argv = ['plot.py', *sys.argv[1:]]\n"
    code += f"runpy.run_path({str(BENCH / 'plot.py')!r}, run_name='__main__')\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(BENCH), "MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_plot_without_matplotlib_exits_1_and_says_why(tmp_path):
    done = _plot(str(RESULTS), "--out", str(tmp_path / "x.png"), hide_matplotlib=True)
    assert done.returncode == 1  # was 0
    assert "matplotlib is not installed" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_plot_with_nothing_to_plot_exits_1(tmp_path):
    empty = tmp_path / "empty.jsonl"
    row = json.loads(RESULTS.read_text().splitlines()[0])
    row["method"] = "tool"
    empty.write_text(json.dumps(row) + "\n")
    done = _plot(str(empty), "--out", str(tmp_path / "x.png"))
    assert done.returncode == 1
    assert "no rows of methods" in done.stderr


def test_plot_writes_the_png_and_exits_0(tmp_path):
    out = tmp_path / "run.png"
    done = _plot(str(RESULTS), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_busy_env_burns_in_its_batched_step_too(monkeypatch):
    """The runtime prefers a class's ``step_batch``: the busy env's must burn per step.

    It inherited Echo's hook, so no step burned and the sharding / ray rows measured Echo.
    """
    import busy_env

    from openenv_gym_servers.echo import EchoAction

    burned: list[float] = []
    monkeypatch.setattr(busy_env, "burn", burned.append)
    envs = [busy_env.BusyEnvironment() for _ in range(3)]
    for env in envs:
        env.reset()
    batch = busy_env.BusyEnvironment.step_batch(envs, [EchoAction(message="hi")] * 3)
    assert burned == [busy_env.BUSY_US] * 3
    assert batch is not None


def test_the_process_floor_round_trips_through_every_worker_and_reaps_them(capsys):
    """process_floor.py measures real round trips (a worker that does not answer would hang
    it) and leaves no worker behind."""
    import process_floor
    import psutil

    before = {child.pid for child in psutil.Process().children()}
    process_floor.main(
        ["--workers", "1", "3", "--rounds", "20", "--repeats", "1", "--env-us", "10"]
    )
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["N=1", "N=3"]
    for line in lines:
        floor = float(line.split(": ")[1].split(" us")[0])
        assert floor > 0
        ceiling = float(line.rsplit("at most ", 1)[1].split("x")[0])
        assert ceiling == pytest.approx(10 / (10 + floor), abs=0.01)
    assert {child.pid for child in psutil.Process().children()} <= before  # all reaped
