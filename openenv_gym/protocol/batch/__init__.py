"""openenv-gym's batched protocol, versions 1 and 2: msgpack binary frames, sans-I/O.

One WebSocket connection (path ``/batch``, subprotocol :data:`SUBPROTOCOL` for version 1,
:data:`SUBPROTOCOL_V2` for version 2) carries many environment *slots*. One frame carries
one operation for many slots; every reply lists a result or an error per slot, so one
failing env never fails the batch. Requests carry ids, so several may be in flight.
Version 2 adds the *columnar* forms: observations, metadata and actions may travel as
one column per field (``cols``, ``meta_cols``) instead of one map per slot, and numeric
columns as one ndarray. ``docs/protocol.md`` section 3 is the specification.

Usage, client side::

    conn = BatchClient()
    conn.send_hello()
    rid = conn.send_open([0, 1, 2])
    for frame in conn.data_to_send(): ...          # binary frames
    conn.receive_data(frame)
    for event in conn.events_received(): ...       # HelloReceived, BatchReplyReceived, ...

The server side (:class:`BatchServer`) turns frames into :class:`BatchRequestReceived`
events and replies with :meth:`BatchServer.send_results`.

The modules, as websockets and h11 split theirs: :mod:`~openenv_gym.protocol.batch.codec`
(frames as msgpack), :mod:`~openenv_gym.protocol.batch.columns` (version 2's columns),
:mod:`~openenv_gym.protocol.batch.messages` (constants, operations, codes, events),
:mod:`~openenv_gym.protocol.batch.client` and :mod:`~openenv_gym.protocol.batch.server`
(the two ends); the transition tables are in :mod:`openenv_gym.protocol.states`. Every
public name is importable from here.
"""

from openenv_gym.protocol.batch.client import BatchClient
from openenv_gym.protocol.batch.codec import decode_frame, encode_frame
from openenv_gym.protocol.batch.columns import column_value, columns_to_rows
from openenv_gym.protocol.batch.messages import (
    DEFAULT_MAX_FRAME,
    MAX_REQUEST_ID,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    SUBPROTOCOL,
    SUBPROTOCOL_V2,
    SUBPROTOCOLS,
    BatchReplyReceived,
    BatchRequestReceived,
    FrameErrorCode,
    HelloReceived,
    HelloRequestReceived,
    Op,
    RequestFailed,
    ResultTable,
    SlotError,
    SlotErrorCode,
    SlotResult,
    version_of,
)
from openenv_gym.protocol.batch.server import BatchServer
from openenv_gym.protocol.states import ConnectionState

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAX_REQUEST_ID",
    "PROTOCOL_VERSION",
    "PROTOCOL_VERSIONS",
    "SUBPROTOCOL",
    "SUBPROTOCOLS",
    "SUBPROTOCOL_V2",
    "BatchClient",
    "BatchReplyReceived",
    "BatchRequestReceived",
    "BatchServer",
    "ConnectionState",
    "FrameErrorCode",
    "HelloReceived",
    "HelloRequestReceived",
    "Op",
    "RequestFailed",
    "ResultTable",
    "SlotError",
    "SlotErrorCode",
    "SlotResult",
    "column_value",
    "columns_to_rows",
    "decode_frame",
    "encode_frame",
    "version_of",
]

# Names from before the split that tests/soak/soak_oracle.py drives a client's internals
# with; not part of the API.
from openenv_gym.protocol.batch.client import _Pending as _Pending
from openenv_gym.protocol.batch.messages import OPS as _OPS  # noqa: F401
from openenv_gym.protocol.batch.messages import is_uint as _is_uint  # noqa: F401
