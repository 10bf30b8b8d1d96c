"""Plot a run: env-steps/s and CPU per env-step against N, one panel per env, a line per method.

    python benchmarks/plot.py benchmarks/results/<run>.jsonl      # writes <run>.png

Needs matplotlib (the ``bench`` extra); without it :func:`plot` says so and returns False,
and the command exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from _report import METHODS, cells, load_rows

__all__ = ["plot"]

STYLE = {
    "a": {"color": "tab:blue", "marker": "o"},
    "b": {"color": "tab:cyan", "marker": "s"},
    "c": {"color": "tab:red", "marker": "^"},
    "d": {"color": "tab:orange", "marker": "v"},
    "e": {"color": "tab:green", "marker": "D"},
    "f": {"color": "tab:gray", "marker": "x", "linestyle": "--"},
}


def plot(rows: Sequence[dict[str, Any]], path: str, *, title: str = "") -> bool:
    """Write the PNG; False (with a note on stderr) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "plot skipped: matplotlib is not installed (pip install matplotlib, "
            "or the project's `bench` extra)",
            file=sys.stderr,
        )
        return False
    summary = cells(rows)
    envs = sorted({k[1] for k in summary if k[0] in STYLE and k[1] != "raw"})
    if not envs:
        print(f"plot skipped: no rows of methods {', '.join(STYLE)} to plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(2, len(envs), figsize=(6 * len(envs), 8.5), squeeze=False)
    all_ns = sorted({k[2] for k in summary if k[0] in STYLE})
    handles: dict[str, Any] = {}
    for col, env in enumerate(envs):
        top, bottom = axes[0][col], axes[1][col]
        for method, style in STYLE.items():
            row_env = "raw" if method == "f" else env
            points = sorted(
                (k[2], s) for k, s in summary.items() if k[0] == method and k[1] == row_env
            )
            if not points:
                continue
            label = f"({method}) {METHODS[method]}"
            ns = [n for n, _ in points]
            (handles[label],) = top.plot(
                ns, [s["steps_per_s"] for _, s in points], label=label, **style
            )
            cpu = [
                (n, (s["client_cpu_us_per_step"] or 0.0) + (s["server_cpu_us_per_step"] or 0.0))
                for n, s in points
                if s["client_cpu_us_per_step"] is not None
            ]
            if cpu:
                bottom.plot([n for n, _ in cpu], [c for _, c in cpu], label=label, **style)
        top.set_title(f"{env}: env-steps/s (median)")
        bottom.set_title(f"{env}: client + server CPU µs per env-step")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(all_ns, [str(n) for n in all_ns])
            ax.set_xlabel("N (sub-environments)")
            ax.grid(True, which="both", alpha=0.3)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=3, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Plot one results file; the exit status is 1 when no PNG was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results .jsonl file")
    parser.add_argument("--out", help="PNG path (default: next to the results)")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.results)[0] + ".png"
    if not plot(load_rows(args.results), out, title=os.path.basename(args.results)):
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
