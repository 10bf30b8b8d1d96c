"""The batched msgpack protocol v1, client and server (docs/protocol.md sections 1 and 3)."""

from __future__ import annotations

import copy
import math
from typing import Any

import msgpack
import numpy as np
import pytest

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import pack_ndarray
from openenv_gym.protocol.batch import (
    DEFAULT_MAX_FRAME,
    MAX_REQUEST_ID,
    PROTOCOL_VERSION,
    SUBPROTOCOL,
    BatchClient,
    BatchReplyReceived,
    BatchRequestReceived,
    BatchServer,
    ConnectionState,
    FrameErrorCode,
    HelloReceived,
    HelloRequestReceived,
    Op,
    RequestFailed,
    SlotError,
    SlotErrorCode,
    SlotResult,
    decode_frame,
    encode_frame,
)
from openenv_gym.protocol.batch import server as batch_server
from openenv_gym.protocol.openenv import ErrorReceived


def snapshot(obj: BatchClient | BatchServer) -> dict[str, Any]:
    """Everything a connection holds, to check that an illegal call changed nothing."""
    return copy.deepcopy({name: getattr(obj, name) for name in vars(obj)})


def pack(message: dict[Any, Any]) -> bytes:
    return encode_frame(message)


def unpack(frame: bytes) -> dict[Any, Any]:
    return decode_frame(frame)


class Pair:
    """A client and a server wired in memory."""

    def __init__(self, *, max_frame: int = DEFAULT_MAX_FRAME, max_slots: int = 8) -> None:
        self.client = BatchClient(client_name="test-client")
        self.server = BatchServer(max_frame=max_frame)
        self.max_slots = max_slots

    def to_server(self) -> list[Any]:
        for frame in self.client.data_to_send():
            self.server.receive_data(frame)
        return self.server.events_received()

    def to_client(self) -> list[Any]:
        for frame in self.server.data_to_send():
            self.client.receive_data(frame)
        return self.client.events_received()

    def hello(self) -> HelloReceived:
        self.client.send_hello()
        [event] = self.to_server()
        assert isinstance(event, HelloRequestReceived)
        self.server.send_hello(server="test-server", env="echo", max_slots=self.max_slots)
        [info] = self.to_client()
        assert isinstance(info, HelloReceived)
        return info

    def request(self, rid: int) -> BatchRequestReceived:
        [event] = self.to_server()
        assert isinstance(event, BatchRequestReceived)
        assert event.request_id == rid
        return event

    def open(self, *slots: int) -> BatchReplyReceived:
        event = self.request(self.client.send_open(slots))
        self.server.send_results(event, [None] * len(slots))
        [reply] = self.to_client()
        return reply


def ready(*slots: int) -> Pair:
    pair = Pair()
    pair.hello()
    if slots:
        pair.open(*slots)
    return pair


# ------------------------------------------------------------- 1.2 / 1.3 versioning


def test_version_and_subprotocol() -> None:
    """1.2/1.3: version 1, announced as WebSocket subprotocol openenv-gym.batch.v1."""
    assert PROTOCOL_VERSION == 1
    assert SUBPROTOCOL == "openenv-gym.batch.v1"
    assert MAX_REQUEST_ID == 2**32 - 1
    assert DEFAULT_MAX_FRAME == 16 * 2**20
    assert [op.value for op in Op] == ["hello", "open", "reset", "step", "state", "close"]
    assert str(Op.STEP) == "step"
    assert {c.value for c in FrameErrorCode} == {"INVALID_FRAME", "INVALID_REQUEST"}
    assert {c.value for c in SlotErrorCode} == {"NO_SUCH_SLOT", "SLOT_IN_USE"}


# ------------------------------------------------------------------------ 3.2 frames


def test_frame_is_one_msgpack_map_with_str_keys() -> None:
    """3.2: ``{"op": "state", "id": 7, "slots": [0, 1]}`` byte for byte."""
    frame = encode_frame({"op": "state", "id": 7, "slots": [0, 1]})
    assert frame == bytes.fromhex("83 a2 6f70 a5 7374617465 a2 6964 07 a5 736c6f7473 92 00 01")
    assert decode_frame(frame) == {"op": "state", "id": 7, "slots": [0, 1]}


def test_encode_numpy_scalars_sets_tuples_and_bytes() -> None:
    """3.2: numpy scalars become msgpack numbers; sets and tuples arrays; bytes bin."""
    frame = encode_frame(
        {
            "i": np.int64(3),
            "f": np.float32(0.5),
            "b": np.bool_(True),
            "s": {2},
            "fs": frozenset({1}),
            "t": (1, 2),
            "raw": b"\x00",
        }
    )
    assert decode_frame(frame) == {
        "i": 3, "f": 0.5, "b": True, "s": [2], "fs": [1], "t": [1, 2], "raw": b"\x00",
    }  # fmt: skip


def test_encode_ndarray_as_extension_type_1() -> None:
    """3.3: an ndarray is ext type 1 whose payload is the array layout."""
    array = np.array([[1, 2, 3]], dtype="|u1")
    frame = encode_frame({"x": array})
    assert frame == bytes.fromhex("81 a1 78 d8 01") + pack_ndarray(array)
    back = decode_frame(frame)["x"]
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize(
    "value",
    [object(), 2**64, -(2**63) - 1, np.array(["text"]), np.array([object()], dtype=object)],
    ids=["object", "too-big", "too-small", "str-array", "object-array"],
)
def test_encode_refuses_what_cannot_travel(value: Any) -> None:
    with pytest.raises(LocalProtocolError):
        encode_frame({"x": value})


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("text", "binary"),
        (b"", "not valid msgpack"),
        (b"\xc1", "not valid msgpack"),  # a never-used msgpack byte
        (b"\x81\xa1", "not valid msgpack"),  # truncated
        (b"\x80\x80", "not valid msgpack"),  # two maps: extra data
        (b"\x81\x91\x00\x00", "not valid msgpack"),  # an array as a map key
        (b"\x81\xa1x\xa2\xff\xfe", "not valid msgpack"),  # invalid UTF-8 in a str
        (b"\x91\x00", "not a map but list"),
        (b"\x00", "not a map but int"),
        (b"\x81\xa1x\xd4\x02\x00", "unknown msgpack extension type 2"),
        (b"\x81\xa1x\xd4\x01\x00", "truncated ndarray header"),
    ],
)
def test_decode_rejects(data: Any, match: str) -> None:
    """3.2/3.3: anything that is not one msgpack map is a RemoteProtocolError."""
    with pytest.raises(RemoteProtocolError, match=match):
        decode_frame(data)


