"""Conformance check of any OpenEnv server: ``openenv-gym check URL``.

:func:`check_server` runs nine checks, in order, against a running server and returns a
:class:`CheckReport` (``docs/check.md`` describes each one):

1. ``health`` -- ``GET /health`` is 200 ``{"status": "healthy"}``;
2. ``schema`` -- ``GET /schema`` has ``action``, ``observation`` and ``state`` JSON schemas;
3. ``metadata`` -- ``GET /metadata`` (a warning when absent);
4. ``session`` -- one ``/ws`` session: ``reset``, ``step``, ``state``, reply shapes checked
   (``docs/protocol.md`` section 2.3);
5. ``errors`` -- bad input on one session gets ``INVALID_JSON``, ``UNKNOWN_TYPE`` and
   ``VALIDATION_ERROR``, and the session survives them (section 2.4);
6. ``capacity`` -- sessions opened until ``CAPACITY_REACHED`` or a bound;
7. ``seed`` -- ``reset(seed=...)`` and one step with the same action, on two fresh sessions,
   give the same observations (reported, not required);
8. ``close`` -- ``{"type": "close"}`` makes the server close the socket (code 1000);
9. ``batch`` -- the batched protocol, when offered (section 3; skipped otherwise).

Every check runs under its own time budget and closes every socket it opened; whatever
goes wrong becomes a failed check carrying the exception's text, never a traceback.

The step needs a valid action: the one given (``action=``), or one made from the action
schema by :func:`example_action`.
"""

from __future__ import annotations

import contextlib
import enum
import json
import reprlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from openenv_gym._http import get_json, http_base, with_token
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    ConnectError,
    ConnectionLostError,
    OpenEnvGymError,
    RemoteProtocolError,
    RequestTimeoutError,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.transport.connection import BatchConnection, BatchUnsupportedError
from openenv_gym.transport.wire import WebSocket, open_websocket, wait, ws_url

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_TIMEOUTS",
    "CheckReport",
    "CheckResult",
    "Status",
    "check_server",
    "example_action",
]

DEFAULT_TIMEOUTS = Timeouts(connect=5.0, step=10.0, close=5.0)
"""Timeouts of the check: ``step`` bounds each reply, ``close`` the wait for a closed socket."""

_EXTRA_FIELD = "openenv_gym_check_extra"
_CLOSE_FRAME = op.encode_request(op.CloseRequest())
_STATE_FRAME = op.encode_request(op.StateRequest())

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlevel = 3


def _brief(value: Any) -> str:
    return _REPR.repr(value)


class Status(enum.StrEnum):
    """Outcome of one check."""

    PASS = "pass"  # the server does what the protocol says
    WARN = "warn"  # allowed, but worth knowing (or the check could not be completed)
    FAIL = "fail"  # the server breaks the protocol, or the check could not run
    SKIP = "skip"  # not applicable (e.g. the batched protocol is not offered)


