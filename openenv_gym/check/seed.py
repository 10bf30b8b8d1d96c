"""The ``seed`` check (``docs/check.md``, 7): does ``reset(seed=...)`` fix the episode?

A run is one fresh ``/ws`` session: ``reset(seed)``, then one ``step`` with an action. Three
runs with the same seed must give the same replies (observation, its ``metadata``, reward,
done). That alone proves little: an action the env refuses (``{"message": "a"}`` for
Wordle) gives the same reply whatever the seed chose. So runs with **other seeds** are the
control: the check only passes when some other seed gave different replies, which shows
that the replies reveal what the seed chose. The action is the one given, else each
candidate in turn (the one made from the schema, then the example actions of the
environments we know that fit the schema, e.g. a valid Wordle guess) until one tells.
When none tells, the check warns that it could not tell.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openenv_gym.check.actions import known_actions
from openenv_gym.check.context import (
    Context,
    Failed,
    Findings,
    Socket,
    accept_observation,
    ask_observation,
    describe,
    step_frame,
)
from openenv_gym.protocol import openenv as op

__all__ = ["CONTROL_SEEDS", "REPEATS", "check_seed"]

CONTROL_SEEDS = 2
"""How many other seeds (``seed + 1``, ``seed + 2``) a candidate action is tried with."""

REPEATS = 2
"""How many more runs with the check's seed must match the first (two: a random env whose
replies happen to coincide once, 2.5 % of Wordle's secrets for one guess, rarely does twice)."""

_MISSING = object()

_Outcome = tuple[dict[str, Any], Any, float | None, bool]
"""What is compared of a reply: the observation, the top-level metadata, reward, done."""


def _outcome(reply: op.ObservationReceived) -> _Outcome:
    return reply.observation, reply.metadata or {}, reply.reward, reply.done


@dataclass(frozen=True, slots=True)
class _Run:
    """One fresh session's ``reset(seed)`` and, when it could be made, one step."""

    seed: int
    action: dict[str, Any] | None
    reset: _Outcome
    step: _Outcome | None
    no_step: str = ""  # why there is no step
    ended: bool = False  # the episode ended at reset: there is nothing to step

    def same(self, other: _Run) -> bool:
        return (self.reset, self.step) == (other.reset, other.step)


def _run(ctx: Context, found: Findings, seed: int, action: dict[str, Any] | None) -> _Run:
    """``reset(seed)`` then one step with ``action``, on a fresh session.

    The session is closed before this returns, so the next one fits a server with room
    for a single session; a ``CAPACITY_REACHED`` right after a close is retried until
    the close timeout (the server may not have freed the slot yet).
    """
    reset = op.encode_request(op.ResetRequest({"seed": seed}))
    what = f"reset(seed={seed})"
    retry_until = ctx.until(ctx.close_wait)
    while True:
        with contextlib.ExitStack() as stack:
            sock = Socket.open(ctx, stack)
            raw, reply = sock.request(reset, what)
            full = isinstance(reply, op.ErrorReceived) and (
                reply.code == op.ErrorCode.CAPACITY_REACHED
            )
            if not full or time.monotonic() >= retry_until:
                answer = accept_observation(raw, reply, what, ctx, found)
                return _step_after(sock, answer, ctx, found, seed, action)
        ctx.check_budget()
        time.sleep(0.1)


def _step_after(
    sock: Socket,
    reply: op.ObservationReceived | op.ErrorReceived,
    ctx: Context,
    found: Findings,
    seed: int,
    action: dict[str, Any] | None,
) -> _Run:
    if isinstance(reply, op.ErrorReceived):
        raise Failed(f"reset(seed={seed}) was answered with {describe(reply)}")
    reset = _outcome(reply)
    if reply.done:
        return _Run(seed, action, reset, None, "the episode ended at reset", ended=True)
    if action is None:
        return _Run(seed, action, reset, None, ctx.no_action_reason)
    stepped = ask_observation(
        sock, step_frame(action), f"step after reset(seed={seed})", ctx, found
    )
    if isinstance(stepped, op.ErrorReceived):
        why = f"step {_text(action)} was answered with {describe(stepped)}"
        return _Run(seed, action, reset, None, why)
    return _Run(seed, action, reset, _outcome(stepped))