def test_decode_accepts_bytearray_memoryview_and_integer_keys() -> None:
    frame = encode_frame({"errors": {0: ["X", "m", {}]}})
    assert decode_frame(bytearray(frame)) == decode_frame(memoryview(frame))
    assert decode_frame(frame) == {"errors": {0: ["X", "m", {}]}}


def test_decode_max_size() -> None:
    """3.8: a frame above the limit is refused before it is parsed."""
    frame = encode_frame({"x": "y" * 10})
    assert decode_frame(frame, max_size=len(frame)) == {"x": "y" * 10}
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        decode_frame(frame, max_size=len(frame) - 1)


def test_msgpack_timestamps_are_msgpacks_own_extension() -> None:
    """3.3: ext type -1 is msgpack's timestamp; decoders may return it as such."""
    value = decode_frame(b"\x81\xa1t\xd6\xff\x00\x00\x00\x01")["t"]
    assert value == msgpack.Timestamp(1)


# --------------------------------------------------------------------- 3.4 hello


def test_hello_request_and_reply_fields() -> None:
    """3.4.1: the hello request and reply, field by field."""
    pair = Pair(max_frame=4096)
    assert pair.client.send_hello() == 0
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "hello", "id": 0, "versions": [1], "client": "test-client"}
    pair.server.receive_data(frame)
    assert pair.server.events_received() == [HelloRequestReceived(0, (1,), "test-client")]
    assert pair.server.state is ConnectionState.OPEN
    pair.server.send_hello(server="srv/1", env="echo", max_slots=3)
    [frame] = pair.server.data_to_send()
    assert unpack(frame) == {
        "op": "hello", "id": 0, "version": 1, "server": "srv/1", "env": "echo",
        "max_slots": 3, "max_frame": 4096,
    }  # fmt: skip
    pair.client.receive_data(frame)
    info = HelloReceived(1, "srv/1", "echo", 3, 4096)
    assert pair.client.events_received() == [info]
    assert pair.client.server_info == info
    assert pair.client.state is ConnectionState.OPEN


def test_hello_client_field_is_optional_and_versions_may_list_several() -> None:
    server = BatchServer()
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [3, 1, 2]}))
    assert server.events_received() == [HelloRequestReceived(0, (3, 1, 2), "")]


# ------------------------------------------------------------ 3.4 slot operations


def test_open_reset_step_state_close_fields() -> None:
    """3.4.2-3.4.6: every request and reply, as it travels."""
    pair = ready()
    rid = pair.client.send_open([4, 2])
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "open", "id": rid, "slots": [4, 2]}
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert event == BatchRequestReceived(Op.OPEN, rid, (4, 2))
    pair.server.send_results(event, [None, SlotResult()])
    [frame] = pair.server.data_to_send()
    assert unpack(frame) == {"op": "open", "id": rid}
    pair.client.receive_data(frame)
    [reply] = pair.client.events_received()
    assert reply.op is Op.OPEN
    assert reply.slots == (4, 2)
    assert reply.errors == {}
    assert reply.observations == [None, None]
    assert reply.metadata == [None, None]
    assert np.isnan(reply.rewards).all()
    assert not reply.dones.any()
    assert pair.client.open_slots == {2, 4}

    rid = pair.client.send_reset([4, 2], [{"seed": 1}, {}])
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "reset", "id": rid, "slots": [4, 2], "args": [{"seed": 1}, {}]}
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert event.args == ({"seed": 1}, {})
    pair.server.send_results(
        event,
        [SlotResult({"o": 1}, None, False, {"m": 1}), SlotResult(None, 2, True, {})],
    )
    [frame] = pair.server.data_to_send()
    message = unpack(frame)
    assert message["obs"] == [{"o": 1}, {}]
    assert message["meta"] == [{"m": 1}, None]
    assert message["reward"].dtype.str == "<f8"
    assert np.isnan(message["reward"][0])
    assert message["reward"][1] == 2.0
    assert message["done"].dtype.str == "|b1"
    assert message["done"].tolist() == [False, True]
    assert set(message) == {"op", "id", "obs", "reward", "done", "meta"}
    pair.client.receive_data(frame)
    [reply] = pair.client.events_received()
    assert reply.observations == [{"o": 1}, {}]
    assert reply.metadata == [{"m": 1}, None]
    assert reply.dones.tolist() == [False, True]

    rid = pair.client.send_step([2], [{"a": np.arange(3, dtype="<i4")}])
    [event] = pair.to_server()
    np.testing.assert_array_equal(event.args[0]["a"], [0, 1, 2])
    pair.server.send_results(event, [SlotResult({"x": np.ones((2, 2), "<f4")}, 0.5, False)])
    [frame] = pair.server.data_to_send()
    assert "meta" not in unpack(frame)  # 3.4: "meta" only when some slot has metadata
    pair.client.receive_data(frame)
    [reply] = pair.client.events_received()
    assert reply.op is Op.STEP
    assert reply.request_id == rid
    assert reply.observations[0]["x"].shape == (2, 2)
    assert reply.rewards.tolist() == [0.5]
    assert reply.metadata == [None]

    rid = pair.client.send_state([4, 2])
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "state", "id": rid, "slots": [4, 2]}
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    pair.server.send_results(event, [SlotResult({"step_count": 1}), SlotResult()])
    [frame] = pair.server.data_to_send()
    assert unpack(frame) == {"op": "state", "id": rid, "state": [{"step_count": 1}, {}]}
    pair.client.receive_data(frame)
    [reply] = pair.client.events_received()
    assert reply.observations == [{"step_count": 1}, {}]

    rid = pair.client.send_close([2, 4])
    [event] = pair.to_server()
    assert event == BatchRequestReceived(Op.CLOSE, rid, (2, 4))
    pair.server.send_results(event, [None, None])
    [reply] = pair.to_client()
    assert reply.op is Op.CLOSE
    assert reply.errors == {}
    assert pair.client.open_slots == set()
    assert pair.client.in_flight == 0