_SEVERITY = {Status.SKIP: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check.

    Attributes:
        name: The check's name (one of :data:`CHECK_NAMES`).
        status: pass, warn, fail or skip.
        detail: What was found, problems first.
        info: Facts worth a machine's attention (``capacity``, ``action``, ...), JSON values.
    """

    name: str
    status: Status
    detail: str
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "info": dict(self.info),
        }


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every check's result, in order.

    Attributes:
        url: The server checked.
        results: One :class:`CheckResult` per check, in the order they ran.
    """

    url: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """Whether no check failed (warnings and skips are fine)."""
        return all(r.status is not Status.FAIL for r in self.results)

    def counts(self) -> dict[str, int]:
        """How many checks ended in each status."""
        return {s.value: sum(r.status is s for r in self.results) for s in Status}

    def __getitem__(self, name: str) -> CheckResult:
        """The result of the check called ``name``."""
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``openenv-gym check --json`` prints)."""
        return {
            "url": self.url,
            "ok": self.ok,
            "counts": self.counts(),
            "checks": [r.to_dict() for r in self.results],
        }

    def render(self) -> str:
        """The report as text, one line per check, then a summary line.

        >>> report = CheckReport("http://h:1", (CheckResult("health", Status.PASS, "200"),))
        >>> print(report.render())
        openenv-gym check http://h:1
          PASS  health    200
        OK: 1 passed, 0 warnings, 0 failed, 0 skipped
        """
        width = max([8, *(len(r.name) for r in self.results)])
        lines = [f"openenv-gym check {self.url}"]
        lines += [
            f"  {r.status.value.upper():<4}  {r.name:<{width}}  {r.detail}".rstrip()
            for r in self.results
        ]
        c = self.counts()
        lines.append(
            f"{'OK' if self.ok else 'FAILED'}: {c['pass']} passed, {c['warn']} "
            f"warning{'' if c['warn'] == 1 else 's'}, {c['fail']} failed, {c['skip']} skipped"
        )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


# ----------------------------------------------------------------------- actions

_NO = object()  # "no example value can be made"


def example_action(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """Make a plausible action from an action JSON schema: its required fields only.

    Strings become ``"a"`` (repeated to ``minLength``), integers their ``minimum`` (or 0),
    numbers likewise, booleans ``false``, enums their first value; ``const``, ``default``
    and ``examples`` are used when given; ``$ref`` into ``$defs`` is followed. Returns
    None when some required field cannot be made (the caller then needs a given action).

    >>> example_action({"properties": {"message": {"type": "string"}}, "required": ["message"]})
    {'message': 'a'}
    >>> example_action(
    ...     {
    ...         "properties": {
    ...             "action_id": {"type": "integer", "minimum": 2},
    ...             "game_name": {"type": "string", "default": "catch"},
    ...         },
    ...         "required": ["action_id"],
    ...     }
    ... )
    {'action_id': 2}
    """
    value = _example(schema, schema, 0)
    return value if isinstance(value, dict) else None


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(16):
        if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
            return schema
        ref: str = schema["$ref"]
        if not ref.startswith("#/"):
            return None
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return None


def _example(schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    schema = _resolve(schema, root)
    if depth > 8 or not isinstance(schema, Mapping):
        return _NO
    if "const" in schema:
        return schema["const"]
    for key in ("enum", "examples"):
        values = schema.get(key)
        if isinstance(values, list) and values:
            return values[0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list):
            # prefer a real value over null
            ordered = sorted(
                options, key=lambda o: isinstance(o, Mapping) and o.get("type") == "null"
            )
            for option in ordered:
                value = _example(option, root, depth + 1)
                if value is not _NO:
                    return value
            return _NO
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None and isinstance(schema.get("properties"), Mapping):
        kind = "object"
    return _typed_example(kind, schema, root, depth)


def _number(schema: Mapping[str, Any], integer: bool) -> float:
    low = schema.get("minimum")
    if low is None and schema.get("exclusiveMinimum") is not None:
        low = schema["exclusiveMinimum"] + 1
    high = schema.get("maximum")
    if high is None and schema.get("exclusiveMaximum") is not None:
        high = schema["exclusiveMaximum"] - 1
    value = low if low is not None else 0
    if high is not None and value > high:
        value = high
    return int(value) if integer else float(value)


def _typed_example(
    kind: Any, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int
) -> Any:
    if kind == "string":
        length = max(1, int(schema.get("minLength") or 0))
        if isinstance(schema.get("maxLength"), int):
            length = min(length, schema["maxLength"])
        return "a" * length
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        count = int(schema.get("minItems") or 0)
        if not count:
            return []
        item = _example(schema.get("items", {}), root, depth + 1)
        return _NO if item is _NO else [item] * count
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        out: dict[str, Any] = {}
        for name in required:
            value = _example(properties.get(name), root, depth + 1)
            if value is _NO:
                return _NO
            out[name] = value
        return out
    return _NO


# ------------------------------------------------------------------------ plumbing


class _Failed(Exception):
    """Ends a check with a failure whose text is the message."""


class _Findings:
    """What one check found: (status, text) pairs, plus facts for :attr:`CheckResult.info`."""

    def __init__(self) -> None:
        self.items: list[tuple[Status, str]] = []
        self.info: dict[str, Any] = {}

    def add(self, status: Status, text: str) -> None:
        self.items.append((status, text))

    def ok(self, text: str) -> None:
        self.add(Status.PASS, text)

    def warn(self, text: str) -> None:
        self.add(Status.WARN, text)

    def fail(self, text: str) -> None:
        self.add(Status.FAIL, text)

    def result(self, name: str) -> CheckResult:
        if not self.items:
            return CheckResult(name, Status.PASS, "", dict(self.info))
        status = max((s for s, _ in self.items), key=_SEVERITY.__getitem__)
        ordered = sorted(self.items, key=lambda item: -_SEVERITY[item[0]])
        detail = "; ".join(text for _, text in ordered)
        return CheckResult(name, status, detail, dict(self.info))


@dataclass
class _Context:
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
            raise _Failed(f"the check did not finish within {self.budget} s")

    def action_text(self) -> str:
        return json.dumps(self.action, ensure_ascii=False)


def _close_text(ws: WebSocket) -> str:
    received = ws.close_received
    if received is None:
        return "connection lost"
    reason = received.reason
    return f"close code {received.code}{f' {reason!r}' if reason else ''}"


class _Socket:
    """One raw WebSocket to ``/ws``: any text out, one parsed reply per request.

    Raw, not :class:`~openenv_gym.transport.connection.JsonSession`: the checks send
    frames no client would (not JSON, unknown types) and watch how the server closes.
    """

    def __init__(self, ws: WebSocket, ctx: _Context) -> None:
        self.ws = ws
        self.ctx = ctx
        self.timeouts = ctx.timeouts

    @classmethod
    def open(cls, ctx: _Context, stack: contextlib.ExitStack) -> _Socket:
        """Connect; the socket is closed when ``stack`` exits."""
        ctx.check_budget()
        ws = open_websocket(
            ws_url(ctx.base, "/ws"),
            timeout=ctx.until(ctx.timeouts.connect) - time.monotonic(),
            headers=ctx.headers,
        )
        sock = cls(ws, ctx)
        stack.callback(sock.close)
        return sock

    def send(self, text: str) -> None:
        try:
            with self.ws.lock:
                self.ws.send(text, self.ctx.until(self.timeouts.step))
        except (ConnectionLostError, RequestTimeoutError) as exc:
            raise ConnectionLostError(
                f"the server closed the session ({_close_text(self.ws)})"
            ) from exc

    def receive(self, what: str) -> tuple[Any, op.Reply]:
        """Read one frame: ``(raw frame, parsed reply)``.

        Raises:
            RemoteProtocolError: Malformed reply (the message names the problem).
            RequestTimeoutError: No frame in time (the socket is then dropped).
            ConnectionLostError: The server closed the socket instead.
        """
        try:
            with self.ws.lock:
                frame = self.ws.receive(self.ctx.until(self.timeouts.step))
        except RequestTimeoutError as exc:
            self.ws.abort()
            self.ctx.check_budget()
            raise RequestTimeoutError(f"{what}: no reply within {self.timeouts.step} s") from exc
        except ConnectionLostError as exc:
            raise ConnectionLostError(
                f"{what}: the server closed the session without a reply ({_close_text(self.ws)})"
            ) from exc
        try:
            return frame, op.decode_reply(frame)
        except RemoteProtocolError as exc:
            raise RemoteProtocolError(f"{what}: malformed reply: {exc}: {_brief(frame)}") from exc

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
        deadline = self.ctx.until(seconds)
        ws = self.ws
        with ws.lock:
            while not ws.closed:
                if not wait([ws], deadline):
                    return False
                ws.read()
        return True

    def close(self) -> None:
        """Say ``close``, then close the socket ourselves (bounded); never raises."""
        with contextlib.suppress(ConnectionLostError, RequestTimeoutError), self.ws.lock:
            self.ws.send(_CLOSE_FRAME, time.monotonic() + self.ctx.close_wait)
        with self.ws.lock:
            self.ws.close(self.ctx.close_wait)


def _describe(reply: op.Reply) -> str:
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


def _observation_shape(raw: Any, what: str, ctx: _Context, found: _Findings) -> None:
    """Warnings about an observation frame that parsed but is not quite OpenEnv's shape."""
    data = json.loads(raw)["data"]
    for key in ("reward", "done"):
        if key not in data:
            found.warn(f"{what} reply has no {key!r} key (docs/protocol.md 2.3)")
    schema = (ctx.schema or {}).get("observation")
    missing = _missing_required(
        data["observation"], _resolve(schema, schema or {}), _OBS_FRAME_KEYS
    )
    if missing:
        found.warn(f"{what} observation lacks required field(s) {', '.join(missing)} of /schema")