def _text(action: Mapping[str, Any]) -> str:
    return json.dumps(action, ensure_ascii=False)


def _candidates(ctx: Context) -> list[dict[str, Any] | None]:
    """The actions to try: the given one only; else the schema's, then known examples."""
    if ctx.action_source == "the given action":
        return [ctx.action]
    found: list[dict[str, Any] | None] = [] if ctx.action is None else [ctx.action]
    schema = (ctx.schema or {}).get("action")
    if isinstance(schema, Mapping):
        found += [a for a in known_actions(schema) if a not in found]
    return found or [None]


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key, _MISSING) != b.get(key, _MISSING):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    return path or "(the whole observation)"


def _difference(first: _Run, second: _Run) -> str:
    """Where two runs first differ: ``reset: feedback``, ``step: metadata.question``..."""
    for part in ("reset", "step"):
        a, b = getattr(first, part), getattr(second, part)
        if a == b:
            continue
        if a is None or b is None:
            return f"{part}: one was refused"
        if a[0] != b[0]:
            return f"{part}: {_first_difference(a[0], b[0])}"
        if a[1] != b[1]:
            return f"{part}: metadata.{_first_difference(a[1], b[1])}".rstrip(".")
        return f"{part}: reward or done"
    return "nothing"  # pragma: no cover - only called on runs that differ


def _telling(ctx: Context, found: Findings) -> tuple[_Run, _Run | None, list[str]]:
    """The first candidate's run whose replies some other seed changes.

    Returns ``(run, control, tried)``: the run with the check's seed, the control run
    that differed from it (None when no candidate told), and what was tried.
    """
    tried: list[str] = []
    first: _Run | None = None
    for action in _candidates(ctx):
        run = _run(ctx, found, ctx.seed, action)
        first = first or run
        if action is not None and run.step is None and not run.ended:
            tried.append(f"{_text(action)} ({run.no_step})")
            continue  # refused: it does not move the env
        for k in range(1, CONTROL_SEEDS + 1):
            control = _run(ctx, found, ctx.seed + k, action)
            if not run.same(control):
                return run, control, tried
        tried.append("no action" if action is None else _text(action))
        if run.ended:
            break  # nothing to step: other actions cannot tell more
    assert first is not None
    return first, None, tried


def check_seed(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``seed``: fresh sessions seeded alike give the same, another seed does not.

    Every session it opens is closed before the next one (``stack`` stays unused).
    """
    run, control, tried = _telling(ctx, found)
    reset = f"reset(seed={ctx.seed})"
    found.info["compared"] = ["reset"] if run.step is None else ["reset", "step"]
    found.info["deterministic"] = False
    what = reset if run.step is None else f"{reset} then step {_text(run.action or {})}"
    again = run
    for _ in range(REPEATS):
        again = _run(ctx, found, ctx.seed, run.action)
        if not run.same(again):
            break
    if not run.same(again):
        found.warn(
            f"{what} gave different replies on fresh sessions seeded alike (first difference: "
            f"{_difference(run, again)}): the seed does not fix the episode (allowed by "
            "OpenEnv)"
        )
        return
    if control is None:
        found.info["deterministic"] = None
        seeds = " and ".join(str(ctx.seed + k) for k in range(1, CONTROL_SEEDS + 1))
        found.warn(
            f"could not tell whether the seed is used: {what} gave the same replies on "
            f"{REPEATS + 1} fresh sessions, but so did seeds {seeds} "
            f"(tried: {'; '.join(tried)}): either nothing in the env is random, or nothing "
            "tried shows what the seed chose (pass an action that does with --action)"
        )
        return
    found.info["deterministic"] = True
    found.ok(
        f"{what} gave the same observations, metadata, rewards and done on {REPEATS + 1} fresh "
        f"sessions, and seed {control.seed} gave others ({_difference(run, control)})"
    )
