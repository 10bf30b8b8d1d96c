"""The checks of OpenEnv's JSON ``/ws`` protocol.

``session``, ``errors``, ``capacity`` and ``close`` (``docs/protocol.md`` section 2); the
``seed`` check is :mod:`openenv_gym.check.seed`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from openenv_gym.check.context import (
    CLOSE_FRAME,
    STATE_FRAME,
    Context,
    Failed,
    Findings,
    Socket,
    ask_observation,
    ask_state,
    describe,
    step_frame,
)
from openenv_gym.check.report import brief
from openenv_gym.exceptions import ConnectError, ConnectionLostError, RequestTimeoutError
from openenv_gym.protocol import openenv as op
from openenv_gym.spaces import deref

__all__ = ["check_capacity", "check_close", "check_errors", "check_session"]

_EXTRA_FIELD = "openenv_gym_check_extra"
_MISSING = object()


def check_session(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``session``: ``reset``, ``step`` and ``state`` on one session, reply shapes checked."""
    sock = Socket.open(ctx, stack)
    done: list[str] = []
    reply = ask_observation(
        sock, op.encode_request(op.ResetRequest({"seed": ctx.seed})), "reset", ctx, found
    )
    if isinstance(reply, op.ErrorReceived):
        raise Failed(f"reset was answered with {describe(reply)}")
    done.append("reset")
    if ctx.action is None:
        found.warn(f"step not tried: {ctx.no_action_reason} (pass one with --action)")
    else:
        found.info["action"] = ctx.action
        reply = ask_observation(sock, step_frame(ctx.action), "step", ctx, found)
        if isinstance(reply, op.ErrorReceived):
            text = (
                f"step {ctx.action_text()} ({ctx.action_source}) "
                f"was answered with {describe(reply)}"
            )
            if ctx.action_source == "the given action":
                found.fail(text)
            else:
                found.warn(f"{text}; pass a valid action with --action")
        else:
            done.append(f"step {ctx.action_text()}")
    ask_state(sock, "state", ctx, found)
    done.append("state")
    found.ok(f"{', '.join(done)}: well-formed replies")


