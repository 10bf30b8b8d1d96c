"""Turn the JSONL rows of a run into the Markdown tables and the target ratio lines.

Every figure is the median over a cell's repeats (a cell: method, env, N, variant).

    python benchmarks/_report.py benchmarks/results/<run>.jsonl   # print the report again
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from _official_report import official_lines

__all__ = ["METHODS", "cells", "load_rows", "markdown", "ratio_lines"]

METHODS: dict[str, str] = {
    "a": "OpenEnvVectorEnv, batched msgpack",
    "b": "OpenEnvVectorEnv, JSON /ws",
    "c": "official OpenEnv async client, gather",
    "d": "AsyncVectorEnv of OpenEnvEnv",
    "e": "SyncVectorEnv in process (no network)",
    "f": "raw ceiling: msgpack over one WebSocket",
    "shard": "OpenEnvVectorEnv over K servers",
    "docker": "OpenEnvVectorEnv over 4 containers vs 4 local servers",
    "ray": "OpenEnvVectorEnv over K Ray actors on 2 nodes vs K local servers",
    "open": "open N sessions on a running server",
    "tool": "one Wordle tool call: TRL environment_factory vs official client",
    "rollout": "env side of one GRPO batch of N Wordle games: TRL tools vs lockstep",
    "official": "upstream OpenEnv envs: official client, ours over native and derived images",
    "aio": "asyncio API: AsyncOpenEnvVectorEnv (single: one AsyncOpenEnvEnv)",
}

TOOL_ROWS = {
    "trl batch": "ours: `environment_factory(...)()` `.guess(word=...)`, batched protocol",
    "trl json": 'ours: the same with `protocol="json"` (OpenEnv\'s /ws)',
    "official our-server": "official `GenericEnvClient.sync().step()`, our Wordle server's /ws",
    "official openenv-server": "official `GenericEnvClient.sync().step()`, OpenEnv's server",
}
"""The variants of method ``tool``, in report order."""

ROLLOUT_ROWS = {
    "tools": "`environment_factory` instances: resets, then guess() calls, one by one",
    "lockstep": '`Lockstep` over `make_vec(..., autoreset_mode="Disabled")`: one step a turn',
}
"""The variants of method ``rollout``, in report order."""

Key = tuple[str, str, int, str]


def load_rows(path: str) -> list[dict[str, Any]]:
    """Rows of a results file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _median(values: Iterable[Any]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def cells(rows: Sequence[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Median of every metric per (method, env, N, variant), error rows left out."""
    grouped: dict[Key, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("error"):
            continue
        key = (row["method"], row["env"], row["N"], row["variant"])
        grouped.setdefault(key, []).append(row)
    out: dict[Key, dict[str, Any]] = {}
    metrics = (
        "steps_per_s",
        "p50_ms",
        "p99_ms",
        "client_cpu_us_per_step",
        "server_cpu_us_per_step",
        "client_rss_mb",
        "server_rss_mb",
        "open_s",
        "first_reset_s",
        "server_cpu_s",
    )
    for key, group in grouped.items():
        summary: dict[str, Any] = {m: _median(r[m] for r in group) for m in metrics}
        # rounds per second of the timed window (rollout: batches/s)
        summary["rounds_per_s"] = _median(
            r["rounds"] / r["duration_s"] if r.get("rounds") and r.get("duration_s") else None
            for r in group
        )
        summary["repeats"] = len(group)
        summary["other_cpu_max"] = max((r["other_cpu"] or 0.0) for r in group)
        summary["params"] = group[-1].get("params") or {}
        out[key] = summary
    return out


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _order(method: str) -> int:
    return _rank(METHODS, method)


def _rank(order: dict[str, str], name: str) -> int:
    return list(order).index(name) if name in order else len(order)


def markdown(rows: Sequence[dict[str, Any]], *, title: str = "", notes: Sequence[str] = ()) -> str:
    """The run's Markdown report: a steps/s grid per env, the detail table, the extra rows."""
    summary = cells(rows)
    lines: list[str] = [f"# {title}", ""] if title else []
    extra = ("shard", "open", "docker", "ray", "tool", "rollout", "official")
    step_keys = [k for k in summary if k[0] not in extra]
    envs = sorted({k[1] for k in step_keys if k[1] != "raw"})
    ns = sorted({k[2] for k in step_keys})
    for env in envs:
        lines += [f"### {env}: env-steps/s (median)", ""]
        lines.append("| method | " + " | ".join(f"N={n}" for n in ns) + " |")
        lines.append("|---|" + "---:|" * len(ns))
        methods = sorted({k[0] for k in step_keys if k[1] in (env, "raw")}, key=_order)
        for method in methods:
            row_env = "raw" if method == "f" else env
            cols = [
                _num((summary.get((method, row_env, n, "")) or {}).get("steps_per_s")) for n in ns
            ]
            lines.append(f"| ({method}) {METHODS.get(method, method)} | " + " | ".join(cols) + " |")
        lines.append("")
    if step_keys:
        lines += [
            "### Detail (medians; latency is one vector step / gather round / frame round trip)",
            "",
            "| method | env | N | steps/s | p50 ms | p99 ms | client µs/step | server µs/step "
            "| client MB | server MB | other CPU max |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key in sorted(step_keys, key=lambda k: (k[1], k[2], _order(k[0]), k[3])):
            s = summary[key]
            method, env, n, variant = key
            name = f"{method} {variant}".strip()
            lines.append(
                f"| {name} | {env} | {n} | {_num(s['steps_per_s'])} | {_num(s['p50_ms'], 3)} "
                f"| {_num(s['p99_ms'], 3)} | {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} | {_num(s['client_rss_mb'])} "
                f"| {_num(s['server_rss_mb'])} | {s['other_cpu_max']:.2f} |"
            )
        lines.append("")
    shard = sorted((k for k in summary if k[0] == "shard"), key=lambda k: (k[2], k[3]))
    if shard:
        lines += [
            "### Sharding: busy env, OpenEnvVectorEnv over K local servers",
            "",
            "| N | servers | steps/s | p50 ms | client µs/step | server µs/step (all servers) |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for key in shard:
            s = summary[key]
            lines.append(
                f"| {key[2]} | {key[3]} | {_num(s['steps_per_s'])} | {_num(s['p50_ms'], 3)} "
                f"| {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} |"
            )
        lines.append("")
    boxed = sorted((k for k in summary if k[0] == "docker"), key=lambda k: (k[2], k[3]))
    if boxed:
        lines += [
            "### Batched stepping over 4 Docker containers vs 4 local server processes",
            "",
            "| env | N | where | steps/s | p50 ms | client µs/step | server µs/step |",
            "|---|---:|---|---:|---:|---:|---:|",
        ]
        for key in boxed:
            s = summary[key]
            lines.append(
                f"| {key[1]} | {key[2]} | {key[3]} | {_num(s['steps_per_s'])} "
                f"| {_num(s['p50_ms'], 3)} | {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} |"
            )
        lines.append("")
    on_ray = sorted((k for k in summary if k[0] == "ray"), key=lambda k: (k[1], k[2], k[3]))
    if on_ray:
        lines += [
            "### Batched stepping over K Ray actors (two-node cluster) vs K local processes",
            "",
            "| env | N | where | steps/s | p50 ms | client µs/step | server µs/step |",
            "|---|---:|---|---:|---:|---:|---:|",
        ]
        for key in on_ray:
            s = summary[key]
            lines.append(
                f"| {key[1]} | {key[2]} | {key[3]} | {_num(s['steps_per_s'])} "
                f"| {_num(s['p50_ms'], 3)} | {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} |"
            )
        lines.append("")
    opened = sorted((k for k in summary if k[0] == "open"), key=lambda k: (k[1], k[2], k[3]))
    if opened:
        lines += [
            "### Opening sessions on a running server",
            "",
            "| env | N | protocol | make_vec s | first reset s | server CPU s |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for key in opened:
            s = summary[key]
            lines.append(
                f"| {key[1]} | {key[2]} | {key[3]} | {_num(s['open_s'], 3)} "
                f"| {_num(s['first_reset_s'], 3)} | {_num(s['server_cpu_s'], 2)} |"
            )
        lines.append("")
    tool = sorted(
        (k for k in summary if k[0] == "tool"),
        key=lambda k: list(TOOL_ROWS).index(k[3]) if k[3] in TOOL_ROWS else len(TOOL_ROWS),
    )
    if tool:
        lines += [
            "### Tool-call round trip: one Wordle tool call (resets untimed)",
            "",
            "| variant | what | calls/s | p50 ms | p99 ms | client µs/call | server µs/call "
            "| client MB | other CPU max |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key in tool:
            s = summary[key]
            lines.append(
                f"| {key[3]} | {TOOL_ROWS.get(key[3], '')} | {_num(s['steps_per_s'])} "
                f"| {_num(s['p50_ms'], 3)} | {_num(s['p99_ms'], 3)} "
                f"| {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} | {_num(s['client_rss_mb'])} "
                f"| {s['other_cpu_max']:.2f} |"
            )
        lines.append("")
    rollout = sorted(
        (k for k in summary if k[0] == "rollout"),
        key=lambda k: (k[2], _rank(ROLLOUT_ROWS, k[3])),
    )
    if rollout:
        lines += [
            "### Rollout env time: one GRPO batch of N Wordle games, scripted policy",
            "",
            "| N | variant | what | batches/s | p50 ms | p99 ms | env-steps/s "
            "| client µs/step | server µs/step | other CPU max |",
            "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key in rollout:
            s = summary[key]
            lines.append(
                f"| {key[2]} | {key[3]} | {ROLLOUT_ROWS.get(key[3], '')} "
                f"| {_num(s['rounds_per_s'], 2)} | {_num(s['p50_ms'], 1)} "
                f"| {_num(s['p99_ms'], 1)} | {_num(s['steps_per_s'])} "
                f"| {_num(s['client_cpu_us_per_step'], 1)} "
                f"| {_num(s['server_cpu_us_per_step'], 1)} | {s['other_cpu_max']:.2f} |"
            )
        lines.append("")
    lines += official_lines(summary)
    lines += ["### Targets", ""]
    lines += [f"- {line}" for line in ratio_lines(rows)]
    lines.append("")
    failed = sorted(
        {
            f"({r['method']}) {r['env']} N={r['N']} {r['variant']}".strip()
            for r in rows
            if r.get("error")
        }
    )
    if notes or failed:
        lines += ["### Notes", ""]
        lines += [f"- {note}" for note in notes]
        lines += [f"- FAILED: {name} (see its row's `error`)" for name in failed]
        lines.append("")
    return "\n".join(lines)


def ratio_lines(
    rows: Sequence[dict[str, Any]], *, shard_n: int | None = None, open_n: int | None = None
) -> list[str]:
    """The figures the project tracks, as ratios of peers measured in the same run."""
    summary = cells(rows)

    def sps(method: str, env: str, n: int, variant: str = "") -> float | None:
        return (summary.get((method, env, n, variant)) or {}).get("steps_per_s")

    def ratio(top: float | None, bottom: float | None) -> str:
        if top is None or bottom is None or bottom == 0:
            return "n/a (not measured in this run)"
        return f"{top / bottom:.2f}x ({_num(top)} / {_num(bottom)} steps/s)"

    def p50(method: str, env: str, n: int, variant: str = "") -> float | None:
        return (summary.get((method, env, n, variant)) or {}).get("p50_ms")

    def latency(top: float | None, bottom: float | None) -> str:
        if top is None or bottom is None or bottom == 0:
            return "n/a (not measured in this run)"
        return f"{top / bottom:.2f}x ({top:.3f} / {bottom:.3f} ms)"

    out = [f"(a)/(f) echo N=256: {ratio(sps('a', 'echo', 256), sps('f', 'raw', 256))}"]
    for env in ("echo", "wordle"):
        out.append(f"(a)/(e) {env} N=256: {ratio(sps('a', env, 256), sps('e', env, 256))}")
    for env in ("echo", "wordle"):
        out.append(f"(a)/(c) {env} N=64: {ratio(sps('a', env, 64), sps('c', env, 64))}")
    out.append(f"p50 N=1 echo, (a)/(c): {latency(p50('a', 'echo', 1), p50('c', 'echo', 1))}")
    out.append(f"p50 N=1 echo, (a)/(f): {latency(p50('a', 'echo', 1), p50('f', 'raw', 1))}")
    out.append(f"p50 N=1 echo, (a)/(b): {latency(p50('a', 'echo', 1), p50('b', 'echo', 1))}")
    for n in (1024, 4096):
        out.append(f"echo (a) N={n} / N=256: {ratio(sps('a', 'echo', n), sps('a', 'echo', 256))}")
    big = summary.get(("a", "echo", 4096, "")) or {}
    out.append(
        "echo (a) N=4096 client RSS: "
        + (f"{big['client_rss_mb']:.0f} MB" if big.get("client_rss_mb") else "n/a")
    )
    for env in ("echo", "wordle"):
        out.append(f"(b)/(c) {env} N=64: {ratio(sps('b', env, 64), sps('c', env, 64))}")
    wordle_a = sps("a", "wordle", 256)
    out.append(
        "wordle (a) N=256: "
        + (f"{_num(wordle_a)} steps/s" if wordle_a else "n/a (not measured in this run)")
    )
    open_ns = sorted({k[2] for k in summary if k[0] == "open"})
    n_open = open_n or (open_ns[-1] if open_ns else 256)
    for protocol in ("batch", "json"):
        s = summary.get(("open", "wordle", n_open, protocol))
        if s:
            out.append(
                f"wordle {n_open}-session open ({protocol}): make_vec {s['open_s']:.3f} s "
                f"+ first reset {s['first_reset_s']:.3f} s"
            )
        else:
            out.append(f"wordle {n_open}-session open ({protocol}): n/a (not measured in this run)")
    shard_ns = sorted({k[2] for k in summary if k[0] == "shard"})
    n_shard = shard_n or (shard_ns[-1] if shard_ns else 256)
    out.append(
        f"sharding, busy env N={n_shard}, 2 servers / 1 server: "
        + ratio(sps("shard", "busy", n_shard, "K=2"), sps("shard", "busy", n_shard, "K=1"))
    )
    tools = {k[3]: s for k, s in summary.items() if k[0] == "tool"}
    for ours in ("trl batch", "trl json"):
        for official in ("official our-server", "official openenv-server"):
            top, bottom = tools.get(ours), tools.get(official)
            if top is None or bottom is None:
                continue
            out.append(
                f"tool call, {ours} / {official}: calls/s {ratio_text(top, bottom)}, "
                f"p50 {top['p50_ms']:.3f} / {bottom['p50_ms']:.3f} ms"
            )
    for n in sorted({k[2] for k in summary if k[0] == "rollout"}):
        top = summary.get(("rollout", "wordle", n, "lockstep"))
        bottom = summary.get(("rollout", "wordle", n, "tools"))
        if top is None or bottom is None:
            out.append(f"rollout env time N={n}, lockstep / tools: n/a (not measured in this run)")
            continue
        out.append(
            f"rollout env time N={n}, lockstep / tools: env-steps/s {ratio_text(top, bottom)}, "
            f"batch p50 {top['p50_ms']:.1f} / {bottom['p50_ms']:.1f} ms"
        )
    out.append(
        f"(aio)/(a) wordle N=256: {ratio(sps('aio', 'wordle', 256), sps('a', 'wordle', 256))}"
    )
    for env in ("echo", "wordle"):
        out.append(
            f"p50 N=1 {env}, (aio single)/(c): "
            + latency(p50("aio", env, 1, "single"), p50("c", env, 1))
        )
    for env, n in sorted({(k[1], k[2]) for k in summary if k[0] == "ray"}):
        for servers in (1, 2):
            out.append(
                f"{env} N={n}, K={servers} Ray actors / K={servers} local servers: "
                + ratio(
                    sps("ray", env, n, f"ray K={servers}"),
                    sps("ray", env, n, f"local K={servers}"),
                )
            )
    for n in sorted({k[2] for k in summary if k[0] == "docker"}):
        out.append(
            f"wordle N={n}, 4 containers / 4 local servers: "
            + ratio(
                sps("docker", "wordle", n, "docker K=4"), sps("docker", "wordle", n, "local K=4")
            )
        )
    return out


def ratio_text(top: dict[str, Any], bottom: dict[str, Any]) -> str:
    """``1.23x (a / b)`` of two cells' calls (steps) per second."""
    a, b = top.get("steps_per_s"), bottom.get("steps_per_s")
    if not a or not b:
        return "n/a"
    return f"{a / b:.2f}x ({_num(a)} / {_num(b)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results .jsonl file")
    args = parser.parse_args()
    print(markdown(load_rows(args.results), title=args.results))


if __name__ == "__main__":
    main()
