"""The worker side of a measurement: a tiny line protocol between ``run.py`` and a worker.

Standard library only: it is imported by workers under our interpreter and under the
OpenEnv one. A worker lives for the whole run and measures one method for many cells
(env, N); the runner drives it, one JSON object a line:

    runner -> worker  {"cmd": "open", "spec": {"env": "echo", "n": 64, ...}}
    worker -> runner  {"event": "setup", "server_pids": [...], "params": {...}}
    runner -> worker  {"cmd": "measure", "warmup": 1.0, "duration": 3.0}
    worker -> runner  {"event": "ready"}            (after warming up)
    runner -> worker  {"cmd": "go"}                 (the runner has sampled CPU counters)
    worker -> runner  {"event": "result", "steps": ..., "elapsed": ..., ...}
    ...                                             (more measure / go / result)
    runner -> worker  {"cmd": "close"}
    worker -> runner  {"event": "closed"}
    ...                                             (the next cell: open ...)
    runner -> worker  {"cmd": "quit"}               (or end of input)

The runner samples every process's CPU time between ``ready`` and ``go`` and again on
``result``, so a measurement's window is exactly the timed loop. Anything the libraries
print to standard output is redirected to standard error: only protocol lines reach the
runner. When opening or measuring fails, the worker closes that cell's bench, answers
``{"event": "error", "message": <traceback>}`` and waits for the next command.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

__all__ = [
    "ECHO_ACTION",
    "MIN_ROUNDS",
    "ROLLOUT_TURNS",
    "TOOL_WORDS",
    "WORDLE_WORDS",
    "ActionPlan",
    "RolloutBench",
    "ToolCallBench",
    "percentile",
    "run_async_worker",
    "run_worker",
    "watch_stdin_then",
]

ECHO_ACTION = "[crane]"
WORDLE_WORDS = ("crane", "slate", "pious", "mound", "brick", "flint")
"""Six distinct valid guesses: an episode ends after at most six steps (or a win)."""

MIN_ROUNDS = 3
"""Fewest timed rounds per measurement, however long one round takes."""

TOOL_WORDS = (
    "crane", "slate", "pious", "mound", "brick", "flint", "ghost", "dwarf", "jumpy", "vixen",
    "chalk", "plumb", "swift", "gleam", "nymph", "board", "tried", "lucky", "femur", "zesty",
    "wrung", "spicy", "blown", "exist", "quack", "dough", "thump", "rival", "scarf", "glyph",
)  # fmt: skip
"""Distinct valid guesses for the tool-call rows: game ``g`` plays words ``6g ..`` in turn."""
TOOL_GUESSES = 6
ROLLOUT_TURNS = 6
"""Turns of a rollout batch: turn ``t`` guesses ``TOOL_WORDS[t]`` in every game still playing."""


class ActionPlan:
    """The action of every sub-env for the next round, after the episode's progress.

    Echo always sends ``"[crane]"``. Wordle sends the six words in turn; a sub-env whose
    episode ended is reset on the next round (Gymnasium's NEXT_STEP autoreset), so its
    word counter starts over.
    """

    def __init__(self, env: str, n: int) -> None:
        self.n = n
        self.wordle = env == "wordle"
        self._turn = [0] * n
        self._constant = [ECHO_ACTION] * n

    def texts(self) -> list[str]:
        """One action text per sub-env."""
        if not self.wordle:
            return self._constant
        return [f"[{WORDLE_WORDS[t % 6]}]" for t in self._turn]

    def update(self, done: list[bool]) -> None:
        """Record which sub-envs ended their episode this round."""
        if self.wordle:
            # -1: the next round is the reset, after which the first word is due again
            self._turn = [-1 if d else t + 1 for t, d in zip(self._turn, done, strict=True)]


class ToolCallBench:
    """The tool-call rows' script: one Wordle tool call per timed unit, games reset untimed.

    Game ``g`` is ``reset(seed=g)`` and then guesses six distinct valid words of
    :data:`TOOL_WORDS` until the env says the game is over (six guesses, or a win). The
    runner's worker calls :meth:`prepare` (untimed: starts the next game when the last one
    ended) before every timed :meth:`call`. Subclasses implement ``_reset(seed)`` and
    ``_guess(word) -> done``, plus ``setup()`` / ``close()`` and ``server_pids`` / ``params``.
    """

    def __init__(self) -> None:
        self._game = -1
        self._turn = 0
        self._over = True
        self.resets = 0

    def _reset(self, seed: int) -> None:
        raise NotImplementedError

    def _guess(self, word: str) -> bool:
        raise NotImplementedError

    def prepare(self) -> None:
        """Start the next game if the last one is over (not part of any timed call)."""
        if self._over:
            self._game += 1
            self._turn = 0
            self._reset(self._game)
            self._over = False
            self.resets += 1

    def call(self) -> None:
        """One tool call: the game's next word."""
        word = TOOL_WORDS[(self._game * TOOL_GUESSES + self._turn) % len(TOOL_WORDS)]
        self._turn += 1
        done = self._guess(word)
        self._over = done or self._turn >= TOOL_GUESSES