def test_server_ignores_args_of_other_ops_and_unknown_keys() -> None:
    """3.2: receivers ignore keys they do not know."""
    pair = ready()
    pair.server.receive_data(pack({"op": "open", "id": 5, "slots": [0], "args": 1, "x": 2}))
    assert pair.server.events_received() == [BatchRequestReceived(Op.OPEN, 5, (0,))]


# ---------------------------------------------------------- 3.5 ids and pipelining


def test_requests_pipeline_and_replies_come_in_any_order() -> None:
    """3.5: several requests in flight; each reply is matched by its id."""
    pair = Pair()
    pair.client.send_hello()
    first = pair.client.send_open([0, 1])  # pipelined behind hello, no waiting
    second = pair.client.send_open([2])
    assert (first, second) == (1, 2)
    assert pair.client.in_flight == 3
    _hello, open01, open2 = pair.to_server()
    pair.server.send_results(open2, [None])
    pair.server.send_hello(server="s", env="e", max_slots=8)
    pair.server.send_results(open01, [None, None])
    events = pair.to_client()
    assert [type(e) for e in events] == [BatchReplyReceived, HelloReceived, BatchReplyReceived]
    assert [events[0].request_id, events[2].request_id] == [second, first]
    assert pair.client.open_slots == {0, 1, 2}
    assert pair.client.in_flight == 0


def test_request_ids_skip_zero_and_ids_in_flight_and_wrap() -> None:
    """3.5: id 0 is hello's; the client never reuses an id still in flight."""
    pair = ready(0, 1, 2)
    client = pair.client
    client._next_id = MAX_REQUEST_ID
    assert client.send_state([0]) == MAX_REQUEST_ID
    assert client.send_state([1]) == 1  # wrapped, skipping 0
    client._next_id = 1
    assert client.send_state([2]) == 2  # 1 is still in flight


def test_a_slot_is_in_at_most_one_request_in_flight() -> None:
    """3.5: the client refuses; a server answers INVALID_REQUEST for the second."""
    pair = ready(0, 1)
    pair.client.send_step([0], [{}])
    with pytest.raises(LocalProtocolError, match="in flight"):
        pair.client.send_state([1, 0])
    pair.to_server()
    pair.server.receive_data(pack({"op": "state", "id": 99, "slots": [1, 0]}))
    assert pair.server.events_received() == []
    [frame] = pair.server.data_to_send()
    assert unpack(frame) == {
        "op": "error", "id": 99, "code": "INVALID_REQUEST",
        "message": "slots [0] are in a request in flight",
    }  # fmt: skip


def test_server_frees_slots_when_it_answers() -> None:
    pair = ready(0)
    event = pair.request(pair.client.send_state([0]))
    pair.server.send_results(event, [SlotResult({})])
    pair.server.receive_data(pack({"op": "state", "id": 50, "slots": [0]}))
    assert len(pair.server.events_received()) == 1


# ---------------------------------------------------------------- 3.6 slot errors


def test_slot_errors_are_keyed_by_position() -> None:
    """3.6.1: ``errors`` maps a position in ``slots`` to [code, message, details]."""
    pair = ready(7, 3)
    event = pair.request(pair.client.send_step([7, 3], [{}, {"bad": 1}]))
    pair.server.send_results(
        event,
        [
            SlotResult({"o": 0}, 1.0, False),
            SlotError("VALIDATION_ERROR", "Invalid", {"errors": []}),
        ],
    )
    [frame] = pair.server.data_to_send()
    message = unpack(frame)
    assert message["errors"] == {1: ["VALIDATION_ERROR", "Invalid", {"errors": []}]}
    assert message["obs"] == [{"o": 0}, None]
    assert message["done"].tolist() == [False, False]
    assert message["reward"][0] == 1.0
    assert math.isnan(message["reward"][1])
    pair.client.receive_data(frame)
    [reply] = pair.client.events_received()
    assert reply.errors == {3: ErrorReceived("VALIDATION_ERROR", "Invalid", {"errors": []}, False)}
    assert reply.observations == [{"o": 0}, None]
    assert pair.client.open_slots == {3, 7}


@pytest.mark.parametrize(
    ("code", "ends"),
    [
        ("INVALID_JSON", False),
        ("UNKNOWN_TYPE", False),
        ("VALIDATION_ERROR", False),
        ("EXECUTION_ERROR", False),
        ("CAPACITY_REACHED", True),
        ("FACTORY_ERROR", True),
        ("SESSION_ERROR", True),
        ("NO_SUCH_SLOT", True),
        ("SLOT_IN_USE", False),
        ("SOMETHING_NEW", False),
    ],
)
def test_which_slot_errors_end_the_slot(code: str, ends: bool) -> None:
    """3.6.1: fatal OpenEnv codes and NO_SUCH_SLOT end the slot on reset/step/state."""
    pair = ready(0, 1)
    event = pair.request(pair.client.send_reset([0, 1], [{}, {}]))
    pair.server.send_results(event, [SlotError(code, "m"), SlotResult({})])
    [reply] = pair.to_client()
    assert reply.errors[0].ends_session is ends
    assert pair.client.open_slots == ({1} if ends else {0, 1})


