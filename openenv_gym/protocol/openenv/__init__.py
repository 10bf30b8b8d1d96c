"""OpenEnv's JSON ``/ws`` session protocol, client and server side, sans-I/O.

One WebSocket carries one environment session. Every frame is a JSON *text* frame
``{"type": ..., "data": ...}``. The client sends ``reset`` / ``step`` / ``state`` /
``close``; the server answers each of the first three with exactly one ``observation``,
``state`` or ``error`` frame and answers ``close`` by closing the socket. There are no
request ids, so at most one request is in flight (``docs/protocol.md`` section 2), and a
timeout is fatal for the session (section 2.5).

Usage, client side::

    session = ClientSession()
    session.send_reset(seed=1)
    for frame in session.data_to_send(): ...   # send each as a text frame
    session.receive_data(text_frame)           # for every frame received
    for event in session.events_received(): ...

The server side (:class:`ServerSession`) mirrors it: ``receive_data`` turns frames into
request events (answering malformed frames itself, as OpenEnv servers do), and
``send_observation`` / ``send_state`` / ``send_error`` queue replies.

The modules: :mod:`~openenv_gym.protocol.openenv.messages` (requests, replies, error
codes, codec), :mod:`~openenv_gym.protocol.openenv.client`,
:mod:`~openenv_gym.protocol.openenv.server`; the transition tables of both ends are in
:mod:`openenv_gym.protocol.states`. Every name is importable from here.
"""

from openenv_gym.protocol.openenv.client import ClientSession
from openenv_gym.protocol.openenv.messages import (
    CloseRequest,
    ErrorCode,
    ErrorReceived,
    ObservationReceived,
    Reply,
    Request,
    ResetRequest,
    StateReceived,
    StateRequest,
    StepRequest,
    code_ends_session,
    decode_reply,
    dumps,
    encode_request,
    observation_payload,
)
from openenv_gym.protocol.openenv.server import ServerSession
from openenv_gym.protocol.states import SessionState

__all__ = [
    "ClientSession",
    "CloseRequest",
    "ErrorCode",
    "ErrorReceived",
    "ObservationReceived",
    "Reply",
    "Request",
    "ResetRequest",
    "ServerSession",
    "SessionState",
    "StateReceived",
    "StateRequest",
    "StepRequest",
    "code_ends_session",
    "decode_reply",
    "dumps",
    "encode_request",
    "observation_payload",
]
