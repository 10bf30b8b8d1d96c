"""The call state of an env: one enum and its transition table (as Gymnasium's ``AsyncState``).

Every facade over the engine (the single env, the vector env, the asyncio envs) asks
:func:`fire` before a call: the table says whether the call is allowed in the current
:class:`CallState`, the state it moves to, or the error it raises (the state is then
unchanged). The errors are Gymnasium's, as :class:`~gymnasium.vector.AsyncVectorEnv`
raises them (``docs/vector.md``, "Errors").

A state other than :attr:`CallState.DEFAULT` means requests are on the wire. A call that
was interrupted while waiting (``KeyboardInterrupt``, a cancelled task) leaves its state
and its requests behind: :attr:`CallState.WAITING_RESET` and :attr:`CallState.WAITING_CALL`
are then *left over*, and the next call first takes their replies (:data:`LEFT_OVER`),
so no reply is ever taken for another request's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from openenv_gym.exceptions import (
    EnvClosedError,
    NoPendingCallError,
    PendingCallError,
    UsageError,
)

__all__ = ["LEFT_OVER", "Call", "CallState", "fire"]


class CallState(enum.Enum):
    """What an env waits for."""

    __hash__ = object.__hash__  # members are singletons: hash them as C does, not by name

    DEFAULT = "default"
    """Nothing on the wire."""
    WAITING_RESET = "reset"
    """A reset's requests are on the wire."""
    WAITING_STEP = "step"
    """A step's requests are on the wire (``step_async``: ``step_wait`` takes them)."""
    WAITING_SEND = "send"
    """Some sub-envs' steps are on the wire (``send``: ``recv`` takes them)."""
    WAITING_CALL = "call"
    """A ``call("state")``'s requests are on the wire."""
    CLOSED = "closed"
    """Closed: every call raises :class:`~openenv_gym.exceptions.EnvClosedError`."""


class Call(enum.Enum):
    """The calls the table knows."""

    __hash__ = object.__hash__

    RESET = "reset"
    STEP_ASYNC = "step_async"
    STEP_WAIT = "step_wait"
    SEND = "send"
    RECV = "recv"
    STATE = "state"


LEFT_OVER = frozenset({CallState.WAITING_RESET, CallState.WAITING_CALL})
"""States only an interrupted call leaves: the next call takes their replies first."""


@dataclass(frozen=True, slots=True)
class _Refusal:
    make: Callable[[str, str], UsageError]
    message: str
    name: str

    def error(self) -> UsageError:
        return self.make(self.message, self.name)


def _pending(message: str, name: str) -> _Refusal:
    return _Refusal(PendingCallError, message, name)


def _nothing(message: str, name: str) -> _Refusal:
    return _Refusal(NoPendingCallError, message, name)


_D, _R, _S, _P, _C = (
    CallState.DEFAULT,
    CallState.WAITING_RESET,
    CallState.WAITING_STEP,
    CallState.WAITING_SEND,
    CallState.WAITING_CALL,
)
_COLLECT_FIRST = "a step is pending (step_async / send): collect it first"

TRANSITIONS: dict[tuple[CallState, Call], CallState | _Refusal] = {
    (_D, Call.RESET): _R,
    (_S, Call.RESET): _pending(_COLLECT_FIRST, "step"),
    (_P, Call.RESET): _pending(_COLLECT_FIRST, "send"),
    (_D, Call.STEP_ASYNC): _S,
    (_S, Call.STEP_ASYNC): _pending("a step is already pending: call step_wait() first", "step"),
    (_P, Call.STEP_ASYNC): _pending(
        "steps sent with send() are not all received: call recv() first", "send"
    ),
    (_D, Call.STEP_WAIT): _nothing("no step pending: call step_async() first", "step"),
    (_S, Call.STEP_WAIT): _S,  # back to DEFAULT once every reply is taken
    (_P, Call.STEP_WAIT): _nothing("no step pending: call step_async() first", "step"),
    (_D, Call.SEND): _P,
    (_S, Call.SEND): _pending("step_async() is pending: call step_wait() first", "step"),
    (_P, Call.SEND): _P,
    (_D, Call.RECV): _nothing("nothing pending: call send() first", "send"),
    (_S, Call.RECV): _pending("step_async() is pending: call step_wait() first", "step"),
    (_P, Call.RECV): _P,  # back to DEFAULT once no sub-env is out
    (_D, Call.STATE): _C,
    (_S, Call.STATE): _pending("a step is pending: call step_wait() first", "step"),
    (_P, Call.STATE): _pending("steps sent with send() are pending: call recv() first", "send"),
}
"""(state, call) -> the state the call moves to, or why it is refused. Left-over states
(:data:`LEFT_OVER`) are first taken back to DEFAULT by the engine."""


def fire(state: CallState, call: Call, closed_message: str) -> CallState:
    """The state ``call`` moves to from ``state``.

    Raises:
        EnvClosedError: ``state`` is CLOSED (with ``closed_message``).
        PendingCallError: Another call's replies are to be taken first.
        NoPendingCallError: Nothing to wait for.
    """
    if state is CallState.CLOSED:
        raise EnvClosedError(closed_message)
    outcome = TRANSITIONS[state, call]
    if isinstance(outcome, _Refusal):
        raise outcome.error()
    return outcome