def test_capacity_reached_on_open_fails_only_that_slot() -> None:
    """3.8: over capacity, open fails per slot and the connection survives."""
    pair = ready()
    event = pair.request(pair.client.send_open([0, 1, 2]))
    pair.server.send_results(
        event,
        [
            None,
            SlotError(SlotErrorCode.SLOT_IN_USE, "slot 1 is already open"),
            SlotError("CAPACITY_REACHED", "full", {"active_sessions": 1, "max_sessions": 1}),
        ],
    )
    [reply] = pair.to_client()
    assert reply.errors[2] == ErrorReceived(
        "CAPACITY_REACHED", "full", {"active_sessions": 1, "max_sessions": 1}, True
    )
    assert reply.errors[1].code == "SLOT_IN_USE"
    assert pair.client.open_slots == {0}
    assert pair.client.state is ConnectionState.OPEN


def test_close_ends_the_slot_even_when_it_reports_an_error() -> None:
    """3.4.6: after ``close`` the slot is gone whatever the reply says."""
    pair = ready(0, 1)
    event = pair.request(pair.client.send_close([0, 1]))
    pair.server.send_results(event, [SlotError("EXECUTION_ERROR", "close() raised"), None])
    [reply] = pair.to_client()
    assert set(reply.errors) == {0}
    assert pair.client.open_slots == set()


# ------------------------------------------------------------ 3.6 whole-frame errors


def server_reply(server: BatchServer, frame: Any) -> dict[Any, Any]:
    server.receive_data(frame)
    assert server.events_received() == []
    [out] = server.data_to_send()
    return unpack(out)


def open_server() -> BatchServer:
    server = BatchServer()
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    server.events_received()
    server.send_hello(server="s", env="e", max_slots=1)
    server.data_to_send()
    return server


@pytest.mark.parametrize(
    ("frame", "code", "match"),
    [
        ("a text frame", "INVALID_FRAME", "binary"),
        (b"\xc1", "INVALID_FRAME", "not valid msgpack"),
        (b"\x92\x01\x02", "INVALID_FRAME", "not a map"),
        (b"\x81\xa1x\xc7\x00\x05", "INVALID_FRAME", "extension type 5"),
    ],
)
def test_server_invalid_frame(frame: Any, code: str, match: str) -> None:
    """3.6.2: what is not a msgpack map is answered INVALID_FRAME, id nil."""
    reply = server_reply(open_server(), frame)
    assert set(reply) == {"op", "id", "code", "message"}
    assert reply["op"] == "error"
    assert reply["id"] is None
    assert reply["code"] == code
    assert match in reply["message"]


def test_server_frame_too_large() -> None:
    """3.8: larger than max_frame: INVALID_FRAME, id nil, connection kept."""
    server = BatchServer(max_frame=64)
    reply = server_reply(server, pack({"op": "hello", "id": 0, "versions": [1], "x": "y" * 64}))
    assert (reply["id"], reply["code"]) == (None, "INVALID_FRAME")
    assert "exceeds 64" in reply["message"]
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    assert len(server.events_received()) == 1


@pytest.mark.parametrize(
    ("message", "rid", "match"),
    [
        # no usable id: the reply carries nil
        ({"op": "state", "slots": [0]}, None, "request id"),
        ({"op": "state", "id": -1, "slots": [0]}, None, "request id"),
        ({"op": "state", "id": 2**32, "slots": [0]}, None, "request id"),
        ({"op": "state", "id": True, "slots": [0]}, None, "request id"),
        ({"op": "state", "id": 1.0, "slots": [0]}, None, "request id"),
        ({"op": "state", "id": "1", "slots": [0]}, None, "request id"),
        ({"op": "state", "id": 0, "slots": [0]}, None, "reserved for hello"),
        ({"op": "hello", "id": 3, "versions": [1]}, None, "reserved for hello"),
        ({"id": 0}, None, "reserved for hello"),
        # the id is usable: the reply carries it
        ({"op": "error", "id": 4}, 4, "unknown op 'error'"),
        ({"op": "STATE", "id": 4}, 4, "unknown op 'STATE'"),
        ({"op": 1, "id": 4}, 4, "unknown op 1"),
        ({"id": 4}, 4, "unknown op None"),
        ({"op": "hello", "id": 0, "versions": [1]}, 0, "already received"),
        ({"op": "state", "id": 4}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": []}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": 0}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": [-1]}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": [True]}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": [0.0]}, 4, "'slots' must be"),
        ({"op": "state", "id": 4, "slots": [1, 1]}, 4, "duplicates"),
        ({"op": "step", "id": 4, "slots": [0]}, 4, "'args' must be a list of 1 maps"),
        ({"op": "step", "id": 4, "slots": [0], "args": {}}, 4, "'args' must be a list"),
        ({"op": "reset", "id": 4, "slots": [0], "args": [{}, {}]}, 4, "'args' must be a list"),
        ({"op": "reset", "id": 4, "slots": [0], "args": [[]]}, 4, "maps with str keys"),
        ({"op": "step", "id": 4, "slots": [0], "args": [{1: 2}]}, 4, "maps with str keys"),
    ],
)
def test_server_invalid_request(message: dict[Any, Any], rid: int | None, match: str) -> None:
    """3.6.2: a map that is not a valid request: INVALID_REQUEST, connection kept."""
    server = open_server()
    reply = server_reply(server, pack(message))
    assert (reply["op"], reply["id"], reply["code"]) == ("error", rid, "INVALID_REQUEST")
    assert match in reply["message"]
    server.receive_data(pack({"op": "state", "id": 9, "slots": [0]}))
    assert len(server.events_received()) == 1


@pytest.mark.parametrize("op", ["open", "reset", "step", "state", "close"])
def test_server_refuses_requests_naming_more_slots_than_max_slots(op: str) -> None:
    """3.8: a request over the server's per-request slot limit is refused whole, id kept,
    before its args are looked at; the connection and the slots stay usable."""
    server = BatchServer(max_slots=3)
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    server.events_received()
    server.data_to_send()
    reply = server_reply(server, pack({"op": op, "id": 7, "slots": [0, 1, 2, 3], "args": 5}))
    assert (reply["op"], reply["id"], reply["code"]) == ("error", 7, "INVALID_REQUEST")
    assert "names 4 slots" in reply["message"]
    assert "at most 3" in reply["message"]
    server.receive_data(pack({"op": "state", "id": 8, "slots": [0, 1, 2]}))
    [event] = server.events_received()
    assert event.slots == (0, 1, 2)


