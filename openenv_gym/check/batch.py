"""The check of the batched protocol (``docs/protocol.md`` section 3), when a server offers it."""

from __future__ import annotations

import contextlib

from openenv_gym.check.context import Context, Failed, Findings
from openenv_gym.check.report import Status
from openenv_gym.protocol import batch as bp
from openenv_gym.transport import BatchConnection, BatchUnsupportedError

__all__ = ["check_batch"]


def check_batch(ctx: Context, stack: contextlib.ExitStack, found: Findings) -> None:
    """``batch``: two slots opened, reset, stepped, asked and closed over ``/batch``."""
    try:
        conn = BatchConnection.connect(ctx.base, ctx.timeouts, ctx.headers)
    except BatchUnsupportedError as exc:
        found.add(Status.SKIP, f"not offered ({exc})")
        return
    stack.callback(conn.close)
    hello = conn.server_info
    assert hello is not None
    found.info.update(server=hello.server, env=hello.env, max_slots=hello.max_slots)
    slots = [0, 1]

    def slot_errors(reply: bp.BatchReplyReceived, what: str, *, lenient: bool = False) -> bool:
        for slot, error in sorted(reply.errors.items()):
            text = f"{what}: slot {slot}: {error.code} ({error.message!r})"
            if lenient:
                found.warn(f"{text}; pass a valid action with --action")
            else:
                raise Failed(text)
        return not reply.errors

    slot_errors(conn.call(bp.Op.OPEN, slots), "open")
    slot_errors(conn.call(bp.Op.RESET, slots, [{"seed": ctx.seed}] * 2), "reset")
    done = ["open", "reset"]
    if ctx.action is None:
        found.warn(f"step not tried: {ctx.no_action_reason}")
    else:
        lenient = ctx.action_source != "the given action"
        if slot_errors(conn.call(bp.Op.STEP, slots, [ctx.action] * 2), "step", lenient=lenient):
            done.append("step")
    slot_errors(conn.call(bp.Op.STATE, slots), "state")
    slot_errors(conn.call(bp.Op.CLOSE, slots), "close")
    done += ["state", "close"]
    found.ok(
        f"{hello.server} serving {hello.env!r} (max_slots {hello.max_slots}): 2 slots, "
        f"{', '.join(done)} answered"
    )