def _observation(
    sock: _Socket, frame: str, what: str, ctx: _Context, found: _Findings
) -> op.ObservationReceived | op.ErrorReceived:
    """Send ``frame``; the reply must be an observation or an error that keeps the session."""
    raw, reply = sock.request(frame, what)
    return _accept_observation(raw, reply, what, ctx, found)


def _accept_observation(
    raw: Any, reply: op.Reply, what: str, ctx: _Context, found: _Findings
) -> op.ObservationReceived | op.ErrorReceived:
    """The reply to ``what`` must be an observation or an error that keeps the session."""
    if isinstance(reply, op.ObservationReceived):
        _observation_shape(raw, what, ctx, found)
        return reply
    if isinstance(reply, op.ErrorReceived) and not reply.ends_session:
        return reply
    raise _Failed(f"{what} was answered with {_describe(reply)}, expected an observation frame")


def _state(sock: _Socket, what: str, ctx: _Context, found: _Findings) -> dict[str, Any]:
    _, reply = sock.request(_STATE_FRAME, what)
    if not isinstance(reply, op.StateReceived):
        raise _Failed(f"{what} was answered with {_describe(reply)}, expected a state frame")
    schema = (ctx.schema or {}).get("state")
    missing = _missing_required(reply.state, _resolve(schema, schema or {}), frozenset())
    if missing:
        found.warn(f"state lacks required field(s) {', '.join(missing)} of /schema")
    return reply.state


