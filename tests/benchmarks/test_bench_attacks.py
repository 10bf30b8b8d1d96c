"""``benchmarks/attacks.py --smoke`` runs, and its rows say what the README says.

Only the harness is checked (the attacks happened, were refused with the documented code,
the server's own refusal time was read from its log, nobody failed); no speed is
asserted -- speed lives in ``benchmarks/``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
ATTACKS = ("empty-arrays", "extra-keys", "ws-extra-keys", "fragments-1M", "empty-fragments-3M")


def test_attacks_smoke_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "attacks.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "attacks.py"), "--smoke", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = {}
    for line in out.read_text().splitlines():
        row = json.loads(line)
        rows.setdefault(row["phase"], []).append(row)
    frame_attacks = {f"attack {name}" for name in ATTACKS}
    assert set(rows) == {
        "quiet",
        "state-3M",
        "state-3M summary",
        "never-reading",
        "stepper errors",
        "canary",
        *frame_attacks,
    }
    (attack,) = rows["state-3M"]
    assert attack["code"] == "INVALID_REQUEST"
    assert "names 3000000 slots" in attack["message"]
    assert attack["frame_bytes"] > 14 * 2**20
    assert attack["server_ms"] is not None  # the server logged its refusal from the head
    assert 64 * 1024 <= attack["server_read_bytes"] < attack["frame_bytes"]
    assert rows["quiet"][0]["steps"] > 0
    assert [r["path"] for r in rows["never-reading"]] == ["/batch", "/ws"]
    assert all(r["rss_peak_mb"] >= r["rss_start_mb"] > 0 for r in rows["never-reading"])
    assert rows["stepper errors"][0]["errors"] == []
    # issue 22's attacks, at 1 % of their size: each answered with a typed error or a
    # documented close code, and the canary lost nothing
    answers = {name: rows[f"attack {name}"][0]["answer"] for name in ATTACKS}
    assert answers["empty-arrays"]["code"] == "INVALID_REQUEST"
    assert answers["extra-keys"] == {"slot_codes": ["VALIDATION_ERROR"]}
    assert answers["ws-extra-keys"]["code"] == "VALIDATION_ERROR"
    assert answers["fragments-1M"]["close"] == answers["empty-fragments-3M"]["close"] == 1009
    (canary,) = rows["canary"]
    assert canary["error"] is None
    assert canary["steps"] > 0
