"""The benchmark figures the README and docs/comparison.md quote, from ONE results file.

Both pages carry the figures between markers (``<!-- figures: NAME -->`` ...
``<!-- /figures -->``); this script renders them from the newest run in
``benchmarks/results/`` that has every figure they quote, and writes them in:

    python benchmarks/figures.py            # rewrite the marked blocks
    python benchmarks/figures.py --check    # exit 1 if a page disagrees (what a test runs)

Medians over the run's repeats, as benchmarks/_report.py tables them.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGES = {"readme": ROOT / "README.md", "comparison": ROOT / "docs" / "comparison.md"}
BLOCK = re.compile(r"(<!-- figures: (\w+) -->\n)(.*?)(<!-- /figures -->)", re.DOTALL)

Key = tuple[str, str, str, int, str]  # kind, method, env, N, variant


class Run:
    """One results file: medians by (kind, method, env, N, variant)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.id = path.stem
        values: dict[Key, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            key = (row["kind"], row["method"], row.get("env") or "", row["N"], row["variant"])
            for field in ("steps_per_s", "p50_ms"):
                if row.get(field) is not None:
                    values[key][field].append(float(row[field]))
        self.medians = {
            key: {f: statistics.median(v) for f, v in fields.items()}
            for key, fields in values.items()
        }

    def get(self, method: str, env: str, n: int, field: str = "steps_per_s") -> float:
        return self.medians[("step", method, env, n, "")][field]

    def tool(self, variant: str) -> float:
        return self.medians[("tool", "tool", "wordle", 1, variant)]["steps_per_s"]

    def complete(self) -> bool:
        try:
            render_readme(self)
            render_comparison(self)
        except KeyError:
            return False
        return True


def latest_run(results: Path = RESULTS) -> Run:
    """The newest run with every figure the pages quote."""
    for path in sorted(results.glob("2*.jsonl"), reverse=True):
        run = Run(path)
        if run.complete():
            return run
    raise SystemExit(f"no run in {results} has every figure the docs quote")


def _x(ratio: float) -> str:
    """A ratio as the pages write it: two digits below 10x, a whole number above."""
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"


def render_readme(run: Run) -> str:
    """The README's "How fast" paragraph."""
    echo, wordle = run.get("a", "echo", 256), run.get("a", "wordle", 256)
    p50, official_p50 = run.get("a", "echo", 1, "p50_ms"), run.get("c", "echo", 1, "p50_ms")
    tool = run.tool("trl batch") / run.tool("official our-server")
    text = (
        f"On a 2-core machine (client and server sharing it), in one run (`{run.id}`): 256 "
        f"Echo envs step at {_x(echo / run.get('f', 'raw', 256))} the raw "
        f"msgpack-over-WebSocket ceiling, {_x(echo / run.get('e', 'echo', 256))} Gymnasium's "
        f"in-process `SyncVectorEnv` of the same env logic (no network at all) and "
        f"{_x(echo / run.get('c', 'echo', 256))} the official OpenEnv async client driving 256 "
        f"sessions with `asyncio.gather` ({_x(run.get('a', 'echo', 64) / run.get('c', 'echo', 64))}"
        f" at 64 envs); 256 Wordle envs at {_x(wordle / run.get('e', 'wordle', 256))} the "
        f"in-process `SyncVectorEnv` and {_x(wordle / run.get('c', 'wordle', 256))} the official "
        f"client ({_x(run.get('a', 'wordle', 64) / run.get('c', 'wordle', 64))} at 64 envs). A "
        f"single Echo step takes {_x(p50 / official_p50)} the official client's latency (p50 "
        f"{p50:.3f} vs {official_p50:.3f} ms), and one TRL tool call makes {_x(tool)} the "
        f"official client's calls/s on the same server. Absolute figures move 2-3x from day to "
        f"day on these shared machines ({echo:,.0f} Echo env-steps/s at N=256 in that run). "
        "Methods, every figure, before/after tables and where each µs goes: "
        "[`benchmarks/README.md`](benchmarks/README.md)."
    )
    return _wrap(text) + "\n"


def render_comparison(run: Run) -> str:
    """docs/comparison.md's "Measured" table."""
    official = "the official OpenEnv async client, N sessions under `asyncio.gather`"
    rows = [
        ("Echo, N=256, env-steps/s", run.get("a", "echo", 256), "batched protocol",
         run.get("c", "echo", 256), official),
        ("Wordle, N=256, env-steps/s", run.get("a", "wordle", 256), "",
         run.get("c", "wordle", 256), "the same official client"),
        ("Echo, N=64, env-steps/s", run.get("a", "echo", 64), "",
         run.get("c", "echo", 64), "the same official client"),
        ("Wordle, N=256, env-steps/s", run.get("a", "wordle", 256), "over the network",
         run.get("e", "wordle", 256),
         "`SyncVectorEnv` of the same env logic in-process, no network"),
        ("Echo, N=256, env-steps/s", run.get("a", "echo", 256), "over the network",
         run.get("f", "raw", 256), "the raw ceiling: msgpack over one WebSocket, no env"),
        ("one Wordle tool call, calls/s", run.tool("trl batch"),
         "TRL's `environment_factory`", run.tool("official our-server"),
         "the official sync client on the same server"),
    ]  # fmt: skip
    intro = (
        f"From the benchmark run `{run.id}` ([Benchmarks](benchmarks/index.md)): one 2-core "
        "machine, client and server sharing it, every peer measured in the same run. EnvPool "
        "was not measured."
    )
    lines = [
        _wrap(intro),
        "",
        "| | openenv-gym | peer | ratio |",
        "|---|---|---|---|",
    ]
    for what, ours, note, peer, peer_name in rows:
        mine = f"{ours:,.0f} ({note})" if note else f"{ours:,.0f}"
        lines.append(f"| {what} | {mine} | {peer:,.0f}: {peer_name} | {_x(ours / peer)} |")
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 92) -> str:
    """Words into lines of at most ``width`` characters (the README's own wrapping)."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


RENDER = {"readme": render_readme, "comparison": render_comparison}


def rewrite(text: str, run: Run) -> str:
    """``text`` with every marked block rendered from ``run``."""

    def block(match: re.Match[str]) -> str:
        return match.group(1) + RENDER[match.group(2)](run) + match.group(4)

    return BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page disagrees")
    args = parser.parse_args(argv)
    run = latest_run()
    stale = []
    for name, path in PAGES.items():
        text = path.read_text(encoding="utf-8")
        if f"<!-- figures: {name} -->" not in text:
            raise SystemExit(f"{path} has no <!-- figures: {name} --> block")
        new = rewrite(text, run)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(ROOT)} (run {run.id})")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