def _step_frame(action: Mapping[str, Any]) -> str:
    return op.encode_request(op.StepRequest(action))


# -------------------------------------------------------------------------- checks

Check = Callable[[_Context, contextlib.ExitStack, _Findings], None]


def _get(ctx: _Context, path: str) -> tuple[int, Any]:
    ctx.check_budget()
    return get_json(
        ctx.base + path, ctx.until(ctx.timeouts.step) - time.monotonic(), headers=ctx.headers
    )


def _check_health(ctx: _Context, _: contextlib.ExitStack, found: _Findings) -> None:
    try:
        status, body = _get(ctx, "/health")
    except ConnectError as exc:
        ctx.reachable = False
        raise _Failed(f"the server is unreachable: {exc}") from exc
    except RemoteProtocolError as exc:
        raise _Failed(f"GET /health: {exc}") from exc
    if status != 200:
        found.fail(f"GET /health answered HTTP {status}, expected 200")
    elif body == {"status": "healthy"}:
        found.ok('GET /health: 200 {"status": "healthy"}')
    else:
        found.warn(f'GET /health: 200 but {_brief(body)}, expected {{"status": "healthy"}}')


def _schema_part(schema: Any, name: str) -> str | None:
    """Why ``schema[name]`` is not an object schema with properties; None if it is."""
    part = schema.get(name) if isinstance(schema, Mapping) else None
    if part is None:
        return f"no {name!r} schema"
    if not isinstance(part, Mapping):
        return f"{name!r} is not a JSON schema object"
    resolved = _resolve(part, part)
    if not isinstance(resolved, Mapping) or not isinstance(resolved.get("properties"), Mapping):
        return f"the {name!r} schema has no properties"
    return None