class RolloutBench:
    """The rollout rows' script: the env side of one GRPO generation batch of N games.

    Batch ``b`` resets game ``i`` with ``seed=b * N + i``, then plays up to
    :data:`ROLLOUT_TURNS` turns; turn ``t`` guesses ``TOOL_WORDS[t]`` in every game still
    playing (a game ends on a win or after six guesses). One :meth:`round` is one batch;
    it returns the guesses made (env-steps; resets are not counted). The batch counter
    starts over at 0 before every timed window (:meth:`start_window`), so every variant
    and every repeat times the same seeds. Subclasses implement ``_reset(seeds)`` and
    ``_turn(playing, word) -> the games that ended``, plus ``setup()`` / ``close()`` and
    ``server_pids`` / ``params``.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._batch = 0
        self.window_steps: list[int] = []

    def _reset(self, seeds: list[int]) -> None:
        raise NotImplementedError

    def _turn(self, playing: list[int], word: str) -> set[int]:
        raise NotImplementedError

    def start_window(self) -> None:
        """The timed window starts: batch 0 again, steps per batch recorded afresh."""
        self._batch = 0
        self.window_steps = []

    def round(self) -> int:
        """One batch: reset every game, then the turns; the guesses made."""
        n = self.n
        self._reset([self._batch * n + i for i in range(n)])
        self._batch += 1
        playing = list(range(n))
        steps = 0
        for t in range(ROLLOUT_TURNS):
            steps += len(playing)
            ended = self._turn(playing, TOOL_WORDS[t])
            playing = [i for i in playing if i not in ended]
            if not playing:
                break
        self.window_steps.append(steps)
        return steps

    def window_params(self) -> dict[str, Any]:
        """What the timed window did besides its env-steps (the row's ``params``)."""
        batches = len(self.window_steps)
        return {
            "resets_in_window": self.n * batches,
            "turns": ROLLOUT_TURNS,
            "steps_per_batch_first": self.window_steps[0] if batches else None,
            "steps_per_batch_mean": round(sum(self.window_steps) / batches, 2) if batches else None,
        }


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (``q`` in [0, 1]) of a non-empty list: a measured value, never
    an interpolated one (numpy's ``nearest`` method: the sorted sample at index
    ``round(q * (n - 1))``, as every earlier run computed it).
    """
    return float(np.quantile(values, q, method="nearest"))


class _Channel:
    """Protocol lines on the original standard output; fd 1 itself goes to stderr."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    def send(self, **message: Any) -> None:
        self._out.write(json.dumps(message) + "\n")
        self._out.flush()

    @staticmethod
    def receive() -> dict[str, Any]:
        line = sys.stdin.readline()
        if not line:
            return {"cmd": "quit"}
        return json.loads(line)  # type: ignore[no-any-return]


def _sigterm_exits() -> None:
    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    # the runner owns Ctrl-C: it asks workers to stop in order
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _summary(lat: list[float], steps: int, elapsed: float) -> dict[str, Any]:
    return {
        "steps": steps,
        "rounds": len(lat),
        "elapsed": elapsed,
        "p50_ms": percentile(lat, 0.50) * 1e3,
        "p99_ms": percentile(lat, 0.99) * 1e3,
    }


def _timed(round_: Callable[[], int], duration: float) -> dict[str, Any]:
    pc = time.perf_counter
    lat: list[float] = []
    steps = 0
    start = pc()
    while True:
        a = pc()
        steps += round_()
        b = pc()
        lat.append(b - a)
        if b - start >= duration and len(lat) >= MIN_ROUNDS:
            return _summary(lat, steps, b - start)


def _warm(round_: Callable[[], int], warmup: float) -> None:
    end = time.perf_counter() + warmup
    round_()
    while time.perf_counter() < end:
        round_()


def _warm_calls(bench: Any, warmup: float) -> None:
    end = time.perf_counter() + warmup
    while True:
        bench.prepare()
        bench.call()
        if time.perf_counter() >= end:
            return


def _timed_calls(bench: Any, duration: float) -> dict[str, Any]:
    """Time each ``call()`` alone; ``elapsed`` is the time spent in calls, not the window."""
    pc = time.perf_counter
    lat: list[float] = []
    resets = bench.resets
    start = pc()
    while True:
        bench.prepare()
        a = pc()
        bench.call()
        b = pc()
        lat.append(b - a)
        if b - start >= duration and len(lat) >= MIN_ROUNDS:
            break
    out = _summary(lat, len(lat), sum(lat))
    out["params"] = {"window_s": round(b - start, 4), "resets_in_window": bench.resets - resets}
    return out


def _error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def run_worker(factory: Callable[[dict[str, Any]], Any]) -> None:
    """Serve the runner with synchronous benches until told to quit.

    ``factory(spec)`` makes the bench of one cell. A bench has ``setup() -> dict`` (extra
    setup fields; it sets ``server_pids`` and ``params``), ``close()``, and either
    ``round() -> env-steps`` (a step benchmark: warm-up, then a timed loop of rounds;
    optional ``start_window()`` is called between the two, ``window_params() -> dict``
    after the loop, e.g. a :class:`RolloutBench`),
    ``prepare()`` and ``call()`` (a :class:`ToolCallBench`: only each ``call`` is timed) or
    ``measure_once() -> dict`` (a one-shot measurement, e.g. opening sessions).
    """
    channel = _Channel()
    _sigterm_exits()
    bench: Any = None

    def close() -> None:
        nonlocal bench
        current, bench = bench, None
        if current is not None:
            current.close()

    try:
        while True:
            cmd = channel.receive()
            kind = cmd["cmd"]
            if kind == "quit":
                break
            try:
                if kind == "open":
                    close()
                    bench = factory(cmd["spec"])
                    extra = bench.setup()
                    channel.send(
                        event="setup", server_pids=bench.server_pids, params=bench.params, **extra
                    )
                elif kind == "measure":
                    one_shot = getattr(bench, "measure_once", None)
                    calls = isinstance(bench, ToolCallBench)
                    if calls:
                        _warm_calls(bench, cmd["warmup"])
                    elif one_shot is None:
                        _warm(bench.round, cmd["warmup"])
                    start_window = getattr(bench, "start_window", None)
                    if start_window is not None:
                        start_window()
                    channel.send(event="ready")
                    if channel.receive()["cmd"] != "go":
                        break
                    if calls:
                        result = _timed_calls(bench, cmd["duration"])
                    elif one_shot is not None:
                        result = one_shot()
                    else:
                        result = _timed(bench.round, cmd["duration"])
                        window_params = getattr(bench, "window_params", None)
                        if window_params is not None:
                            result["params"] = window_params()
                    channel.send(event="result", **result)
                elif kind == "close":
                    close()
                    channel.send(event="closed")
            except Exception as exc:
                message = _error(exc)
                try:
                    close()
                except Exception as also:
                    message += "\nwhile closing: " + _error(also)
                channel.send(event="error", message=message)
    finally:
        close()


async def _timed_async(round_: Callable[[], Awaitable[int]], duration: float) -> dict[str, Any]:
    pc = time.perf_counter
    lat: list[float] = []
    steps = 0
    start = pc()
    while True:
        a = pc()
        steps += await round_()
        b = pc()
        lat.append(b - a)
        if b - start >= duration and len(lat) >= MIN_ROUNDS:
            return _summary(lat, steps, b - start)


async def _warm_async(round_: Callable[[], Awaitable[int]], warmup: float) -> None:
    end = time.perf_counter() + warmup
    await round_()
    while time.perf_counter() < end:
        await round_()


async def _serve_async(factory: Callable[[dict[str, Any]], Any], channel: _Channel) -> None:
    import threading

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def read_commands() -> None:
        # a daemon thread: the loop keeps answering pings while the runner waits, and a
        # blocked read never holds the interpreter open
        while True:
            cmd = channel.receive()
            loop.call_soon_threadsafe(inbox.put_nowait, cmd)
            if cmd["cmd"] == "quit":
                return

    threading.Thread(target=read_commands, name="commands", daemon=True).start()
    bench: Any = None

    async def close() -> None:
        nonlocal bench
        current, bench = bench, None
        if current is not None:
            await current.close()

    try:
        while True:
            cmd = await inbox.get()
            kind = cmd["cmd"]
            if kind == "quit":
                break
            try:
                if kind == "open":
                    await close()
                    bench = factory(cmd["spec"])
                    extra = await bench.setup()
                    channel.send(
                        event="setup", server_pids=bench.server_pids, params=bench.params, **extra
                    )
                elif kind == "measure":
                    await _warm_async(bench.round, cmd["warmup"])
                    channel.send(event="ready")
                    if (await inbox.get())["cmd"] != "go":
                        break
                    result = await _timed_async(bench.round, cmd["duration"])
                    channel.send(event="result", **result)
                elif kind == "close":
                    await close()
                    channel.send(event="closed")
            except Exception as exc:
                message = _error(exc)
                try:
                    await close()
                except Exception as also:
                    message += "\nwhile closing: " + _error(also)
                channel.send(event="error", message=message)
    finally:
        await close()


def run_async_worker(factory: Callable[[dict[str, Any]], Any], *, use_uvloop: bool = False) -> None:
    """:func:`run_worker` for benches whose ``setup``, ``round`` and ``close`` are coroutines."""
    channel = _Channel()
    _sigterm_exits()
    if use_uvloop:
        import uvloop

        uvloop.run(_serve_async(factory, channel))
    else:
        asyncio.run(_serve_async(factory, channel))


def watch_stdin_then(action: Callable[[], None]) -> None:
    """Call ``action`` (in a daemon thread) once standard input reaches end of file.

    Servers started by the benchmark hold a pipe from their parent on stdin: when the
    parent exits, even by SIGKILL, the pipe closes and the server stops. No orphans.
    """
    import threading

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        action()

    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()
