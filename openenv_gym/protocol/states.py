"""Every state machine of both protocols, as data: states, events, and four transition tables.

One module holds every transition, as h11's ``_state.py`` does: the state of a JSON
``/ws`` session (:class:`SessionState`, ``docs/protocol.md`` section 2.5) and of a
batched connection (:class:`ConnectionState`, section 3.7), the events that move each end,
and one table per end mapping each legal (state, event) pair to the next state. Every
transition goes through :func:`fire`; a pair a table does not list is illegal.

>>> fire(JSON_CLIENT_TRANSITIONS, SessionState.IDLE, JsonClientEvent.SEND_STEP)
<SessionState.AWAITING_OBSERVATION: 'awaiting_observation'>
>>> fire(BATCH_SERVER_TRANSITIONS, ConnectionState.NEW, BatchServerEvent.SEND_REPLY)
Traceback (most recent call last):
...
openenv_gym.protocol.states.IllegalTransition: send_reply is illegal in state new
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from openenv_gym.exceptions import LocalProtocolError

__all__ = [
    "BATCH_CLIENT_READING",
    "BATCH_CLIENT_TRANSITIONS",
    "BATCH_SERVER_TRANSITIONS",
    "JSON_CLIENT_READING",
    "JSON_CLIENT_TRANSITIONS",
    "JSON_SERVER_ANSWERING",
    "JSON_SERVER_READING",
    "JSON_SERVER_TRANSITIONS",
    "BatchClientEvent",
    "BatchServerEvent",
    "ConnectionState",
    "IllegalTransition",
    "JsonClientEvent",
    "JsonServerEvent",
    "SessionState",
    "fire",
]

_S = TypeVar("_S", bound=enum.Enum)
_E = TypeVar("_E", bound=enum.Enum)


class IllegalTransition(LocalProtocolError):
    """A (state, event) pair its table does not list.

    A state machine lets it through only where the pair is legal by construction;
    elsewhere it raises an error that says what was wrong.

    Attributes:
        state: The state.
        event: The event.
    """

    def __init__(self, state: enum.Enum, event: enum.Enum) -> None:
        super().__init__(f"{event.value} is illegal in state {state.value}")
        self.state = state
        self.event = event


def fire(table: Mapping[tuple[_S, _E], _S], state: _S, event: _E) -> _S:
    """The state ``event`` leads to from ``state``, by ``table``.

    Raises:
        IllegalTransition: The table does not list the pair.
    """
    try:
        return table[state, event]
    except KeyError:
        raise IllegalTransition(state, event) from None


# ------------------------------------------------------------------ JSON /ws (2.5)


class SessionState(enum.Enum):
    """States of a JSON ``/ws`` session (``docs/protocol.md`` section 2.5).

    Both ends use them: ``ClientSession.state`` and ``ServerSession.state`` go through the
    same states for the same frames.
    """

    IDLE = "idle"  # open, no request in flight
    AWAITING_OBSERVATION = "awaiting_observation"  # reset or step sent, not answered yet
    AWAITING_STATE = "awaiting_state"  # state sent, not answered yet
    CLOSED = "closed"  # close sent, fatal error, or connection lost

    # Members are singletons, so identity is their equality: hash them by identity too, in
    # C (Enum's own __hash__ hashes the name in Python), for the transition tables' keys.
    __hash__ = object.__hash__


class JsonClientEvent(enum.Enum):
    """What happens to a ``ClientSession``: the columns of its transition table."""

    SEND_RESET = "send_reset"
    SEND_STEP = "send_step"
    SEND_STATE = "send_state"
    SEND_CLOSE = "send_close"
    RECEIVE_OBSERVATION = "receive_observation"
    RECEIVE_STATE = "receive_state"
    RECEIVE_ERROR = "receive_error"  # an error frame whose code keeps the session
    RECEIVE_FATAL_ERROR = "receive_fatal_error"  # an error frame whose code ends it
    PROTOCOL_ERROR = "protocol_error"  # a frame that is malformed or answers nothing asked
    CONNECTION_LOST = "connection_lost"

    __hash__ = object.__hash__


class JsonServerEvent(enum.Enum):
    """What happens to a ``ServerSession``: the columns of its transition table."""

    RECEIVE_RESET = "receive_reset"
    RECEIVE_STEP = "receive_step"
    RECEIVE_STATE = "receive_state"
    RECEIVE_CLOSE = "receive_close"
    RECEIVE_BAD_FRAME = "receive_bad_frame"  # a malformed text frame, answered (2.6)
    RECEIVE_BINARY = "receive_binary"  # a binary frame, answered with SESSION_ERROR
    SEND_OBSERVATION = "send_observation"
    SEND_STATE = "send_state"
    SEND_ERROR = "send_error"  # with a code that keeps the session
    SEND_FATAL_ERROR = "send_fatal_error"  # with a code that ends it

    __hash__ = object.__hash__


_IDLE = SessionState.IDLE
_AWAITING_OBSERVATION = SessionState.AWAITING_OBSERVATION
_AWAITING_STATE = SessionState.AWAITING_STATE
_ENDED = SessionState.CLOSED

_JC = JsonClientEvent
JSON_CLIENT_TRANSITIONS: dict[tuple[SessionState, JsonClientEvent], SessionState] = {
    (_IDLE, _JC.SEND_RESET): _AWAITING_OBSERVATION,
    (_IDLE, _JC.SEND_STEP): _AWAITING_OBSERVATION,
    (_IDLE, _JC.SEND_STATE): _AWAITING_STATE,
    (_IDLE, _JC.SEND_CLOSE): _ENDED,
    (_IDLE, _JC.RECEIVE_FATAL_ERROR): _ENDED,  # unsolicited, e.g. CAPACITY_REACHED
    (_IDLE, _JC.PROTOCOL_ERROR): _ENDED,
    (_IDLE, _JC.CONNECTION_LOST): _ENDED,
    (_AWAITING_OBSERVATION, _JC.SEND_CLOSE): _ENDED,
    (_AWAITING_OBSERVATION, _JC.RECEIVE_OBSERVATION): _IDLE,
    (_AWAITING_OBSERVATION, _JC.RECEIVE_ERROR): _IDLE,
    (_AWAITING_OBSERVATION, _JC.RECEIVE_FATAL_ERROR): _ENDED,
    (_AWAITING_OBSERVATION, _JC.PROTOCOL_ERROR): _ENDED,
    (_AWAITING_OBSERVATION, _JC.CONNECTION_LOST): _ENDED,
    (_AWAITING_STATE, _JC.SEND_CLOSE): _ENDED,
    (_AWAITING_STATE, _JC.RECEIVE_STATE): _IDLE,
    (_AWAITING_STATE, _JC.RECEIVE_ERROR): _IDLE,
    (_AWAITING_STATE, _JC.RECEIVE_FATAL_ERROR): _ENDED,
    (_AWAITING_STATE, _JC.PROTOCOL_ERROR): _ENDED,
    (_AWAITING_STATE, _JC.CONNECTION_LOST): _ENDED,
    (_ENDED, _JC.CONNECTION_LOST): _ENDED,
}
"""``ClientSession``: (state, event) -> next state. A pair not listed is illegal (2.5)."""

_JS = JsonServerEvent
JSON_SERVER_TRANSITIONS: dict[tuple[SessionState, JsonServerEvent], SessionState] = {
    (_IDLE, _JS.RECEIVE_RESET): _AWAITING_OBSERVATION,
    (_IDLE, _JS.RECEIVE_STEP): _AWAITING_OBSERVATION,
    (_IDLE, _JS.RECEIVE_STATE): _AWAITING_STATE,
    (_IDLE, _JS.RECEIVE_CLOSE): _ENDED,
    (_IDLE, _JS.RECEIVE_BAD_FRAME): _IDLE,
    (_IDLE, _JS.RECEIVE_BINARY): _ENDED,
    (_IDLE, _JS.SEND_FATAL_ERROR): _ENDED,  # unsolicited, e.g. CAPACITY_REACHED
    (_AWAITING_OBSERVATION, _JS.SEND_OBSERVATION): _IDLE,
    (_AWAITING_OBSERVATION, _JS.SEND_ERROR): _IDLE,
    (_AWAITING_OBSERVATION, _JS.SEND_FATAL_ERROR): _ENDED,
    (_AWAITING_STATE, _JS.SEND_STATE): _IDLE,
    (_AWAITING_STATE, _JS.SEND_ERROR): _IDLE,
    (_AWAITING_STATE, _JS.SEND_FATAL_ERROR): _ENDED,
}
"""``ServerSession``: (state, event) -> next state. A pair not listed is illegal (2.5)."""

_JSON_CLIENT_RECEIVES = (
    _JC.RECEIVE_OBSERVATION,
    _JC.RECEIVE_STATE,
    _JC.RECEIVE_ERROR,
    _JC.RECEIVE_FATAL_ERROR,
    _JC.PROTOCOL_ERROR,
)
_JSON_SERVER_RECEIVES = tuple(e for e in JsonServerEvent if e.name.startswith("RECEIVE_"))
# where a frame may be fed at all: the states with some receive event in their table row
JSON_CLIENT_READING = frozenset(s for s, e in JSON_CLIENT_TRANSITIONS if e in _JSON_CLIENT_RECEIVES)
"""The states in which a ``ClientSession`` may be fed a frame."""
JSON_SERVER_READING = frozenset(s for s, e in JSON_SERVER_TRANSITIONS if e in _JSON_SERVER_RECEIVES)
"""The states in which a ``ServerSession`` may be fed a frame."""
JSON_SERVER_ANSWERING = frozenset(s for s, e in JSON_SERVER_TRANSITIONS if e is _JS.SEND_ERROR)
"""The states in which a ``ServerSession`` has a request pending (an error may answer it)."""


# ------------------------------------------------------------------ batched (3.7)


class ConnectionState(enum.Enum):
    """States of a batched connection (section 3.7)."""

    NEW = "new"  # client: nothing sent yet; server: no valid hello received yet
    HELLO_SENT = "hello_sent"  # client only: hello sent, its reply not received yet
    OPEN = "open"  # client: hello answered; server: valid hello received
    CLOSED = "closed"  # client only: hello refused, bad frame, or connection lost

    __hash__ = object.__hash__  # as SessionState's


class BatchClientEvent(enum.Enum):
    """What happens to a ``BatchClient``: the columns of its transition table."""

    SEND_HELLO = "send_hello"
    SEND_REQUEST = "send_request"  # send_open / send_reset / send_step / send_state / send_close
    RECEIVE_HELLO = "receive_hello"  # a valid hello reply
    RECEIVE_REPLY = "receive_reply"  # a reply, or an op: "error" with the id of a request
    RECEIVE_FATAL_ERROR = "receive_fatal_error"  # an op: "error" without id, or for hello
    PROTOCOL_ERROR = "protocol_error"  # a frame that breaks the protocol (3.6.2)
    CONNECTION_LOST = "connection_lost"

    __hash__ = object.__hash__


class BatchServerEvent(enum.Enum):
    """What happens to a ``BatchServer``: the columns of its transition table."""

    RECEIVE_HELLO = "receive_hello"  # a valid hello
    RECEIVE_REQUEST = "receive_request"  # a valid open / reset / step / state / close
    RECEIVE_BAD_FRAME = "receive_bad_frame"  # a frame answered with op: "error" (3.6.2)
    SEND_REPLY = "send_reply"  # send_hello / send_results / send_table

    __hash__ = object.__hash__


_NEW = ConnectionState.NEW
_HELLO_SENT = ConnectionState.HELLO_SENT
_OPEN = ConnectionState.OPEN
_CLOSED = ConnectionState.CLOSED

_BC = BatchClientEvent
BATCH_CLIENT_TRANSITIONS: dict[tuple[ConnectionState, BatchClientEvent], ConnectionState] = {
    (_NEW, _BC.SEND_HELLO): _HELLO_SENT,
    (_NEW, _BC.RECEIVE_FATAL_ERROR): _CLOSED,
    (_NEW, _BC.PROTOCOL_ERROR): _CLOSED,
    (_NEW, _BC.CONNECTION_LOST): _CLOSED,
    (_HELLO_SENT, _BC.SEND_REQUEST): _HELLO_SENT,  # pipelined behind hello
    (_HELLO_SENT, _BC.RECEIVE_HELLO): _OPEN,
    (_HELLO_SENT, _BC.RECEIVE_REPLY): _HELLO_SENT,
    (_HELLO_SENT, _BC.RECEIVE_FATAL_ERROR): _CLOSED,
    (_HELLO_SENT, _BC.PROTOCOL_ERROR): _CLOSED,
    (_HELLO_SENT, _BC.CONNECTION_LOST): _CLOSED,
    (_OPEN, _BC.SEND_REQUEST): _OPEN,
    (_OPEN, _BC.RECEIVE_REPLY): _OPEN,
    (_OPEN, _BC.RECEIVE_FATAL_ERROR): _CLOSED,
    (_OPEN, _BC.PROTOCOL_ERROR): _CLOSED,
    (_OPEN, _BC.CONNECTION_LOST): _CLOSED,
    (_CLOSED, _BC.CONNECTION_LOST): _CLOSED,
}
"""``BatchClient``: (state, event) -> next state. A pair not listed is illegal (3.7)."""

_BS = BatchServerEvent
BATCH_SERVER_TRANSITIONS: dict[tuple[ConnectionState, BatchServerEvent], ConnectionState] = {
    (_NEW, _BS.RECEIVE_HELLO): _OPEN,  # at once: requests pipelined behind it are accepted
    (_NEW, _BS.RECEIVE_BAD_FRAME): _NEW,
    (_OPEN, _BS.RECEIVE_REQUEST): _OPEN,
    (_OPEN, _BS.RECEIVE_BAD_FRAME): _OPEN,
    (_OPEN, _BS.SEND_REPLY): _OPEN,
}
"""``BatchServer``: (state, event) -> next state. A pair not listed is illegal (3.7)."""

_BATCH_CLIENT_RECEIVES = (
    _BC.RECEIVE_HELLO,
    _BC.RECEIVE_REPLY,
    _BC.RECEIVE_FATAL_ERROR,
    _BC.PROTOCOL_ERROR,
)
BATCH_CLIENT_READING = frozenset(
    s for s, e in BATCH_CLIENT_TRANSITIONS if e in _BATCH_CLIENT_RECEIVES
)
"""The states in which a ``BatchClient`` may be fed a frame."""