def _check_schema(ctx: _Context, _: contextlib.ExitStack, found: _Findings) -> None:
    try:
        status, body = _get(ctx, "/schema")
    except RemoteProtocolError as exc:
        raise _Failed(f"GET /schema: {exc}") from exc
    if status != 200:
        ctx.no_action_reason = f"GET /schema answered HTTP {status}"
        raise _Failed(f"GET /schema answered HTTP {status}, expected 200 with the JSON schemas")
    if not isinstance(body, dict):
        raise _Failed(f"GET /schema: not a JSON object: {_brief(body)}")
    ctx.schema = body
    problems = [p for p in (_schema_part(body, n) for n in ("action", "observation", "state")) if p]
    for problem in problems:
        found.fail(f"GET /schema: {problem}")
    if not problems:
        action_fields, observation, state = (
            _resolve(body[name], body[name])["properties"]
            for name in ("action", "observation", "state")
        )
        found.ok(
            f"action ({', '.join(action_fields)}), observation ({len(observation)} fields), "
            f"state ({len(state)} fields)"
        )
    if ctx.action is not None:
        return
    if _schema_part(body, "action") is not None:
        ctx.no_action_reason = "no usable action schema"
        return
    action = example_action(_resolve(body["action"], body["action"]))
    if action is None:
        ctx.no_action_reason = "cannot make an action from the action schema"
        found.warn(f"{ctx.no_action_reason}; pass one with --action")
        return
    ctx.action, ctx.action_source = action, "made from the action schema"
    found.info["action"] = action


def _check_metadata(ctx: _Context, _: contextlib.ExitStack, found: _Findings) -> None:
    try:
        status, body = _get(ctx, "/metadata")
    except RemoteProtocolError as exc:
        found.warn(f"GET /metadata: {exc}")
        return
    if status != 200:
        found.warn(f"GET /metadata answered HTTP {status} (OpenEnv servers serve it)")
    elif not isinstance(body, dict):
        found.warn(f"GET /metadata: not a JSON object: {_brief(body)}")
    else:
        shown = ", ".join(f"{k} {body[k]!r}" for k in ("name", "version") if body.get(k))
        found.ok(f"GET /metadata: 200{f' ({shown})' if shown else ''}")
        found.info.update({k: body[k] for k in ("name", "version") if body.get(k) is not None})


def _check_session(ctx: _Context, stack: contextlib.ExitStack, found: _Findings) -> None:
    sock = _Socket.open(ctx, stack)
    done: list[str] = []
    reply = _observation(
        sock, op.encode_request(op.ResetRequest({"seed": ctx.seed})), "reset", ctx, found
    )
    if isinstance(reply, op.ErrorReceived):
        raise _Failed(f"reset was answered with {_describe(reply)}")
    done.append("reset")
    if ctx.action is None:
        found.warn(f"step not tried: {ctx.no_action_reason} (pass one with --action)")
    else:
        found.info["action"] = ctx.action
        reply = _observation(sock, _step_frame(ctx.action), "step", ctx, found)
        if isinstance(reply, op.ErrorReceived):
            text = (
                f"step {ctx.action_text()} ({ctx.action_source}) "
                f"was answered with {_describe(reply)}"
            )
            if ctx.action_source == "the given action":
                found.fail(text)
            else:
                found.warn(f"{text}; pass a valid action with --action")
        else:
            done.append(f"step {ctx.action_text()}")
    _state(sock, "state", ctx, found)
    done.append("state")
    found.ok(f"{', '.join(done)}: well-formed replies")


def _check_errors(ctx: _Context, stack: contextlib.ExitStack, found: _Findings) -> None:
    sock = _Socket.open(ctx, stack)
    extra_action = {**(ctx.action or {}), _EXTRA_FIELD: 1}
    probes = (
        ("this is not JSON", "a frame that is not JSON", op.ErrorCode.INVALID_JSON),
        (
            '{"type":"openenv_gym_check_unknown"}',
            "an unknown message type",
            op.ErrorCode.UNKNOWN_TYPE,
        ),
        (
            _step_frame(extra_action),
            "a step with an extra action field",
            op.ErrorCode.VALIDATION_ERROR,
        ),
    )
    codes: list[str] = []
    for frame, what, expected in probes:
        try:
            _, reply = sock.request(frame, what)
        except ConnectionLostError as exc:
            raise _Failed(f"{exc}; the session must survive {expected}") from exc
        if isinstance(reply, op.ErrorReceived) and reply.code == expected:
            codes.append(expected)
        elif isinstance(reply, op.ErrorReceived):
            found.fail(f"{what} was answered with {reply.code}, expected {expected}")
            if reply.ends_session:
                raise _Failed(f"the server ended the session after {what}")
        elif (
            isinstance(reply, op.ObservationReceived) and expected is op.ErrorCode.VALIDATION_ERROR
        ):
            action_schema = (ctx.schema or {}).get("action")
            forbids = (
                isinstance(action_schema, Mapping)
                and (_resolve(action_schema, action_schema) or {}).get("additionalProperties")
                is False
            )
            text = f"{what} was accepted (an observation), expected {expected}"
            (found.fail if forbids else found.warn)(
                text + (" although the action schema forbids extra fields" if forbids else "")
            )
        else:
            found.fail(f"{what} was answered with {_describe(reply)}, expected {expected}")
    try:
        _state(sock, "state after the bad frames", ctx, found)
    except ConnectionLostError as exc:
        raise _Failed(f"{exc}: error replies must keep the session") from exc
    if codes:
        found.ok(f"{', '.join(codes)}, session kept (state still answered)")
    else:
        found.ok("session kept (state still answered)")