def test_server_duplicate_id_is_answered_without_the_id() -> None:
    """3.5/3.6.2: answering with the id would be taken for the reply to the first."""
    server = open_server()
    server.receive_data(pack({"op": "state", "id": 5, "slots": [0]}))
    [event] = server.events_received()
    reply = server_reply(server, pack({"op": "state", "id": 5, "slots": [1]}))
    assert (reply["id"], reply["code"]) == (None, "INVALID_REQUEST")
    assert "already in flight" in reply["message"]
    server.send_results(event, [SlotResult({})])
    assert unpack(server.data_to_send()[0])["id"] == 5


@pytest.mark.parametrize(
    ("hello", "match"),
    [
        ({"op": "hello", "id": 0}, "needs 'versions'"),
        ({"op": "hello", "id": 0, "versions": 1}, "needs 'versions'"),
        ({"op": "hello", "id": 0, "versions": ["1"]}, "needs 'versions'"),
        ({"op": "hello", "id": 0, "versions": [True]}, "needs 'versions'"),
        ({"op": "hello", "id": 0, "versions": [1], "client": 5}, "needs 'versions'"),
        ({"op": "hello", "id": 0, "versions": [2, 3]}, "no common protocol version"),
        ({"op": "hello", "id": 0, "versions": []}, "no common protocol version"),
    ],
)
def test_server_refuses_bad_hello_and_stays_new(hello: dict[str, Any], match: str) -> None:
    """3.4.1/3.7: a refused hello is answered with id 0; another hello may follow."""
    server = BatchServer()
    reply = server_reply(server, pack(hello))
    assert (reply["id"], reply["code"]) == (0, "INVALID_REQUEST")
    assert match in reply["message"]
    assert server.state is ConnectionState.NEW
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    assert len(server.events_received()) == 1
    assert server.state is ConnectionState.OPEN


@pytest.mark.parametrize("op", ["open", "reset", "step", "state", "close"])
def test_server_requires_hello_first(op: str) -> None:
    """3.7: any other request before a valid hello is INVALID_REQUEST."""
    server = BatchServer()
    reply = server_reply(server, pack({"op": op, "id": 1, "slots": [0], "args": [{}]}))
    assert (reply["id"], reply["code"]) == (1, "INVALID_REQUEST")
    assert reply["message"] == f"{op} before hello"


def test_server_accepts_requests_pipelined_behind_an_unanswered_hello() -> None:
    """3.7: the server is OPEN as soon as a valid hello arrives."""
    server = BatchServer()
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    server.receive_data(pack({"op": "open", "id": 1, "slots": [0]}))
    assert [type(e) for e in server.events_received()] == [
        HelloRequestReceived, BatchRequestReceived,
    ]  # fmt: skip


def test_server_never_echoes_huge_or_deep_values_in_messages() -> None:
    server = open_server()
    deep: Any = 0
    for _ in range(500):
        deep = [deep]
    reply = server_reply(server, pack({"op": "state", "id": 4, "slots": deep}))
    assert len(reply["message"]) < 200
    reply = server_reply(server, pack({"op": "state", "id": 4, "slots": list(range(-1, 10**5))}))
    assert len(reply["message"]) < 200


# ------------------------------------------------------- 3.6.2 on the client side


def test_client_request_failed_frees_its_slots() -> None:
    """3.6.2: an error with our id fails that request; the connection goes on."""
    pair = ready(0)
    rid = pair.client.send_state([0])
    pair.client.data_to_send()
    pair.client.receive_data(
        pack({"op": "error", "id": rid, "code": "INVALID_REQUEST", "message": "no"})
    )
    assert pair.client.events_received() == [RequestFailed(rid, "INVALID_REQUEST", "no")]
    assert pair.client.state is ConnectionState.OPEN
    assert pair.client.in_flight == 0
    pair.client.send_state([0])  # the slot is free again


def test_client_error_without_id_closes_the_connection() -> None:
    """3.6.2: the client cannot tell which request was lost: the connection is unusable."""
    pair = ready(0)
    pair.client.send_state([0])
    pair.client.receive_data(
        pack({"op": "error", "id": None, "code": "INVALID_FRAME", "message": "x"})
    )
    assert pair.client.events_received() == [RequestFailed(None, "INVALID_FRAME", "x")]
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client.open_slots == set()
    assert pair.client.in_flight == 0


def test_client_refused_hello_closes_the_connection() -> None:
    """3.4.1/3.7: the server refused hello: nothing else will be answered."""
    pair = Pair()
    pair.client.send_hello()
    pair.client.send_open([0])
    pair.client.receive_data(
        pack({"op": "error", "id": 0, "code": "INVALID_REQUEST", "message": "v"})
    )
    assert pair.client.events_received() == [RequestFailed(0, "INVALID_REQUEST", "v")]
    assert pair.client.state is ConnectionState.CLOSED
    assert pair.client.in_flight == 0


def test_pair_hello_refused_end_to_end() -> None:
    pair = Pair()
    pair.client.send_hello()
    [frame] = pair.client.data_to_send()
    message = unpack(frame)
    message["versions"] = [2]
    pair.server.receive_data(pack(message))
    [event] = pair.to_client()
    assert isinstance(event, RequestFailed)
    assert event.request_id == 0
    assert "no common protocol version" in event.message
    assert pair.client.state is ConnectionState.CLOSED


# --------------------------------------------- client reply validation (3.4, 3.6)


def open_client(*slots: int) -> BatchClient:
    return ready(*slots).client


def reply_frame(op: str, rid: int, **fields: Any) -> bytes:
    return pack({"op": op, "id": rid, **fields})


def col(values: list[Any], dtype: str) -> np.ndarray:
    return np.array(values, dtype=dtype)


