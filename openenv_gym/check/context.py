"""What the checks share: their findings, their context, and the raw ``/ws`` socket they use.

A check is a function ``(context, stack, findings)``: it records what it found in the
findings, closes what it opened by putting it on the stack, and ends early with
:class:`Failed` (a failure whose text is the message).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from openenv_gym.check.report import SEVERITY, CheckResult, Status, brief
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import ConnectionLostError, RemoteProtocolError, RequestTimeoutError
from openenv_gym.protocol import openenv as op
from openenv_gym.spaces import deref
from openenv_gym.transport import RawSocket

__all__ = [
    "CLOSE_FRAME",
    "STATE_FRAME",
    "Check",
    "Context",
    "Failed",
    "Findings",
    "Socket",
    "accept_observation",
    "ask_observation",
    "ask_state",
    "describe",
    "step_frame",
]

CLOSE_FRAME = op.encode_request(op.CloseRequest())
STATE_FRAME = op.encode_request(op.StateRequest())


class Failed(Exception):
    """Ends a check with a failure whose text is the message."""


class Findings:
    """What one check found: (status, text) pairs, plus facts for :attr:`CheckResult.info`."""

    def __init__(self) -> None:
        self.items: list[tuple[Status, str]] = []
        self.info: dict[str, Any] = {}

    def add(self, status: Status, text: str) -> None:
        """Record a finding."""
        self.items.append((status, text))

    def ok(self, text: str) -> None:
        """Record a pass."""
        self.add(Status.PASS, text)

    def warn(self, text: str) -> None:
        """Record a warning."""
        self.add(Status.WARN, text)

    def fail(self, text: str) -> None:
        """Record a failure."""
        self.add(Status.FAIL, text)

    def result(self, name: str) -> CheckResult:
        """The check's result: the worst status, its findings worst first."""
        if not self.items:
            return CheckResult(name, Status.PASS, "", dict(self.info))
        status = max((s for s, _ in self.items), key=SEVERITY.__getitem__)
        ordered = sorted(self.items, key=lambda item: -SEVERITY[item[0]])
        detail = "; ".join(text for _, text in ordered)
        return CheckResult(name, status, detail, dict(self.info))


@dataclass
class Context:
    """What the checks share: where the server is, settings, and what earlier checks learned."""

    base: str
    timeouts: Timeouts
    seed: int
    max_sessions: int
    action: dict[str, Any] | None
    action_source: str  # "the given action" / "made from the action schema" / ""
    schema: dict[str, Any] | None = None
    reachable: bool = True
    no_action_reason: str = "no action schema"
    deadline: float | None = None  # the running check's budget
    budget: float = 60.0
    headers: dict[str, str] | None = None  # Authorization, when the server wants a token

    @property
    def close_wait(self) -> float:
        """Seconds to wait for a socket to close."""
        assert self.timeouts.close is not None
        return self.timeouts.close

    def until(self, seconds: float | None) -> float:
        """The instant ``seconds`` from now, or the check's deadline if that comes first."""
        assert seconds is not None
        instant = time.monotonic() + seconds
        return instant if self.deadline is None else min(instant, self.deadline)

    def check_budget(self) -> None:
        """Fail the running check if its time budget is spent."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise Failed(f"the check did not finish within {self.budget} s")

    def action_text(self) -> str:
        """The check's action as JSON text."""
        return json.dumps(self.action, ensure_ascii=False)


def _close_text(sock: RawSocket) -> str:
    received = sock.close_frame
    return "connection lost" if received is None else str(received)