def _accepts(sock: _Socket, what: str) -> op.ErrorReceived | None:
    """Whether a fresh session is live: None if so, else its session-ending error."""
    _, reply = sock.request(_STATE_FRAME, what)
    if isinstance(reply, op.ErrorReceived) and reply.ends_session:
        return reply
    return None


def _server_closes(sock: _Socket, wait: float) -> bool:
    return sock.wait_closed(wait)


def _check_capacity(ctx: _Context, stack: contextlib.ExitStack, found: _Findings) -> None:
    bound = ctx.max_sessions
    live: list[_Socket] = []
    refused: op.ErrorReceived | None = None
    with contextlib.ExitStack() as sessions:
        for number in range(1, bound + 1):
            try:
                sock = _Socket.open(ctx, sessions)
            except ConnectError as exc:
                found.warn(
                    f"session {number} was refused at connect ({exc}), not with CAPACITY_REACHED"
                )
                break
            what = f"state on session {number}"
            try:
                refused = _accepts(sock, what)
            except ConnectionLostError as exc:
                raise _Failed(f"{exc}; a server at capacity sends CAPACITY_REACHED first") from exc
            if refused is None:
                live.append(sock)
                continue
            if refused.code != op.ErrorCode.CAPACITY_REACHED:
                raise _Failed(f"session {number} was ended with {_describe(refused)}")
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
        why = _describe(refused) if refused is not None else "see above"
        raise _Failed(f"the server refused the first session: {why}")
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
            sock = _Socket.open(ctx, again)
            still = _accepts(sock, "state on a session after closing the others")
        if still is None:
            found.ok("sessions are freed by close")
            return
        if time.monotonic() > deadline:
            raise _Failed(
                f"after closing every session the server still refuses one: {_describe(still)}"
            )
        ctx.check_budget()
        time.sleep(0.1)


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key, _NO) != b.get(key, _NO):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    return path or "(the whole observation)"


_Outcome = tuple[dict[str, Any], float | None, bool]
"""What the seed check compares of a reply: the observation without metadata, reward, done."""


def _outcome(reply: op.ObservationReceived) -> _Outcome:
    observation = {k: v for k, v in reply.observation.items() if k != "metadata"}
    return observation, reply.reward, reply.done


@dataclass(frozen=True, slots=True)
class _SeededRun:
    """One fresh session's ``reset(seed)`` and, when it could be made, one step."""

    reset: _Outcome
    step: _Outcome | None
    no_step: str = ""  # why there is no step
    ended: bool = False  # the episode ended at reset: there is nothing to step


def _seeded_run(ctx: _Context, found: _Findings, which: str) -> _SeededRun:
    """``reset(seed)`` then one step with the check's action, on a fresh session.

    The session is closed before this returns, so the next one fits a server with room
    for a single session; a ``CAPACITY_REACHED`` right after a close is retried until
    the close timeout (the server may not have freed the slot yet).
    """
    reset = op.encode_request(op.ResetRequest({"seed": ctx.seed}))
    what = f"{which} reset"
    retry_until = ctx.until(ctx.close_wait)
    while True:
        with contextlib.ExitStack() as stack:
            sock = _Socket.open(ctx, stack)
            raw, reply = sock.request(reset, what)
            full = isinstance(reply, op.ErrorReceived) and (
                reply.code == op.ErrorCode.CAPACITY_REACHED
            )
            if not full or time.monotonic() >= retry_until:
                return _step_after(
                    sock, _accept_observation(raw, reply, what, ctx, found), ctx, found, which
                )
        ctx.check_budget()
        time.sleep(0.1)


