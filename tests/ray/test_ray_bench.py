"""``benchmarks/run.py --smoke --methods ray``: the ray rows come out (no speed asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ray_checks import TwoNodes

pytestmark = [pytest.mark.ray, pytest.mark.bench, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_rows_of_ray_actors_and_local_servers(cluster: TwoNodes, tmp_path: Path) -> None:
    # on the session's two-node cluster (alone, the runner starts one of its own)
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--smoke",
            "--methods",
            "ray",
            "--no-plot",
            "--ray-address",
            cluster.address,
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (results,) = tmp_path.glob("*.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    cells = {(r["env"], r["variant"]) for r in rows}
    assert cells == {
        (env, f"{where} K={k}")
        for env in ("wordle", "busy")
        for where in ("local", "ray")
        for k in (1, 2)
    }
    for row in rows:
        assert row["method"] == "ray"
        assert row["error"] is None
        assert row["N"] == 16
        assert row["steps_per_s"] > 0
        assert row["server_cpu_s"] is not None
        if row["variant"] == "ray K=2":
            assert row["params"]["nodes"] == 2  # one server on each node
    assert "K=2 Ray actors / K=2 local servers" in results.with_suffix(".md").read_text()
