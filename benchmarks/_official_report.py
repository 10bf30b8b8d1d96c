"""The report of method ``official``: per upstream env family and N, the four variants.

Standard library only (imported by ``_report.py``). Every figure is a cell's median.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ORDER", "official_lines"]

ORDER = ("official client native", "our json native", "our batch derived", "in process")
"""The variants of method ``official``, in report order."""

IN_PROCESS_GAP = 5.0
"""Where the env itself allows it (in process >= this x the official client), batched
stepping must reach 3x the official client (issue 21)."""


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return None if not top or not bottom else top / bottom


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def official_lines(summary: dict[tuple[str, str, int, str], dict[str, Any]]) -> list[str]:
    """The ``official`` table and its target lines (empty when the run has no such rows)."""
    keys = [k for k in summary if k[0] == "official"]
    if not keys:
        return []
    lines = [
        "### Upstream OpenEnv envs: official client vs ours, native vs derived image, in process",
        "",
        "env-steps/s (median). `native`: the image's own server (a container per session for "
        "a family not marked concurrent: see `containers`); `derived`: one container of the "
        "derived image, our runtime; `in process`: the env's own cost.",
        "",
        "| family | N | containers (native) | official client native | our json native "
        "| our batch derived | in process | batch / in process | batch / official "
        "| in process / official |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    targets: list[str] = []
    for family, n in sorted({(k[1], k[2]) for k in keys}):
        got = {v: (summary.get(("official", family, n, v)) or {}) for v in ORDER}
        rate = {v: got[v].get("steps_per_s") for v in ORDER}
        native = got["official client native"].get("params") or {}
        containers = native.get("containers", "-")
        batch_env = _ratio(rate["our batch derived"], rate["in process"])
        batch_official = _ratio(rate["our batch derived"], rate["official client native"])
        env_official = _ratio(rate["in process"], rate["official client native"])
        lines.append(
            f"| {family} | {n} | {containers} | "
            + " | ".join(_num(rate[v]) for v in ORDER)
            + f" | {_x(batch_env)} | {_x(batch_official)} | {_x(env_official)} |"
        )
        if n == 1:
            continue
        checks = [f"batch/in-process {_x(batch_env)} (>= 0.70x)"]
        if env_official is not None and env_official >= IN_PROCESS_GAP:
            checks.append(f"batch/official {_x(batch_official)} (>= 3x)")
        else:
            checks.append(f"batch/official {_x(batch_official)} (>= 1.0x)")
        targets.append(f"official {family} N={n}: " + ", ".join(checks))
    lines += ["", *[f"- {t}" for t in targets], ""]
    return lines