def _step_after(
    sock: _Socket,
    reply: op.ObservationReceived | op.ErrorReceived,
    ctx: _Context,
    found: _Findings,
    which: str,
) -> _SeededRun:
    if isinstance(reply, op.ErrorReceived):
        raise _Failed(f"{which} reset was answered with {_describe(reply)}")
    reset = _outcome(reply)
    if reply.done:
        return _SeededRun(reset, None, "the episode ended at reset", ended=True)
    if ctx.action is None:
        return _SeededRun(reset, None, ctx.no_action_reason)
    stepped = _observation(sock, _step_frame(ctx.action), f"{which} step", ctx, found)
    if isinstance(stepped, op.ErrorReceived):
        why = f"step {ctx.action_text()} was answered with {_describe(stepped)}"
        return _SeededRun(reset, None, why)
    return _SeededRun(reset, _outcome(stepped))


def _difference(first: _Outcome, second: _Outcome) -> str:
    if first[0] != second[0]:
        return _first_difference(first[0], second[0])
    return "reward or done"


def _check_seed(ctx: _Context, _: contextlib.ExitStack, found: _Findings) -> None:
    first = _seeded_run(ctx, found, "first")
    second = _seeded_run(ctx, found, "second")
    reset = f"reset(seed={ctx.seed})"
    found.info["compared"] = ["reset"]
    found.info["deterministic"] = False
    if first.reset != second.reset:
        found.warn(
            f"{reset} twice gave different observations (first difference: "
            f"{_difference(first.reset, second.reset)}) on two fresh sessions; seeding is "
            "not reproducible (allowed by OpenEnv)"
        )
        return
    if first.ended:  # so did the second: ``done`` is part of what was compared
        found.info["deterministic"] = True
        found.ok(f"{reset} gave the same observation on two fresh sessions ({first.no_step})")
        return
    if first.step is None or second.step is None:
        found.info["deterministic"] = None  # the reset alone proves little
        no_step = first.no_step or second.no_step
        found.warn(
            f"{reset} gave the same observation on two fresh sessions, but no step was "
            f"compared ({no_step}): a reset alone rarely shows whether the seed is used "
            "(pass a valid action with --action)"
        )
        return
    found.info["compared"] = ["reset", "step"]
    action = ctx.action_text()
    if first.step != second.step:
        found.warn(
            f"{reset} gave the same observation on two fresh sessions, but step {action} "
            f"then gave different observations (first difference: "
            f"{_difference(first.step, second.step)}): the seed does not fix the episode "
            "(allowed by OpenEnv)"
        )
        return
    found.info["deterministic"] = True
    found.ok(
        f"{reset} then step {action} gave the same observations, rewards and done on two "
        "fresh sessions"
    )


def _check_close(ctx: _Context, stack: contextlib.ExitStack, found: _Findings) -> None:
    sock = _Socket.open(ctx, stack)
    sock.send(_CLOSE_FRAME)
    started = time.monotonic()
    frames: list[Any] = []
    deadline = ctx.until(ctx.close_wait)
    ws = sock.ws
    with ws.lock:
        try:
            while True:
                frames.append(ws.receive(deadline))
        except ConnectionLostError:
            pass
        except RequestTimeoutError:
            ctx.check_budget()
            raise _Failed(
                f"the server did not close the socket within {ctx.close_wait} s of "
                '{"type":"close"} (it ignores close: its sessions stay open until the client '
                "disconnects)"
            ) from None
    elapsed = time.monotonic() - started
    if frames:
        found.warn(f"the server sent {len(frames)} frame(s) after close: {_brief(frames[0])}")
    received = ws.close_received
    if received is None:
        found.warn("the server dropped the connection without a close frame (expected code 1000)")
    elif received.code != 1000:
        found.warn(f"the server closed with code {received.code}, expected 1000")
    else:
        found.ok(f"the server closed the socket with code 1000 after {elapsed * 1000:.1f} ms")
    found.info["close_code"] = received.code if received is not None else 1006


