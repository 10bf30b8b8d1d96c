"""Issue 22, items 1 and 2: what one frame may cost, made by an attacker while a canary steps.

Each test makes one of the issue's attacks, at the issue's size, against ``openenv-gym serve
echo`` in a process of its own, while an honest canary (one batched slot and one ``/ws``
session, each stepping every 20 ms, in a process of its own) steps on. The attacks and the
canary are ``benchmarks/attacks.py``'s, which measures them: its report gives the canary's
worst step. Here the outcome is asserted, never a latency: the attacker gets a typed error
or a documented close code, the server's RSS grows by at most 200 MB, and the canary lost
nothing (every step answered, with its own echo). On the code before this (``b51bec2``)
the server froze for 8 to 33 s and grew by 1.7 to 3 GB, and answered the batched attacks
with a whole echo of their input.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import attacks  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

RSS_GROWTH_MB = 200


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, int, Path]]:
    """``openenv-gym serve echo`` (its URL and pid) and a scratch directory."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        attacks.server(Path(tmp) / "server.log") as (
            url,
            proc,
        ),
    ):
        yield url, proc.pid, Path(tmp)


def attack(served: tuple[str, int, Path], name: str) -> dict[str, Any]:
    """Make attack ``name`` while the canary steps; its row, the canary's checked."""
    url, pid, tmp = served
    rows = attacks.frame_attacks(url, pid, [name], 1.0, tmp)
    row, canary = rows
    print(
        f"\n[issue 22] {name}: {row['answer']} after {row['answered_ms']} ms; canary's worst "
        f"step {row['canary_worst_ms']} ms (quiet {canary['quiet_worst_ms']} ms); server RSS "
        f"{row['rss_start_mb']} -> {row['rss_peak_mb']} MB"
    )
    assert canary["error"] is None, f"the canary lost a step: {canary['error']}"
    assert canary["steps"] > 0
    assert row["rss_growth_mb"] <= RSS_GROWTH_MB
    return row


def test_a_step_of_15m_empty_arrays_is_refused_while_decoding(served):
    """Item 1: froze every client for 32.8 s, RSS 245 -> 3,222 MB."""
    row = attack(served, "empty-arrays")
    assert row["answer"] == {
        "code": "INVALID_REQUEST",
        "message": "frame decodes into more than 65536 values",
    }


def test_a_batched_action_of_1_6m_extra_keys_is_refused_while_decoding(served):
    """Item 1: 16.6 s, 1.95 GB and a 124 MB reply."""
    row = attack(served, "extra-keys")
    assert row["answer"] == {
        "code": "INVALID_REQUEST",
        "message": "frame decodes into more than 65536 values",
    }
    assert row["reply_bytes"] < 1000


def test_a_ws_step_of_1_3m_extra_keys_is_invalid_json_before_parsing(served):
    """Item 1: 20.6 s, 1.74 GB on /ws."""
    row = attack(served, "ws-extra-keys")
    assert row["answer"] == {
        "code": "INVALID_JSON",
        "message": "Invalid JSON: more than 65536 values (this server's limit)",
    }


def test_1m_one_byte_fragments_fail_the_connection_with_1009(served):
    """Item 2: 1 M one-byte fragments (7 MB) froze others for 7.8 s."""
    row = attack(served, "fragments-1M")
    assert row["answer"] == {"close": 1009, "reason": "a message of more than 1024 fragments"}


def test_3m_empty_fragments_fail_the_connection_with_1009(served):
    """Item 2: 3 M empty fragments (18 MB), 21.9 s."""
    row = attack(served, "empty-fragments-3M")
    assert row["answer"] == {"close": 1009, "reason": "a message of more than 1024 fragments"}
