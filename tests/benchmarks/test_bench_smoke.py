"""``benchmarks/run.py --smoke`` runs and writes rows of the fixed schema.

Only the harness is checked: that every method measured something and reported it in
the documented shape. No speed is asserted -- speed lives in ``benchmarks/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "run.py"

ROW_KEYS = {
    "schema_version",
    "run_id",
    "timestamp",
    "kind",
    "method",
    "label",
    "env",
    "N",
    "variant",
    "repeat",
    "steps",
    "rounds",
    "duration_s",
    "target_duration_s",
    "steps_per_s",
    "p50_ms",
    "p99_ms",
    "client_cpu_us_per_step",
    "server_cpu_us_per_step",
    "client_cpu_s",
    "server_cpu_s",
    "client_rss_mb",
    "server_rss_mb",
    "other_cpu",
    "busy_before",
    "open_s",
    "first_reset_s",
    "params",
    "versions",
    "host",
    "error",
}
VERSION_KEYS = {"python", "openenv-gym", "gymnasium", "websockets", "msgpack", "openenv"}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path]:
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--smoke",
            "--methods",
            "a,b,e,f,tool,rollout,aio",
            "--out-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (results,) = out.glob("*.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    return rows, results


TOOL_OURS = {("tool", "wordle", 1, "trl batch"), ("tool", "wordle", 1, "trl json")}
TOOL_OFFICIAL = {  # only with an OpenEnv interpreter (never created by --smoke)
    ("tool", "wordle", 1, "official our-server"),
    ("tool", "wordle", 1, "official openenv-server"),
}
ROLLOUT = {("rollout", "wordle", 16, "tools"), ("rollout", "wordle", 16, "lockstep")}
KIND = {"tool": "tool", "rollout": "rollout"}


def test_one_row_per_measurement(smoke: tuple[list[dict], Path]) -> None:
    rows, _ = smoke
    cells = {(r["method"], r["env"], r["N"], r["variant"]) for r in rows}
    expected = {
        (m, env, n, "")
        for m in ("a", "b", "e", "aio")
        for env in ("echo", "wordle")
        for n in (1, 16)
    }
    expected |= {("aio", env, 1, "single") for env in ("echo", "wordle")}
    expected |= {("f", "raw", 1, ""), ("f", "raw", 16, "")} | TOOL_OURS | ROLLOUT
    assert expected <= cells <= expected | TOOL_OFFICIAL
    assert cells - expected in (set(), TOOL_OFFICIAL)
    assert len(rows) == len(cells)  # --smoke: one repeat


def test_rows_have_the_fixed_schema(smoke: tuple[list[dict], Path]) -> None:
    rows, _ = smoke
    run_ids = {r["run_id"] for r in rows}
    assert len(run_ids) == 1
    for row in rows:
        assert set(row) == ROW_KEYS, row
        assert row["error"] is None
        assert row["kind"] == KIND.get(row["method"], "step")
        assert row["schema_version"] == 1
        assert set(row["versions"]) >= VERSION_KEYS
        assert isinstance(row["params"], dict)
        assert row["repeat"] == 0


def test_every_row_measured_steps(smoke: tuple[list[dict], Path]) -> None:
    rows, _ = smoke
    for row in rows:
        assert row["steps_per_s"] > 0
        assert row["steps"] > 0
        assert row["rounds"] >= 3
        if row["method"] == "rollout":  # a batch: one to six guesses per game, no resets
            assert row["N"] * row["rounds"] <= row["steps"] <= 6 * row["N"] * row["rounds"]
            assert row["params"]["resets_in_window"] == row["N"] * row["rounds"]
        else:
            assert row["steps"] == row["rounds"] * row["N"]
        assert row["duration_s"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["client_cpu_us_per_step"] >= 0
        assert row["client_rss_mb"] > 0
        assert row["other_cpu"] >= 0
        if row["method"] == "e":  # in process: no server
            assert row["server_cpu_us_per_step"] is None
            assert row["server_rss_mb"] is None
        else:
            assert row["server_cpu_us_per_step"] >= 0
            assert row["server_rss_mb"] > 0


def test_markdown_report_written(smoke: tuple[list[dict], Path]) -> None:
    _, results = smoke
    report = results.with_suffix(".md").read_text()
    assert "### echo: env-steps/s (median)" in report
    assert "### Targets" in report
    assert "(a)/(f) echo N=256" in report
    assert "p50 N=1 wordle, (aio single)/(c)" in report
    assert "### Tool-call round trip" in report
    assert "tool call, trl batch / official" in report or "official-client rows skipped" in report
    assert "### Rollout env time" in report
    assert "rollout env time N=16, lockstep / tools: env-steps/s" in report


def test_rollout_variants_play_the_same_games(smoke: tuple[list[dict], Path]) -> None:
    rows, _ = smoke
    first = {
        r["variant"]: r["params"]["steps_per_batch_first"] for r in rows if r["method"] == "rollout"
    }
    assert first["tools"] == first["lockstep"]  # batch 0: the same seeds and words