def _check_batch(ctx: _Context, stack: contextlib.ExitStack, found: _Findings) -> None:
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
                raise _Failed(text)
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


_CHECKS: tuple[tuple[str, Check], ...] = (
    ("health", _check_health),
    ("schema", _check_schema),
    ("metadata", _check_metadata),
    ("session", _check_session),
    ("errors", _check_errors),
    ("capacity", _check_capacity),
    ("seed", _check_seed),
    ("close", _check_close),
    ("batch", _check_batch),
)

CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in _CHECKS)
"""The checks, in the order they run."""


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, _Failed | OpenEnvGymError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _run_one(name: str, check: Check, ctx: _Context, budget: float) -> CheckResult:
    found = _Findings()
    ctx.deadline, ctx.budget = time.monotonic() + budget, budget
    try:
        with contextlib.ExitStack() as stack:
            check(ctx, stack, found)
    except Exception as exc:
        found.fail(_error_text(exc))
    finally:
        ctx.deadline = None
    return found.result(name)


def _run(ctx: _Context, budget: float) -> CheckReport:
    results: list[CheckResult] = []
    for name, check in _CHECKS:
        if not ctx.reachable:
            results.append(CheckResult(name, Status.SKIP, "the server is unreachable"))
            continue
        results.append(_run_one(name, check, ctx, budget))
    return CheckReport(ctx.base, tuple(results))


def check_server(
    url: str,
    *,
    timeouts: Timeouts | None = None,
    seed: int = 1,
    action: Mapping[str, Any] | None = None,
    max_sessions: int = 16,
    check_timeout: float = 60.0,
    token: str | None = None,
) -> CheckReport:
    """Check that the server at ``url`` speaks OpenEnv's protocols as specified.

    Args:
        url: Base URL (``http(s)://host:port[/prefix]``, ``ws(s)://`` or ``host:port``).
        timeouts: ``connect`` and ``step`` (each reply) and ``close`` (the wait for a
            closed socket); default :data:`DEFAULT_TIMEOUTS`. ``None`` fields take the
            default's value: the check never waits forever.
        seed: Passed to every ``reset``.
        action: A valid action (the fields of the env's action model); default: made
            from the action schema by :func:`example_action`.
        max_sessions: Most sessions the capacity check opens at once.
        check_timeout: Seconds each check may take in all.
        token: Bearer token for a server that demands one (default: ``OPENENV_GYM_TOKEN``).

    Returns:
        The report; :attr:`CheckReport.ok` is false when any check failed.

    Raises:
        ConfigurationError: An argument is invalid. (Everything the server does is reported,
            not raised.)
    """
    if not isinstance(url, str):
        raise ArgumentTypeError(f"url must be a string, got {_brief(url)}")
    if timeouts is not None and not isinstance(timeouts, Timeouts):
        raise ArgumentTypeError(f"timeouts must be a Timeouts or None, got {_brief(timeouts)}")
    base = DEFAULT_TIMEOUTS if timeouts is None else timeouts
    base = replace(
        base,
        **{
            name: getattr(DEFAULT_TIMEOUTS, name)
            for name in ("connect", "step", "close")
            if getattr(base, name) is None
        },
    )
    if action is not None and not isinstance(action, Mapping):
        raise ConfigurationError(f"action must be a JSON object, got {_brief(action)}")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigurationError(f"max_sessions must be a positive integer, got {max_sessions!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigurationError(f"seed must be an integer, got {seed!r}")
    if not check_timeout > 0:
        raise ConfigurationError(f"check_timeout must be > 0, got {check_timeout!r}")
    ctx = _Context(
        base=http_base(url),
        timeouts=base,
        seed=seed,
        max_sessions=max_sessions,
        action=dict(action) if action is not None else None,
        action_source="the given action" if action is not None else "",
        headers=with_token(None, token),
    )
    return _run(ctx, check_timeout)
