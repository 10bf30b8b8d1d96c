"""Figures and samples in docs/ that come from a measurement or a real server (issue 15)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

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


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("figures", ROOT / "benchmarks" / "figures.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["README.md", "docs/comparison.md"])
def test_quoted_figures_come_from_the_latest_results_file(page: str) -> None:
    """The README's and docs/comparison.md's figures are rendered from one run, the newest
    with every figure they quote (``python benchmarks/figures.py`` writes them in)."""
    figures = _figures()
    run = figures.latest_run()
    newest = max(RESULTS.glob("2*.jsonl"))
    assert run.path == newest or not figures.Run(newest).complete()
    text = (ROOT / page).read_text(encoding="utf-8")
    assert figures.BLOCK.search(text), f"{page} has no figures block"
    assert figures.rewrite(text, run) == text, (
        f"{page} quotes other figures than run {run.id}: run python benchmarks/figures.py"
    )


def test_a_newer_run_changes_the_quoted_figures(tmp_path: Path) -> None:
    """The check can fail: a run with other medians gives other text."""
    figures = _figures()
    run = figures.latest_run()
    rows = [json.loads(line) for line in run.path.read_text().splitlines() if line.strip()]
    for row in rows:
        if row["kind"] == "step" and row["method"] == "a":
            row["steps_per_s"] *= 2
    later = tmp_path / "29991231T000000Z.jsonl"
    later.write_text("".join(json.dumps(row) + "\n" for row in rows))
    newer = figures.latest_run(tmp_path)
    assert newer.id == later.stem
    page = (ROOT / "README.md").read_text(encoding="utf-8")
    assert figures.rewrite(page, newer) != page