GOOD_STEP: dict[str, Any] = {
    "obs": [{}, {}],
    "reward": col([0, 0], "<f8"),
    "done": col([False, False], "|b1"),
}


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"op": None}, "no 'op' string"),
        ({"op": 5}, "no 'op' string"),
        ({"op": "error", "code": 1, "message": "m"}, "malformed error frame"),
        ({"op": "error", "code": "X"}, "malformed error frame"),
        ({"op": "error", "id": 777, "code": "X", "message": "m"}, "unknown request id 777"),
        ({"op": "error", "id": -3, "code": "X", "message": "m"}, "request id must be"),
        ({"id": None}, "request id must be"),
        ({"id": 777}, "unknown request id 777"),
        ({"op": "state"}, "does not match step"),
        ({"errors": []}, "'errors' must be a map"),
        ({"errors": {2: ["X", "m", {}]}}, "not a slot position"),
        ({"errors": {-1: ["X", "m", {}]}}, "not a slot position"),
        ({"errors": {True: ["X", "m", {}]}}, "not a slot position"),
        ({"errors": {"0": ["X", "m", {}]}}, "not a slot position"),
        ({"errors": {0: ["X", "m"]}}, "malformed slot error"),
        ({"errors": {0: "X"}}, "malformed slot error"),
        ({"errors": {0: [1, "m", {}]}}, "malformed slot error"),
        ({"errors": {0: ["X", None, {}]}}, "malformed slot error"),
        ({"errors": {0: ["X", "m", []]}}, "malformed slot error"),
        ({"obs": None}, "'obs' must be a list of 2"),
        ({"obs": [{}]}, "'obs' must be a list of 2"),
        ({"obs": [{}, []]}, "'obs' entries must be dict or nil"),
        ({"meta": [None]}, "'meta' must be a list of 2"),
        ({"meta": [None, "m"]}, "'meta' entries must be dict"),
        ({"reward": [0.0, 0.0]}, "'reward' must be a <f8 array of shape \\(2,\\)"),
        ({"reward": col([0, 0], "<f4")}, "'reward' must be a <f8"),
        ({"reward": col([0, 0], ">f8")}, "'reward' must be a <f8"),
        ({"reward": col([0, 0, 0], "<f8")}, "'reward' must be a <f8"),
        ({"reward": col([[0, 0]], "<f8")}, "'reward' must be a <f8"),
        ({"done": col([0, 0], "|u1")}, "'done' must be a |b1"),
        ({"done": None}, "'done' must be a |b1"),
        ({"obs": [{}, None]}, "slot 1: needs either a result or an error"),
        ({"errors": {0: ["X", "m", {}]}}, "slot 0: needs either a result or an error"),
    ],
)
def test_client_rejects_malformed_step_replies(fields: dict[str, Any], match: str) -> None:
    """3.4/3.6: a malformed reply is a RemoteProtocolError and closes the connection."""
    client = open_client(0, 1)
    rid = client.send_step([0, 1], [{}, {}])
    message = {"op": "step", "id": rid, **GOOD_STEP, **fields}
    with pytest.raises(RemoteProtocolError, match=match):
        client.receive_data(pack(message))
    assert client.state is ConnectionState.CLOSED
    assert client.open_slots == set()
    assert client.in_flight == 0
    assert client.events_received() == []


def test_client_accepts_the_good_step_reply() -> None:
    client = open_client(0, 1)
    rid = client.send_step([0, 1], [{}, {}])
    client.receive_data(reply_frame("step", rid, **GOOD_STEP))
    [reply] = client.events_received()
    assert reply.rewards.tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({}, "'state' must be a list of 1"),
        ({"state": [1]}, "'state' entries must be dict"),
        ({"state": [None]}, "needs either a result or an error"),
        ({"state": [{}], "errors": {0: ["X", "m", {}]}}, "needs either a result or an error"),
    ],
)
def test_client_rejects_malformed_state_replies(fields: dict[str, Any], match: str) -> None:
    client = open_client(0)
    rid = client.send_state([0])
    with pytest.raises(RemoteProtocolError, match=match):
        client.receive_data(reply_frame("state", rid, **fields))
    assert client.state is ConnectionState.CLOSED


@pytest.mark.parametrize(
    "fields",
    [
        {"version": 2},
        {"version": "1"},
        {"version": True},
        {"server": None},
        {"env": 3},
        {"max_slots": -1},
        {"max_slots": 1.5},
        {"max_frame": None},
    ],
)
def test_client_rejects_malformed_hello_replies(fields: dict[str, Any]) -> None:
    """3.4.1: every hello reply field is checked."""
    client = BatchClient()
    client.send_hello()
    message = {
        "op": "hello", "id": 0, "version": 1, "server": "s", "env": "e",
        "max_slots": 1, "max_frame": 100, **fields,
    }  # fmt: skip
    with pytest.raises(RemoteProtocolError, match=r"hello reply|protocol version"):
        client.receive_data(pack(message))
    assert client.state is ConnectionState.CLOSED
    assert client.server_info is None


def test_client_rejects_frames_after_it_closed() -> None:
    client = open_client(0)
    client.connection_lost()
    with pytest.raises(RemoteProtocolError, match="closed connection"):
        client.receive_data(reply_frame("open", 1))


def test_client_rejects_undecodable_frames() -> None:
    client = open_client(0)
    with pytest.raises(RemoteProtocolError, match="binary"):
        client.receive_data("text")
    assert client.state is ConnectionState.CLOSED


def test_client_open_close_replies_need_no_result_fields() -> None:
    """3.4.2/3.4.6: open and close replies carry only ``errors``."""
    client = open_client()
    rid = client.send_open([0])
    client.receive_data(reply_frame("open", rid, errors={}))
    assert client.open_slots == {0}


# ------------------------------------------------ 3.7 client illegal transitions


def client_in(state: ConnectionState) -> BatchClient:
    client = BatchClient()
    if state is not ConnectionState.NEW:
        client.send_hello()
    if state is ConnectionState.OPEN:
        client.receive_data(
            pack({"op": "hello", "id": 0, "version": 1, "server": "s", "env": "e",
                  "max_slots": 8, "max_frame": 200})
        )  # fmt: skip
        client.events_received()
    if state is ConnectionState.CLOSED:
        client.connection_lost()
    client.data_to_send()
    return client