class Socket:
    """One raw WebSocket to ``/ws``: any text out, one parsed reply per request.

    Raw (a :class:`~openenv_gym.transport.RawSocket`), not the client's JSON session:
    the checks send frames no client would (not JSON, unknown types) and watch how the
    server closes.
    """

    def __init__(self, raw: RawSocket, ctx: Context) -> None:
        self.raw = raw
        self.ctx = ctx
        self.timeouts = ctx.timeouts

    @classmethod
    def open(cls, ctx: Context, stack: contextlib.ExitStack) -> Socket:
        """Connect; the socket is closed when ``stack`` exits."""
        ctx.check_budget()
        raw = RawSocket.connect(
            ctx.base,
            "/ws",
            timeout=ctx.until(ctx.timeouts.connect) - time.monotonic(),
            headers=ctx.headers,
        )
        sock = cls(raw, ctx)
        stack.callback(sock.close)
        return sock

    def send(self, text: str) -> None:
        """Send one frame (a socket the server closed: :class:`ConnectionLostError`)."""
        try:
            self.raw.send(text, self.ctx.until(self.timeouts.step))
        except (ConnectionLostError, RequestTimeoutError) as exc:
            raise ConnectionLostError(
                f"the server closed the session ({_close_text(self.raw)})"
            ) from exc

    def receive(self, what: str) -> tuple[Any, op.Reply]:
        """Read one frame: ``(raw frame, parsed reply)``.

        Raises:
            RemoteProtocolError: Malformed reply (the message names the problem).
            RequestTimeoutError: No frame in time (the socket is then dropped).
            ConnectionLostError: The server closed the socket instead.
        """
        try:
            frame = self.raw.receive(self.ctx.until(self.timeouts.step))
        except RequestTimeoutError as exc:
            self.raw.abort()
            self.ctx.check_budget()
            raise RequestTimeoutError(f"{what}: no reply within {self.timeouts.step} s") from exc
        except ConnectionLostError as exc:
            raise ConnectionLostError(
                f"{what}: the server closed the session without a reply ({_close_text(self.raw)})"
            ) from exc
        try:
            return frame, op.decode_reply(frame)
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"{what}: malformed reply: {exc}: {brief(frame)}") from exc

    def request(self, text: str, what: str) -> tuple[Any, op.Reply]:
        """Send one frame and read the one reply.

        A socket the server already closed may still hold its last frame (e.g.
        ``CAPACITY_REACHED``, pushed right after the upgrade): that frame is the reply.
        """
        with contextlib.suppress(ConnectionLostError):
            self.send(text)
        return self.receive(what)

    def wait_closed(self, seconds: float) -> bool:
        """Whether the server closes the socket within ``seconds``."""
        return self.raw.wait_closed(self.ctx.until(seconds))

    def close(self) -> None:
        """Say ``close``, then close the socket ourselves (bounded); never raises."""
        self.raw.close(self.ctx.close_wait, goodbye=[CLOSE_FRAME])


def describe(reply: op.Reply) -> str:
    """How a reply is named in a finding."""
    if isinstance(reply, op.ObservationReceived):
        return "an observation frame"
    if isinstance(reply, op.StateReceived):
        return "a state frame"
    return f"error {reply.code} ({reply.message!r})"


def _missing_required(data: Mapping[str, Any], schema: Any, skip: frozenset[str]) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    required = schema.get("required") or []
    return [k for k in required if isinstance(k, str) and k not in skip and k not in data]


_OBS_FRAME_KEYS = frozenset({"reward", "done", "metadata"})


def _observation_shape(raw: Any, what: str, ctx: Context, found: Findings) -> None:
    """Warnings about an observation frame that parsed but is not quite OpenEnv's shape."""
    data = json.loads(raw)["data"]
    for key in ("reward", "done"):
        if key not in data:
            found.warn(f"{what} reply has no {key!r} key (docs/protocol.md 2.3)")
    schema = (ctx.schema or {}).get("observation")
    missing = _missing_required(data["observation"], deref(schema or {}, schema), _OBS_FRAME_KEYS)
    if missing:
        found.warn(f"{what} observation lacks required field(s) {', '.join(missing)} of /schema")


def ask_observation(
    sock: Socket, frame: str, what: str, ctx: Context, found: Findings
) -> op.ObservationReceived | op.ErrorReceived:
    """Send ``frame``; the reply must be an observation or an error that keeps the session."""
    raw, reply = sock.request(frame, what)
    return accept_observation(raw, reply, what, ctx, found)


def accept_observation(
    raw: Any, reply: op.Reply, what: str, ctx: Context, found: Findings
) -> op.ObservationReceived | op.ErrorReceived:
    """The reply to ``what`` must be an observation or an error that keeps the session."""
    if isinstance(reply, op.ObservationReceived):
        _observation_shape(raw, what, ctx, found)
        return reply
    if isinstance(reply, op.ErrorReceived) and not reply.ends_session:
        return reply
    raise Failed(f"{what} was answered with {describe(reply)}, expected an observation frame")


def ask_state(sock: Socket, what: str, ctx: Context, found: Findings) -> dict[str, Any]:
    """Send ``state``; the reply must be a state frame (missing required fields: a warning)."""
    _, reply = sock.request(STATE_FRAME, what)
    if not isinstance(reply, op.StateReceived):
        raise Failed(f"{what} was answered with {describe(reply)}, expected a state frame")
    schema = (ctx.schema or {}).get("state")
    missing = _missing_required(reply.state, deref(schema or {}, schema), frozenset())
    if missing:
        found.warn(f"state lacks required field(s) {', '.join(missing)} of /schema")
    return reply.state


def step_frame(action: Mapping[str, Any]) -> str:
    """The ``step`` request carrying ``action``."""
    return op.encode_request(op.StepRequest(action))


Check = Callable[[Context, contextlib.ExitStack, Findings], None]
"""One check: it reports through its :class:`Findings`; what it opens goes on the stack."""