def check_errors(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``errors``: bad frames get their error codes and the session survives them."""
    sock = Socket.open(ctx, stack)
    extra_action = {**(ctx.action or {}), _EXTRA_FIELD: 1}
    probes = (
        ("this is not JSON", "a frame that is not JSON", op.ErrorCode.INVALID_JSON),
        (
            '{"type":"openenv_gym_check_unknown"}',
            "an unknown message type",
            op.ErrorCode.UNKNOWN_TYPE,
        ),
        (
            step_frame(extra_action),
            "a step with an extra action field",
            op.ErrorCode.VALIDATION_ERROR,
        ),
    )
    codes: list[str] = []
    for frame, what, expected in probes:
        try:
            _, reply = sock.request(frame, what)
        except ConnectionLostError as exc:
            raise Failed(f"{exc}; the session must survive {expected}") from exc
        if isinstance(reply, op.ErrorReceived) and reply.code == expected:
            codes.append(expected)
        elif isinstance(reply, op.ErrorReceived):
            found.fail(f"{what} was answered with {reply.code}, expected {expected}")
            if reply.ends_session:
                raise Failed(f"the server ended the session after {what}")
        elif (
            isinstance(reply, op.ObservationReceived) and expected is op.ErrorCode.VALIDATION_ERROR
        ):
            action_schema = (ctx.schema or {}).get("action")
            forbids = (
                isinstance(action_schema, Mapping)
                and (deref(action_schema, action_schema) or {}).get("additionalProperties") is False
            )
            text = f"{what} was accepted (an observation), expected {expected}"
            (found.fail if forbids else found.warn)(
                text + (" although the action schema forbids extra fields" if forbids else "")
            )
        else:
            found.fail(f"{what} was answered with {describe(reply)}, expected {expected}")
    try:
        ask_state(sock, "state after the bad frames", ctx, found)
    except ConnectionLostError as exc:
        raise Failed(f"{exc}: error replies must keep the session") from exc
    if codes:
        found.ok(f"{', '.join(codes)}, session kept (state still answered)")
    else:
        found.ok("session kept (state still answered)")


def _accepts(sock: Socket, what: str) -> op.ErrorReceived | None:
    """Whether a fresh session is live: None if so, else its session-ending error."""
    _, reply = sock.request(STATE_FRAME, what)
    if isinstance(reply, op.ErrorReceived) and reply.ends_session:
        return reply
    return None


def _server_closes(sock: Socket, wait: float) -> bool:
    return sock.wait_closed(wait)


def check_capacity(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``capacity``: sessions opened until ``CAPACITY_REACHED`` or the bound; slots freed."""
    bound = ctx.max_sessions
    live: list[Socket] = []
    refused: op.ErrorReceived | None = None
    with contextlib.ExitStack() as sessions:
        for number in range(1, bound + 1):
            try:
                sock = Socket.open(ctx, sessions)
            except ConnectError as exc:
                found.warn(
                    f"session {number} was refused at connect ({exc}), not with CAPACITY_REACHED"
                )
                break
            what = f"state on session {number}"
            try:
                refused = _accepts(sock, what)
            except ConnectionLostError as exc:
                raise Failed(f"{exc}; a server at capacity sends CAPACITY_REACHED first") from exc
            if refused is None:
                live.append(sock)
                continue
            if refused.code != op.ErrorCode.CAPACITY_REACHED:
                raise Failed(f"session {number} was ended with {describe(refused)}")
            if not _server_closes(sock, ctx.close_wait):
                found.warn(
                    f"the server kept the socket of session {number} open after CAPACITY_REACHED"
                )
            break
        # close them all, politely, before asking whether the slots come back
        for sock in live:
            sock.close()
    if refused is None and len(live) == bound:
        found.info["capacity_at_least"] = bound
        found.ok(f"at least {bound} sessions open at once (the bound of this check)")
        return
    if not live:
        why = describe(refused) if refused is not None else "see above"
        raise Failed(f"the server refused the first session: {why}")
    found.info["capacity"] = len(live)
    shown = ""
    if refused is not None:
        maximum = refused.details.get("max_sessions")
        limit = f", max_sessions {maximum}" if maximum is not None else ""
        shown = f" (CAPACITY_REACHED on session {len(live) + 1}{limit})"
    found.ok(f"capacity {len(live)} session{'s' if len(live) != 1 else ''}{shown}")
    # the slots must be freed by close
    deadline = time.monotonic() + ctx.close_wait
    while True:
        with contextlib.ExitStack() as again:
            sock = Socket.open(ctx, again)
            still = _accepts(sock, "state on a session after closing the others")
        if still is None:
            found.ok("sessions are freed by close")
            return
        if time.monotonic() > deadline:
            raise Failed(
                f"after closing every session the server still refuses one: {describe(still)}"
            )
        ctx.check_budget()
        time.sleep(0.1)


def check_close(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``close``: ``{"type": "close"}`` makes the server close the socket (code 1000)."""
    sock = Socket.open(ctx, stack)
    sock.send(CLOSE_FRAME)
    started = time.monotonic()
    frames: list[Any] = []
    deadline = ctx.until(ctx.close_wait)
    raw = sock.raw
    try:
        while True:
            frames.append(raw.receive(deadline))
    except ConnectionLostError:
        pass
    except RequestTimeoutError:
        ctx.check_budget()
        raise Failed(
            f"the server did not close the socket within {ctx.close_wait} s of "
            '{"type":"close"} (it ignores close: its sessions stay open until the client '
            "disconnects)"
        ) from None
    elapsed = time.monotonic() - started
    if frames:
        found.warn(f"the server sent {len(frames)} frame(s) after close: {brief(frames[0])}")
    received = raw.close_frame
    if received is None:
        found.warn("the server dropped the connection without a close frame (expected code 1000)")
    elif received.code != 1000:
        found.warn(f"the server closed with code {received.code}, expected 1000")
    else:
        found.ok(f"the server closed the socket with code 1000 after {elapsed * 1000:.1f} ms")
    found.info["close_code"] = received.code if received is not None else 1006