CALLS = {
    "open": lambda c: c.send_open([0]),
    "reset": lambda c: c.send_reset([0], [{}]),
    "step": lambda c: c.send_step([0], [{}]),
    "state": lambda c: c.send_state([0]),
    "close": lambda c: c.send_close([0]),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("state", [ConnectionState.NEW, ConnectionState.CLOSED])
def test_client_nothing_before_hello_or_after_close(state: ConnectionState, name: str) -> None:
    """3.7: hello first; nothing once closed. Illegal calls change nothing."""
    client = client_in(state)
    before = snapshot(client)
    with pytest.raises(LocalProtocolError, match="in state"):
        CALLS[name](client)
    assert snapshot(client) == before


@pytest.mark.parametrize(
    "state", [ConnectionState.HELLO_SENT, ConnectionState.OPEN, ConnectionState.CLOSED]
)
def test_client_hello_only_once(state: ConnectionState) -> None:
    client = client_in(state)
    before = snapshot(client)
    with pytest.raises(LocalProtocolError, match="hello must be sent first"):
        client.send_hello()
    assert snapshot(client) == before


def client_with_open_slot() -> BatchClient:
    client = client_in(ConnectionState.OPEN)
    client.open_slots.add(0)
    return client


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.send_state([]), "at least one slot"),
        (lambda c: c.send_state([0, 0]), "duplicate slots"),
        (lambda c: c.send_state([-1]), "non-negative integers"),
        (lambda c: c.send_state([True]), "non-negative integers"),
        (lambda c: c.send_state([[0]]), "non-negative integers"),
        (lambda c: c.send_state(["0"]), "non-negative integers"),
        (lambda c: c.send_open([0]), "already open"),
        (lambda c: c.send_state([1]), "not open"),
        (lambda c: c.send_close([0, 1]), "not open"),
        (lambda c: c.send_reset([0], []), "need as many arguments, got 0"),
        (lambda c: c.send_step([0], None), "need as many arguments, got none"),
        (lambda c: c.send_step([0], [{1: "x"}]), "string keys"),
        (lambda c: c.send_step([0], [{"x": object()}]), "cannot encode"),
        (lambda c: c.send_step([0], [{"x": 2**64}]), "cannot encode"),
        (lambda c: c.send_step([0], [{"x": "y" * 200}]), "exceeds the server's max_frame 200"),
    ],
)
def test_client_illegal_requests_leave_state_unchanged(call: Any, match: str) -> None:
    """3.4/3.5/3.8: every refused call raises LocalProtocolError and changes nothing."""
    client = client_with_open_slot()
    before = snapshot(client)
    with pytest.raises(LocalProtocolError, match=match):
        call(client)
    assert snapshot(client) == before


def test_client_frame_limit_is_unknown_before_the_hello_reply() -> None:
    """3.8: before the hello reply the client cannot check max_frame."""
    client = client_in(ConnectionState.HELLO_SENT)
    client.open_slots.add(0)
    client.send_step([0], [{"x": "y" * 10_000}])
    assert len(client.data_to_send()[0]) > 10_000


def test_client_args_accept_any_mapping() -> None:
    client = client_with_open_slot()
    rid = client.send_reset(iter([0]), ({"seed": 1}.items().mapping,))
    assert unpack(client.data_to_send()[0])["args"] == [{"seed": 1}]
    assert rid == 1


# ------------------------------------------------ 3.7 server illegal transitions


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.send_hello(server="s", env="e", max_slots=1),  # answered already
        lambda s: s.send_results(BatchRequestReceived(Op.STATE, 1, (0,)), [SlotResult()]),
        lambda s: s.send_results(BatchRequestReceived(Op.STATE, 2, (1,)), [SlotResult()]),
        lambda s: s.send_results(BatchRequestReceived(Op.STEP, 2, (0,)), [SlotResult()]),
        lambda s: s.send_results(BatchRequestReceived(Op.STATE, 2, (0,)), []),
        lambda s: s.send_results(BatchRequestReceived(Op.STATE, 2, (0,)), [None]),
        lambda s: s.send_results(BatchRequestReceived(Op.STATE, 2, (0,)), ["ok"]),
        lambda s: s.send_results(
            BatchRequestReceived(Op.STATE, 2, (0,)), [SlotResult({"x": object()})]
        ),
        lambda s: s.send_results(
            BatchRequestReceived(Op.STATE, 2, (0,)), [SlotError("X", "m", {"d": object()})]
        ),
    ],
)
def test_server_illegal_answers_leave_state_unchanged(call: Any) -> None:
    """3.7: answer only pending requests, exactly once, with one entry per slot."""
    server = open_server()
    server.receive_data(pack({"op": "state", "id": 2, "slots": [0]}))
    server.events_received()
    before = snapshot(server)
    with pytest.raises(LocalProtocolError):
        call(server)
    assert snapshot(server) == before


@pytest.mark.parametrize("op", [Op.RESET, Op.STEP])
def test_server_results_need_a_result_or_error_per_slot(op: Op) -> None:
    server = open_server()
    server.receive_data(pack({"op": op.value, "id": 2, "slots": [0], "args": [{}]}))
    [event] = server.events_received()
    with pytest.raises(LocalProtocolError, match="SlotResult or SlotError"):
        server.send_results(event, [None])
    server.send_results(event, [SlotError("EXECUTION_ERROR", "boom")])
    message = unpack(server.data_to_send()[0])
    assert message["obs"] == [None]
    assert message["errors"] == {0: ["EXECUTION_ERROR", "boom", {}]}


def test_server_send_hello_without_hello() -> None:
    server = BatchServer()
    with pytest.raises(LocalProtocolError, match="no pending hello"):
        server.send_hello(server="s", env="e", max_slots=1)


