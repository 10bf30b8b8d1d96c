"""Figures and samples in docs/ that come from a measurement or a real server (issue 15)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openenv_gym.assemble import fetch_schema
from openenv_gym.providers import LocalProvider
from openenv_gym.spaces import codec_from_schema

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SHARDING = re.compile(
    r"^- sharding, busy env N=256, 2 servers / 1 server: ([\d.]+)x \(", re.MULTILINE
)


def test_vector_md_quotes_the_latest_sharding_measurement():
    """docs/vector.md's sharding figure is the newest run's that measured it (not n/a)."""
    measured = [
        (path.stem, match.group(1))
        for path in sorted(RESULTS.glob("*.md"))
        if (match := SHARDING.search(path.read_text(encoding="utf-8")))
    ]
    assert measured, "no run measured sharding"
    run, ratio = measured[-1]
    page = (ROOT / "docs" / "vector.md").read_text(encoding="utf-8")
    assert f"gave {ratio}x the throughput of one (run {run}" in " ".join(page.split())


@pytest.mark.integration
def test_spaces_md_shows_the_generic_echo_action_space():
    """The Generic-v0 example's action space is what an echo server's /schema gives."""
    provider = LocalProvider("echo")
    try:
        [url] = provider.start()
        schema = fetch_schema(
            url, timeout=10, headers={"Authorization": f"Bearer {provider.token(0)}"}
        )
    finally:
        provider.close()
    space = codec_from_schema(schema).action_space
    page = (ROOT / "docs" / "spaces.md").read_text(encoding="utf-8")
    assert f"env.action_space  # Text({space.min_length}, {space.max_length}, ...)" in page