def _limited_server(max_slots: int = 8) -> BatchServer:
    server = BatchServer(max_slots=max_slots)
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [1]}))
    server.events_received()
    server.send_hello(server="s", env="e", max_slots=1)
    server.data_to_send()
    return server


BIG = 70_000  # slots: a frame over the 64 KiB beyond which headers are read first


def test_server_refuses_a_large_frame_naming_too_many_slots_from_its_headers() -> None:
    """3.8: op and id written first (as clients do): the refusal keeps the id and comes
    from the slots array's header; the array's items are never decoded."""
    server = _limited_server()
    frame = pack({"op": "state", "id": 9, "slots": list(range(BIG))})
    assert len(frame) > 64 * 1024
    reply = server_reply(server, frame)
    assert reply == {
        "op": "error",
        "id": 9,
        "code": "INVALID_REQUEST",
        "message": f"state names {BIG} slots; this server takes at most 8 per request",
    }
    # garbage after the header: an early refusal never reads it
    broken = frame[: frame.index(b"slots") + 5 + 5] + b"\xc1" * BIG
    assert server_reply(server, broken)["id"] == 9
    server.receive_data(pack({"op": "state", "id": 9, "slots": [0, 1]}))
    assert [e.request_id for e in server.events_received()] == [9]


def _large(message: dict[Any, Any]) -> bytes:
    frame = pack(message)
    assert len(frame) > 64 * 1024
    return frame


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(_large({"slots": list(range(BIG)), "op": "state", "id": 3}), id="slots-first"),
        pytest.param(
            _large({"pad": "x" * BIG, "op": "state", "id": 3, "slots": [1, 2]}), id="under"
        ),
        pytest.param(_large({"op": "nope", "id": 3, "slots": list(range(BIG))}), id="op"),
        pytest.param(_large({"op": "hello", "id": 0, "slots": list(range(BIG))}), id="hello"),
        pytest.param(_large({"op": "state", "id": -1, "slots": list(range(BIG))}), id="id<0"),
        pytest.param(_large({"op": "state", "id": 0, "slots": list(range(BIG))}), id="id0"),
        pytest.param(
            _large({"op": "state", "id": MAX_REQUEST_ID + 1, "slots": list(range(BIG))}),
            id="id-big",
        ),
        pytest.param(_large({"op": "state", "id": 3, "slots": "x" * BIG}), id="not-array"),
        pytest.param(_large({"op": "state", "id": 3, "pad": "x" * BIG}), id="no-slots"),
        pytest.param(msgpack.packb(["x" * BIG]), id="not-a-map"),
    ],
)
def test_server_headers_left_to_the_full_decode(
    frame: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3.6.2: what the header scan cannot decide gets the reply the full decode gives."""
    server, expected = _limited_server(), _limited_server()
    server.receive_data(frame)
    monkeypatch.setattr(batch_server, "_PRESCAN", 2**40)  # no header scan
    expected.receive_data(frame)
    assert server.events_received() == expected.events_received()
    assert server.data_to_send() == expected.data_to_send()


def test_server_headers_of_a_request_id_in_flight_go_to_the_full_decode() -> None:
    server = _limited_server()
    server.receive_data(pack({"op": "state", "id": 4, "slots": [0]}))
    server.events_received()
    reply = server_reply(server, _large({"op": "state", "id": 4, "slots": list(range(BIG))}))
    assert (reply["id"], reply["code"]) == (None, "INVALID_REQUEST")
    assert "already in flight" in reply["message"]


def test_server_before_hello_large_frames_are_decoded_as_usual() -> None:
    server = BatchServer(max_slots=8)
    reply = server_reply(server, _large({"op": "state", "id": 4, "slots": list(range(BIG))}))
    assert (reply["id"], reply["message"]) == (4, "state before hello")


def test_server_refuses_from_the_head_of_a_frame_not_yet_read() -> None:
    """3.8: the first 64 KiB of a frame (a connection reading it as it arrives) suffice."""
    server = _limited_server()
    frame = pack({"op": "state", "id": 9, "slots": list(range(BIG))})
    assert server.receive_head(frame[: 64 * 1024], len(frame)) is True
    assert server.events_received() == []
    reply = unpack(server.data_to_send()[0])
    assert (reply["op"], reply["id"], reply["code"]) == ("error", 9, "INVALID_REQUEST")
    assert reply["message"] == f"state names {BIG} slots; this server takes at most 8 per request"
    server.receive_data(pack({"op": "state", "id": 9, "slots": [0, 1]}))  # id 9 is free
    assert [e.request_id for e in server.events_received()] == [9]


@pytest.mark.parametrize(
    ("head", "size", "max_slots", "hello"),
    [
        pytest.param(b"", 64 * 1024, 8, True, id="not-over-64KiB"),
        pytest.param(b"", DEFAULT_MAX_FRAME + 1, 8, True, id="over-max-frame"),
        pytest.param(None, 0, None, True, id="no-limit"),
        pytest.param(None, 0, 8, False, id="before-hello"),
        pytest.param(b"cut", 0, 8, True, id="slots-not-in-head"),
    ],
)
def test_server_head_it_cannot_decide_from_changes_nothing(
    head: bytes | None, size: int, max_slots: int | None, hello: bool
) -> None:
    """False: the whole frame goes to receive_data as usual; nothing is queued."""
    frame = pack({"op": "state", "id": 9, "pad": "x" * 10, "slots": list(range(BIG))})
    if head is None:
        head = frame[: 64 * 1024]
    elif head == b"cut":
        head = frame[: frame.index(b"slots")]
    server = _limited_server() if hello else BatchServer(max_slots=8)
    server.max_slots = max_slots
    assert server.receive_head(head, size or len(frame)) is False
    assert server.data_to_send() == []
    assert server.events_received() == []


def test_server_counts_slots_before_checking_each() -> None:
    """3.8: a small frame over the limit is refused by its length, items unchecked."""
    server = _limited_server(max_slots=2)
    reply = server_reply(server, pack({"op": "close", "id": 5, "slots": [0, -1, "x"]}))
    assert reply["message"] == "close names 3 slots; this server takes at most 2 per request"
