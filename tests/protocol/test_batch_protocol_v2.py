"""The batched msgpack protocol v2: columns (docs/protocol.md sections 1.2, 1.3 and 3.9).

Version 2 is version 1 plus the columnar forms: ``cols`` (+ ``numeric``) instead of
``args`` in reset/step requests and instead of ``obs`` in their replies, ``meta_cols``
instead of ``meta``, and ``reward`` / ``done`` as plain arrays below 16 slots. Everything
else is version 1's, tested in ``test_batch_protocol.py``.
"""

from __future__ import annotations

import copy
import math
import re
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from openenv_gym.exceptions import LocalProtocolError, RemoteProtocolError
from openenv_gym.protocol.arrays import ALLOWED_DTYPES
from openenv_gym.protocol.batch import (
    DEFAULT_MAX_FRAME,
    PROTOCOL_VERSION,
    PROTOCOL_VERSIONS,
    SUBPROTOCOL,
    SUBPROTOCOL_V2,
    SUBPROTOCOLS,
    BatchClient,
    BatchReplyReceived,
    BatchRequestReceived,
    BatchServer,
    ConnectionState,
    HelloReceived,
    HelloRequestReceived,
    Op,
    RequestFailed,
    ResultTable,
    SlotError,
    column_value,
    columns_to_rows,
    decode_frame,
    encode_frame,
    version_of,
)
from openenv_gym.protocol.openenv import ErrorReceived

ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------- helpers


def snapshot(obj: BatchClient | BatchServer) -> dict[str, Any]:
    """Everything a connection holds, to check that an illegal call changed nothing."""
    return copy.deepcopy({name: getattr(obj, name) for name in vars(obj)})


def pack(message: dict[Any, Any]) -> bytes:
    return encode_frame(message)


def unpack(frame: bytes) -> dict[Any, Any]:
    return decode_frame(frame)


def same(a: Any, b: Any) -> bool:
    """Equality that compares ndarrays by dtype, shape and bytes, and NaN equal to NaN."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


class Pair:
    """A client and a server of one version, wired in memory."""

    def __init__(
        self, version: int = 2, *, max_frame: int = DEFAULT_MAX_FRAME, max_slots: int = 64
    ) -> None:
        self.client = BatchClient(client_name="test-client", version=version)
        self.server = BatchServer(max_frame=max_frame, version=version)
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

    def step(self, slots: list[int]) -> BatchRequestReceived:
        """A pending ``step`` on the server, sent with per-slot maps."""
        return self.request(self.client.send_step(slots, [{}] * len(slots)))

    def answer(self, request: BatchRequestReceived, table: ResultTable) -> dict[Any, Any]:
        """``send_table``; the frame it wrote, after the client read it."""
        self.server.send_table(request, table)
        [frame] = self.server.data_to_send()
        self.client.receive_data(frame)
        return unpack(frame)

    def reply(self) -> BatchReplyReceived:
        [reply] = self.client.events_received()
        assert isinstance(reply, BatchReplyReceived)
        return reply


def ready(version: int = 2, *slots: int, **kwargs: Any) -> Pair:
    pair = Pair(version, **kwargs)
    pair.hello()
    if slots:
        pair.open(*slots)
    return pair


def open_server(version: int = 2) -> BatchServer:
    server = BatchServer(version=version)
    server.receive_data(pack({"op": "hello", "id": 0, "versions": [version]}))
    server.events_received()
    server.send_hello(server="s", env="e", max_slots=8)
    server.data_to_send()
    return server


def server_reply(server: BatchServer, frame: bytes) -> dict[Any, Any]:
    server.receive_data(frame)
    assert server.events_received() == []
    [out] = server.data_to_send()
    return unpack(out)


def table(
    observations: Any,
    rewards: list[float] | None = None,
    dones: list[bool] | None = None,
    **kwargs: Any,
) -> ResultTable:
    n = len(next(iter(observations.values()))) if isinstance(observations, dict) else None
    if n is None:
        n = len(observations)
    return ResultTable(
        observations,
        np.array([0.0] * n if rewards is None else rewards, dtype="<f8"),
        np.array([False] * n if dones is None else dones, dtype="|b1"),
        **kwargs,
    )


# ------------------------------------------------------ 1.2 / 1.3 versions, names


def test_versions_and_subprotocols() -> None:
    """1.2/1.3: versions 1 and 2, subprotocols openenv-gym.batch.v1 and .v2."""
    assert PROTOCOL_VERSIONS == (1, 2)
    assert PROTOCOL_VERSION == 1  # the default of BatchClient and BatchServer
    assert SUBPROTOCOL == "openenv-gym.batch.v1"
    assert SUBPROTOCOL_V2 == "openenv-gym.batch.v2"
    assert SUBPROTOCOLS == {1: SUBPROTOCOL, 2: SUBPROTOCOL_V2}
    assert BatchClient().version == BatchServer().version == 1


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("openenv-gym.batch.v1", 1),
        ("openenv-gym.batch.v2", 2),
        ("openenv-gym.batch.v3", None),
        ("openenv-gym.batch.V2", None),
        ("chat", None),
        ("", None),
        (None, None),
    ],
)
def test_version_of(name: str | None, version: int | None) -> None:
    """1.3: the version a selected subprotocol stands for; None when it is not ours."""
    assert version_of(name) == version


@pytest.mark.parametrize("version", [0, 3, -1])
def test_unknown_versions_are_refused_locally(version: int) -> None:
    with pytest.raises(LocalProtocolError, match=f"unknown protocol version {version}"):
        BatchClient(version=version)
    with pytest.raises(LocalProtocolError, match=f"unknown protocol version {version}"):
        BatchServer(version=version)


# ------------------------------------------------------------------- 3.9.1 hello


def test_v2_hello_lists_exactly_the_connection_version() -> None:
    """3.9.1: the client lists [2]; the server's reply gives 2."""
    pair = Pair(2, max_frame=4096)
    assert pair.client.send_hello() == 0
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "hello", "id": 0, "versions": [2], "client": "test-client"}
    pair.server.receive_data(frame)
    assert pair.server.events_received() == [HelloRequestReceived(0, (2,), "test-client")]
    pair.server.send_hello(server="srv", env="echo", max_slots=3)
    [frame] = pair.server.data_to_send()
    assert unpack(frame)["version"] == 2
    pair.client.receive_data(frame)
    assert pair.client.events_received() == [HelloReceived(2, "srv", "echo", 3, 4096)]
    assert pair.client.state is ConnectionState.OPEN


@pytest.mark.parametrize(
    ("version", "versions", "accepted"),
    [
        (2, [2], True),
        (2, [1, 2], True),
        (2, [3, 2], True),
        (1, [1, 2], True),
        (2, [1], False),
        (2, [3], False),
        (2, [], False),
        (1, [2], False),
    ],
)
def test_server_needs_its_version_in_hello(
    version: int, versions: list[int], accepted: bool
) -> None:
    """3.9.1: the server refuses a hello whose versions lack the connection's version."""
    server = BatchServer(version=version)
    server.receive_data(pack({"op": "hello", "id": 0, "versions": versions}))
    if accepted:
        assert server.events_received() == [HelloRequestReceived(0, tuple(versions), "")]
        assert server.state is ConnectionState.OPEN
        server.send_hello(server="s", env="e", max_slots=1)
        assert unpack(server.data_to_send()[0])["version"] == version
        return
    assert server.events_received() == []
    [frame] = server.data_to_send()
    assert unpack(frame) == {
        "op": "error", "id": 0, "code": "INVALID_REQUEST",
        "message": f"no common protocol version (this connection speaks {version})",
    }  # fmt: skip
    assert server.state is ConnectionState.NEW


@pytest.mark.parametrize(("client_version", "reply_version"), [(2, 1), (1, 2), (2, 3)])
def test_client_rejects_a_hello_reply_with_another_version(
    client_version: int, reply_version: int
) -> None:
    """3.9.1: the reply must give the version the client speaks."""
    client = BatchClient(version=client_version)
    client.send_hello()
    message = {
        "op": "hello", "id": 0, "version": reply_version, "server": "s", "env": "e",
        "max_slots": 1, "max_frame": 100,
    }  # fmt: skip
    with pytest.raises(RemoteProtocolError, match="server chose protocol version"):
        client.receive_data(pack(message))
    assert client.state is ConnectionState.CLOSED
    assert client.server_info is None


@pytest.mark.parametrize(("client_version", "server_version"), [(2, 1), (1, 2)])
def test_mismatched_versions_end_to_end(client_version: int, server_version: int) -> None:
    """1.3: a hello refused for its version: the client closes (and may fall back)."""
    pair = Pair(client_version)
    pair.server = BatchServer(version=server_version)
    pair.client.send_hello()
    pair.to_server()
    events = pair.to_client()
    assert [type(e) for e in events] == [RequestFailed]
    assert events[0].request_id == 0
    assert events[0].message.endswith(f"speaks {server_version})")
    assert pair.client.state is ConnectionState.CLOSED


# ----------------------------------------------------------- 3.9.3 requests by column


def test_step_with_list_columns() -> None:
    """3.9.3: ``cols`` instead of ``args``; the server makes one map per slot."""
    pair = ready(2, 4, 2)
    rid = pair.client.send_step([4, 2], {"a": [1, "x"], "b": [None, {"k": [1]}]})
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {
        "op": "step", "id": rid, "slots": [4, 2], "cols": {"a": [1, "x"], "b": [None, {"k": [1]}]},
    }  # fmt: skip
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert event == BatchRequestReceived(
        Op.STEP, rid, (4, 2), ({"a": 1, "b": None}, {"a": "x", "b": {"k": [1]}})
    )


def test_reset_with_columns_and_tuples() -> None:
    """3.9.3: reset kwargs by column too; a tuple travels as an array."""
    pair = ready(2, 0, 1)
    rid = pair.client.send_reset([0, 1], {"seed": (1, 2), "episode_id": ["a", "b"]})
    event = pair.request(rid)
    assert event.op is Op.RESET
    assert event.args == ({"seed": 1, "episode_id": "a"}, {"seed": 2, "episode_id": "b"})


def test_numeric_columns_become_numbers() -> None:
    """3.9.2/3.9.3: a numeric ndarray column stands for numbers: its rows become lists."""
    pair = ready(2, 0, 1)
    x = np.array([[1, 2], [3, 4]], dtype="<i4")
    y = np.array([0.5, 1.5], dtype=">f8")
    rid = pair.client.send_step([0, 1], {"y": y, "x": x}, numeric=iter(["y", "x", "x"]))
    [frame] = pair.client.data_to_send()
    message = unpack(frame)
    assert message["numeric"] == ["x", "y"]  # sorted, no duplicates
    assert same(message["cols"], {"y": y, "x": x})
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert event.request_id == rid
    assert event.args == ({"y": 0.5, "x": [1, 2]}, {"y": 1.5, "x": [3, 4]})
    assert type(event.args[0]["y"]) is float
    assert type(event.args[0]["x"][0]) is int


def test_other_ndarray_columns_give_a_copy_of_each_row() -> None:
    """3.9.2/3.9.3: a column not named numeric gives each slot its row, an ndarray."""
    pair = ready(2, 0, 1)
    board = np.arange(8, dtype="|u1").reshape(2, 2, 2)
    flat = np.array([7, 8], dtype="<i8")
    event = pair.request(pair.client.send_step([0, 1], {"board": board, "flat": flat}))
    first, second = event.args
    assert same(first["board"], board[0])
    assert same(second["board"], board[1])
    assert same(first["flat"], np.array(7, dtype="<i8"))  # a 0-d array, not a number
    first["board"][0, 0] = 99
    assert second["board"][0, 0] == 4  # each row is its own array


def test_empty_columns_give_empty_maps() -> None:
    pair = ready(2, 0, 1, 2)
    rid = pair.client.send_step([0, 1, 2], {})
    [frame] = pair.client.data_to_send()
    assert unpack(frame)["cols"] == {}
    assert "numeric" not in unpack(frame)
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert event.args == ({}, {}, {})
    assert event.request_id == rid


def test_v2_client_still_sends_per_slot_maps() -> None:
    """3.9.3: ``args`` stays valid on version 2."""
    pair = ready(2, 0)
    rid = pair.client.send_step([0], [{"a": 1}])
    [frame] = pair.client.data_to_send()
    assert unpack(frame) == {"op": "step", "id": rid, "slots": [0], "args": [{"a": 1}]}
    pair.server.receive_data(frame)
    assert pair.server.events_received()[0].args == ({"a": 1},)


def test_v2_server_prefers_cols_over_args() -> None:
    server = open_server(2)
    frame = pack({"op": "step", "id": 3, "slots": [0], "args": [{"a": 1}], "cols": {"b": [2]}})
    server.receive_data(frame)
    assert server.events_received() == [BatchRequestReceived(Op.STEP, 3, (0,), ({"b": 2},))]


@pytest.mark.parametrize("op", ["open", "state", "close"])
def test_v2_server_ignores_cols_of_other_ops(op: str) -> None:
    server = open_server(2)
    server.receive_data(pack({"op": op, "id": 3, "slots": [0], "cols": 1, "numeric": 2}))
    assert server.events_received() == [BatchRequestReceived(Op(op), 3, (0,))]


def test_v1_server_ignores_cols() -> None:
    """3.9: on a version-1 connection ``cols`` is an unknown key: ignored."""
    server = open_server(1)
    server.receive_data(
        pack({"op": "step", "id": 3, "slots": [0], "args": [{"a": 1}], "cols": {"b": [2]}})
    )
    assert server.events_received() == [BatchRequestReceived(Op.STEP, 3, (0,), ({"a": 1},))]
    reply = server_reply(server, pack({"op": "reset", "id": 4, "slots": [1], "cols": {"b": [2]}}))
    assert (reply["id"], reply["code"]) == (4, "INVALID_REQUEST")
    assert reply["message"] == "reset: 'args' must be a list of 1 maps"


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cols": []}, "'cols' must be a map with string keys, got []"),
        ({"cols": None}, "'cols' must be a map with string keys"),
        ({"cols": {1: [0, 0]}}, "'cols' must be a map with string keys"),
        ({"cols": {"a": [0]}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": [0, 0, 0]}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": "ab"}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": b"ab"}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": {"x": 0, "y": 1}}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": 2}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": None}}, "'cols' column 'a' must hold 2 entries"),
        ({"cols": {"a": np.array(1.0)}}, "ndarray of shape (), needs (2, ...)"),
        ({"cols": {"a": np.zeros(3)}}, "ndarray of shape (3,), needs (2, ...)"),
        ({"cols": {"a": np.zeros((1, 2))}}, "ndarray of shape (1, 2), needs (2, ...)"),
        ({"cols": {"a": np.zeros((0,))}}, "ndarray of shape (0,), needs (2, ...)"),
        ({"numeric": "a"}, "'numeric' must list ndarray columns of 'cols', got 'a'"),
        ({"numeric": None}, "'numeric' must list ndarray columns"),
        ({"numeric": {"a": 1}}, "'numeric' must list ndarray columns"),
        ({"numeric": [1]}, "'numeric' must list ndarray columns"),
        ({"numeric": ["l"]}, "'numeric' must list ndarray columns"),  # a list column
        ({"numeric": ["z"]}, "'numeric' must list ndarray columns"),  # no such column
        ({"numeric": ["a", 0]}, "'numeric' must list ndarray columns"),
    ],
)
@pytest.mark.parametrize("op", ["reset", "step"])
def test_server_rejects_malformed_columns(op: str, fields: dict[str, Any], match: str) -> None:
    """3.9.3: malformed ``cols`` / ``numeric``: INVALID_REQUEST, connection and slots kept."""
    server = open_server(2)
    message = {
        "op": op, "id": 4, "slots": [0, 1],
        "cols": {"a": np.zeros(2), "l": [0, 1]}, "numeric": ["a"], **fields,
    }  # fmt: skip
    reply = server_reply(server, pack(message))
    assert (reply["op"], reply["id"], reply["code"]) == ("error", 4, "INVALID_REQUEST")
    assert match in reply["message"]
    assert server.state is ConnectionState.OPEN
    server.receive_data(pack({"op": op, "id": 4, "slots": [0, 1], "cols": {"a": [0, 1]}}))
    assert len(server.events_received()) == 1  # neither the id nor the slots are taken


def test_server_accepts_the_good_columns_of_the_malformed_test() -> None:
    server = open_server(2)
    server.receive_data(
        pack({"op": "step", "id": 4, "slots": [0, 1], "cols": {"a": np.zeros(2), "l": [0, 1]},
              "numeric": ["a"]})
    )  # fmt: skip
    [event] = server.events_received()
    assert event.args == ({"a": 0.0, "l": 0}, {"a": 0.0, "l": 1})


# ----------------------------------------------------- 3.9.3 illegal client calls


def v2_client(max_frame: int = 300, version: int = 2) -> BatchClient:
    client = BatchClient(version=version)
    client.send_hello()
    client.receive_data(
        pack({"op": "hello", "id": 0, "version": version, "server": "s", "env": "e",
              "max_slots": 8, "max_frame": max_frame})
    )  # fmt: skip
    client.events_received()
    client.data_to_send()
    client.open_slots.update({0, 1})
    return client


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.send_step([0, 1], {1: [0, 0]}), "argument columns need string keys"),
        (lambda c: c.send_step([0, 1], {"a": [0]}), "column 'a' must hold 2 entries"),
        (lambda c: c.send_reset([0, 1], {"a": [0, 0, 0]}), "column 'a' must hold 2 entries"),
        (lambda c: c.send_step([0, 1], {"a": 5}), "column 'a' must be a list or an ndarray"),
        (lambda c: c.send_step([0, 1], {"a": None}), "column 'a' must be a list or an ndarray"),
        (lambda c: c.send_step([0, 1], {"a": np.array(1.0)}), "column 'a' must hold 2"),
        (lambda c: c.send_step([0, 1], {"a": np.zeros(3)}), "column 'a' must hold 2 entries"),
        (lambda c: c.send_step([0, 1], {"a": np.zeros((1, 2))}), "column 'a' must hold 2"),
        (
            lambda c: c.send_step([0, 1], {"a": [0, 0]}, numeric=["a"]),
            "'numeric' may only name ndarray columns",
        ),
        (
            lambda c: c.send_step([0, 1], {"a": np.zeros(2)}, numeric=["b"]),
            "'numeric' may only name ndarray columns",
        ),
        (
            lambda c: c.send_step([0, 1], {"a": np.zeros(2)}, numeric=[1]),
            "'numeric' may only name ndarray columns",
        ),
        (
            lambda c: c.send_step([0, 1], {"a": np.array([object(), 1], dtype=object)}),
            "arrays of dtype object cannot be sent",
        ),
        (lambda c: c.send_step([0, 1], {"a": [object(), 1]}), "cannot encode"),
        (lambda c: c.send_step([0, 1], {"a": ["y" * 200] * 2}), "exceeds the server's max_frame"),
        (lambda c: c.send_step([0, 2], {"a": [0, 0]}), "not open"),
    ],
)
def test_client_illegal_column_requests_leave_state_unchanged(call: Any, match: str) -> None:
    """3.9.3: a request by column that cannot travel: LocalProtocolError, nothing changed."""
    client = v2_client()
    before = snapshot(client)
    with pytest.raises(LocalProtocolError, match=re.escape(match)):
        call(client)
    assert snapshot(client) == before


@pytest.mark.parametrize("op", ["reset", "step"])
def test_v1_client_refuses_columns(op: str) -> None:
    """3.9: only a version-2 connection carries ``cols``."""
    client = v2_client(version=1)
    before = snapshot(client)
    with pytest.raises(
        LocalProtocolError, match=f"{op}: columnar arguments need protocol version 2"
    ):
        getattr(client, f"send_{op}")([0, 1], {"a": [0, 0]})
    assert snapshot(client) == before


# ----------------------------------------------------------- 3.9.4 replies by column


def test_send_table_v2_columns_travel_as_they_are() -> None:
    """3.9.4: ``cols``, ``numeric``, ``meta_cols``; plain ``reward`` / ``done`` arrays."""
    pair = ready(2, 5, 6)
    request = pair.step([5, 6])
    x = np.arange(4, dtype="<i8").reshape(2, 2)
    img = np.ones((2, 1, 3), dtype="|u1")
    message = pair.answer(
        request,
        table(
            {"text": ["a", "b"], "x": x, "img": img},
            [0.5, math.nan],
            [False, True],
            numeric=frozenset({"x"}),
            metadata={"m": [1, {"k": 2}]},
        ),
    )
    assert list(message) == ["op", "id", "reward", "done", "cols", "numeric", "meta_cols"]
    assert message["reward"][0] == 0.5
    assert math.isnan(message["reward"][1])
    assert type(message["reward"]) is list
    assert message["done"] == [False, True]
    assert same(message["cols"], {"text": ["a", "b"], "x": x, "img": img})
    assert message["numeric"] == ["x"]
    assert message["meta_cols"] == {"m": [1, {"k": 2}]}
    reply = pair.reply()
    assert reply.observations is None
    assert reply.metadata is None
    assert same(reply.columns, {"text": ["a", "b"], "x": x, "img": img})
    assert reply.numeric == frozenset({"x"})
    assert reply.meta_columns == {"m": [1, {"k": 2}]}
    assert reply.rewards.dtype == np.dtype("<f8")
    assert reply.dones.dtype == np.dtype("|b1")
    assert reply.dones.tolist() == [False, True]
    assert same(reply.observation(0), {"text": "a", "x": [0, 1], "img": img[0]})
    assert same(reply.observation(1), {"text": "b", "x": [2, 3], "img": img[1]})
    assert reply.meta(0) == {"m": 1}
    assert reply.meta(1) == {"m": {"k": 2}}
    assert reply.errors == {}
    assert pair.client.in_flight == 0


def test_send_table_v1_columns_become_per_slot_maps() -> None:
    """3.9.4: on version 1 the same table goes out as v1's ``obs`` / ``meta`` / ndarrays."""
    pair = ready(1, 5, 6)
    request = pair.step([5, 6])
    x = np.arange(4, dtype="<i8").reshape(2, 2)
    img = np.ones((2, 1, 3), dtype="|u1")
    message = pair.answer(
        request,
        table(
            {"text": ["a", "b"], "x": x, "img": img},
            [0.5, 1.0],
            [False, True],
            numeric=frozenset({"x"}),
            metadata={"m": [1, 2]},
        ),
    )
    assert list(message) == ["op", "id", "reward", "done", "obs", "meta"]
    assert same(
        message["obs"],
        [{"text": "a", "x": [0, 1], "img": img[0]}, {"text": "b", "x": [2, 3], "img": img[1]}],
    )
    assert message["meta"] == [{"m": 1}, {"m": 2}]
    assert same(message["reward"], np.array([0.5, 1.0]))
    assert same(message["done"], np.array([False, True]))
    reply = pair.reply()
    assert reply.columns is None
    assert reply.meta_columns is None
    assert same(reply.observation(1), {"text": "b", "x": [2, 3], "img": img[1]})
    assert reply.meta(1) == {"m": 2}


@pytest.mark.parametrize("version", [1, 2])
def test_send_table_per_slot_maps(version: int) -> None:
    """3.9.4: a table may hold one map per slot; it goes out as ``obs`` / ``meta``."""
    pair = ready(version, 0, 1, 2)
    request = pair.step([0, 1, 2])
    message = pair.answer(
        request,
        table(
            [{"o": 1}, None, {}],
            metadata=[{"m": 1}, {"m": 2}, {}],
            errors={1: SlotError("EXECUTION_ERROR", "boom")},
        ),
    )
    assert message["obs"] == [{"o": 1}, None, {}]
    assert message["meta"] == [{"m": 1}, None, None]  # failed and empty: nil
    reply = pair.reply()
    assert reply.observations == [{"o": 1}, None, {}]
    assert reply.observation(2) == {}
    assert reply.meta(1) is None
    assert reply.errors == {1: ErrorReceived("EXECUTION_ERROR", "boom", {}, False)}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize(
    "metadata",
    [None, [None, None], [{}, None], {}],
    ids=["none", "nils", "empty-maps", "no-columns"],
)
def test_send_table_without_metadata(version: int, metadata: Any) -> None:
    """3.9.4: no slot has metadata: no ``meta`` (``meta_cols`` may be an empty map)."""
    pair = ready(version, 0, 1)
    message = pair.answer(pair.step([0, 1]), table({"o": [1, 2]}, metadata=metadata))
    assert "meta" not in message
    if version == 2 and metadata == {}:
        assert message["meta_cols"] == {}
    else:
        assert "meta_cols" not in message
    reply = pair.reply()
    assert [reply.meta(0), reply.meta(1)] == [None, None]


@pytest.mark.parametrize("version", [1, 2])
def test_send_table_errors_by_position(version: int) -> None:
    """3.9.4: errors keyed by position, sorted; the columns' entries there are ignored."""
    pair = ready(version, 7, 3, 9)
    request = pair.step([7, 3, 9])
    message = pair.answer(
        request,
        table(
            {"o": [1, "ignored", "ignored"]},
            [1.0, math.nan, math.nan],
            metadata={"m": [1, 2, 3]},
            errors={
                2: SlotError("NO_SUCH_SLOT", "slot 9 is not open"),
                1: SlotError("VALIDATION_ERROR", "bad", {"errors": []}),
            },
        ),
    )
    assert list(message["errors"]) == [1, 2]
    assert message["errors"][1] == ["VALIDATION_ERROR", "bad", {"errors": []}]
    if version == 2:
        assert message["cols"] == {"o": [1, "ignored", "ignored"]}
        assert message["meta_cols"] == {"m": [1, 2, 3]}
    else:
        assert message["obs"] == [{"o": 1}, None, None]
        assert message["meta"] == [{"m": 1}, None, None]
    reply = pair.reply()
    assert set(reply.errors) == {3, 9}
    assert reply.errors[3] == ErrorReceived("VALIDATION_ERROR", "bad", {"errors": []}, False)
    assert [reply.observation(k) for k in range(3)] == [{"o": 1}, None, None]
    assert [reply.meta(k) for k in range(3)] == [{"m": 1}, None, None]
    assert pair.client.open_slots == {3, 7}  # NO_SUCH_SLOT ends slot 9 (3.6.1)


@pytest.mark.parametrize(
    ("version", "n", "plain"),
    [(2, 1, True), (2, 15, True), (2, 16, False), (2, 17, False), (1, 1, False), (1, 15, False)],
)
def test_reward_and_done_are_plain_arrays_below_16_slots(version: int, n: int, plain: bool) -> None:
    """3.9.4: a v2 server sends fewer than 16 rewards / dones as plain arrays."""
    pair = ready(version, *range(n))
    rewards = [float(k) for k in range(n - 1)] + [math.nan]
    dones = [k % 2 == 0 for k in range(n)]
    message = pair.answer(pair.step(list(range(n))), table([{}] * n, rewards, dones))
    if plain:
        assert type(message["reward"]) is list
        assert message["done"] == dones
        assert all(type(v) is float for v in message["reward"])
    else:
        assert message["reward"].dtype.str == "<f8"
        assert message["done"].dtype.str == "|b1"
    reply = pair.reply()
    assert same(reply.rewards, np.array(rewards, dtype="<f8"))
    assert same(reply.dones, np.array(dones, dtype="|b1"))


@pytest.mark.parametrize("op", ["reset", "step"])
def test_send_table_answers_reset_too(op: str) -> None:
    pair = ready(2, 0)
    send = pair.client.send_reset if op == "reset" else pair.client.send_step
    request = pair.request(send([0], [{}]))
    message = pair.answer(request, table({"o": [1]}))
    assert message["op"] == op
    assert pair.reply().op is Op(op)


# ------------------------------------------------ 3.9.4 illegal send_table calls


def pending_step(version: int) -> tuple[BatchServer, BatchRequestReceived]:
    server = open_server(version)
    server.receive_data(pack({"op": "step", "id": 2, "slots": [0, 1], "args": [{}, {}]}))
    [event] = server.events_received()
    return server, event


GOOD = {"o": [1, 2]}
Z2, B2 = np.zeros(2), np.zeros(2, dtype=bool)


ILLEGAL_TABLES: list[tuple[tuple[int, ...], BatchRequestReceived | None, ResultTable, str]] = [
    (
        (1, 2),
        BatchRequestReceived(Op.STATE, 2, (0, 1)),
        ResultTable(GOOD, Z2, B2),
        "send_table answers reset and step, not state",
    ),
    (
        (1, 2),
        BatchRequestReceived(Op.OPEN, 2, (0, 1)),
        ResultTable(GOOD, Z2, B2),
        "not open",
    ),
    ((1, 2), None, ResultTable(GOOD, np.zeros(3), B2), "rewards and dones need shape (2,)"),
    ((1, 2), None, ResultTable(GOOD, Z2, np.zeros((2, 1), bool)), "need shape"),
    (
        (1, 2),
        None,
        ResultTable(GOOD, Z2, B2, errors={2: SlotError("X", "m")}),
        "error positions",
    ),
    (
        (1, 2),
        None,
        ResultTable(GOOD, Z2, B2, errors={-1: SlotError("X", "m")}),
        "error positions",
    ),
    (
        (1, 2),
        None,
        ResultTable(GOOD, Z2, B2, errors={True: SlotError("X", "m")}),
        "error positions",
    ),
    ((2,), None, ResultTable({"o": [1]}, Z2, B2), "column 'o' must hold 2 entries"),
    ((2,), None, ResultTable({"o": np.zeros(3)}, Z2, B2), "column 'o' must hold 2"),
    ((2,), None, ResultTable({"o": np.array(1)}, Z2, B2), "column 'o' must hold 2"),
    (
        (2,),
        None,
        ResultTable(GOOD, Z2, B2, numeric=frozenset({"o"})),
        "'numeric' may only name ndarray columns",
    ),
    (
        (2,),
        None,
        ResultTable(GOOD, Z2, B2, metadata={"m": (1, 2)}),
        "metadata columns must be lists",
    ),
    (
        (2,),
        None,
        ResultTable(GOOD, Z2, B2, metadata={"m": np.zeros(2)}),
        "metadata columns must be lists",
    ),
    ((2,), None, ResultTable(GOOD, Z2, B2, metadata={"m": [1]}), "column 'm' must hold 2"),
    ((1, 2), None, ResultTable([{}], Z2, B2), "2 slots need 2 observations, got 1"),
    ((1,), None, ResultTable({"o": [1, 2, 3]}, Z2, B2), "column 'o' must hold 2 entries"),
    ((1, 2), None, ResultTable(GOOD, Z2, B2, metadata=[None]), "need 2 metadata entries"),
    ((1,), None, ResultTable(GOOD, Z2, B2, metadata={"m": [1]}), "column 'm' must hold 2 entries"),
    ((1, 2), None, ResultTable({"o": [object(), 1]}, Z2, B2), "cannot encode"),
    ((1, 2), None, ResultTable([{"o": object()}, {}], Z2, B2), "cannot encode"),
    (
        (1, 2),
        BatchRequestReceived(Op.STEP, 3, (0, 1)),
        ResultTable(GOOD, Z2, B2),
        "no pending step request with id 3",
    ),
    (
        (1, 2),
        BatchRequestReceived(Op.RESET, 2, (0, 1)),
        ResultTable(GOOD, Z2, B2),
        "no pending reset request with id 2",
    ),
    (
        (1, 2),
        BatchRequestReceived(Op.STEP, 2, (1, 0)),
        ResultTable(GOOD, Z2, B2),
        "no pending step request",
    ),
]


@pytest.mark.parametrize(
    ("version", "request_", "result", "match"),
    [
        (version, request_, result, match)
        for versions, request_, result, match in ILLEGAL_TABLES
        for version in versions
    ],
)
def test_send_table_illegal_calls_leave_state_unchanged(
    version: int, request_: BatchRequestReceived | None, result: ResultTable, match: str
) -> None:
    """3.9.4: a table that does not fit its request: LocalProtocolError, nothing changed."""
    server, event = pending_step(version)
    before = snapshot(server)
    with pytest.raises(LocalProtocolError, match=re.escape(match)):
        server.send_table(event if request_ is None else request_, result)
    assert snapshot(server) == before
    server.send_table(event, ResultTable(GOOD, Z2, B2))  # the request is still pending
    assert len(server.data_to_send()) == 1
    with pytest.raises(LocalProtocolError, match="no pending step"):
        server.send_table(event, ResultTable(GOOD, Z2, B2))  # answered exactly once


# ------------------------------------------------- 3.9.4 what a v2 client accepts


GOOD_COLUMNAR: dict[str, Any] = {
    "cols": {"o": [1, 2], "a": np.zeros((2, 3), "<f4")},
    "numeric": ["a"],
    "reward": [0.0, 1],
    "done": [False, True],
    "meta_cols": {"m": ["x", "y"]},
}
DROP = object()


def v2_step_reply(fields: dict[str, Any], version: int = 2) -> BatchClient:
    """A client with a step on slots 0, 1 in flight that got ``GOOD_COLUMNAR | fields``."""
    client = v2_client(version=version)
    rid = client.send_step([0, 1], [{}, {}])
    message = {"op": "step", "id": rid, **GOOD_COLUMNAR, **fields}
    client.receive_data(pack({k: v for k, v in message.items() if v is not DROP}))
    return client


def test_client_accepts_the_good_columnar_reply() -> None:
    [reply] = v2_step_reply({}).events_received()
    assert same(reply.observation(1), {"o": 2, "a": [0.0, 0.0, 0.0]})
    assert reply.meta(0) == {"m": "x"}
    assert same(reply.rewards, np.array([0.0, 1.0]))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cols": []}, "'cols' must be a map with string keys"),
        ({"cols": None}, "'cols' must be a map with string keys"),
        ({"cols": {1: [1, 2]}, "numeric": []}, "'cols' must be a map with string keys"),
        ({"cols": {"o": [1]}}, "'cols' column 'o' must hold 2 entries"),
        ({"cols": {"o": "ab"}}, "'cols' column 'o' must hold 2 entries"),
        ({"cols": {"o": {"p": 1, "q": 2}}}, "'cols' column 'o' must hold 2 entries"),
        ({"cols": {"a": np.array(1)}}, "ndarray of shape (), needs (2, ...)"),
        ({"cols": {"a": np.zeros((3, 2))}}, "ndarray of shape (3, 2), needs (2, ...)"),
        ({"numeric": "a"}, "'numeric' must list ndarray columns of 'cols'"),
        ({"numeric": None}, "'numeric' must list ndarray columns"),
        ({"numeric": ["o"]}, "'numeric' must list ndarray columns"),
        ({"numeric": ["b"]}, "'numeric' must list ndarray columns"),
        ({"numeric": [0]}, "'numeric' must list ndarray columns"),
        ({"meta_cols": []}, "'meta_cols' must be a map with string keys"),
        ({"meta_cols": {2: [1, 2]}}, "'meta_cols' must be a map with string keys"),
        ({"meta_cols": {"m": [1]}}, "'meta_cols' column 'm' must hold 2 entries"),
        ({"meta_cols": {"m": None}}, "'meta_cols' column 'm' must hold 2 entries"),
        ({"meta_cols": {"m": np.zeros(2)}}, "'meta_cols' columns must be arrays, not ndarrays"),
        ({"meta_cols": DROP, "meta": [None]}, "'meta' must be a list of 2"),
        ({"meta_cols": DROP, "meta": [None, 1]}, "'meta' entries must be dict"),
        ({"cols": DROP}, "'obs' must be a list of 2"),
        ({"cols": DROP, "obs": [{}, None]}, "slot 1: needs either a result or an error"),
        ({"reward": [0.0]}, "'reward' must be a <f8 array of shape (2,)"),
        ({"reward": [0.0, 0.0, 0.0]}, "'reward' must be a <f8"),
        ({"reward": [0.0, None]}, "'reward' must be a <f8"),
        ({"reward": [True, 0.0]}, "'reward' must be a <f8"),
        ({"reward": ["0", 0.0]}, "'reward' must be a <f8"),
        ({"reward": [[0.0], 0.0]}, "'reward' must be a <f8"),
        ({"reward": np.zeros(2, "<f4")}, "'reward' must be a <f8"),
        ({"reward": DROP}, "'reward' must be a <f8"),
        ({"done": [0, 1]}, "'done' must be a |b1 array of shape (2,)"),
        ({"done": [False, None]}, "'done' must be a |b1"),
        ({"done": [False]}, "'done' must be a |b1"),
        ({"done": np.zeros(2, "<f8")}, "'done' must be a |b1"),
        ({"errors": {2: ["X", "m", {}]}}, "not a slot position"),
    ],
)
def test_client_rejects_malformed_columnar_replies(fields: dict[str, Any], match: str) -> None:
    """3.9.4: a malformed v2 reply is a RemoteProtocolError and closes the connection."""
    with pytest.raises(RemoteProtocolError, match=re.escape(match)):
        v2_step_reply(fields)


def test_client_rejection_closes_the_connection() -> None:
    client = v2_client()
    client.send_step([0, 1], {"a": [1, 2]})
    with pytest.raises(RemoteProtocolError):
        client.receive_data(pack({"op": "step", "id": 1, **GOOD_COLUMNAR, "cols": []}))
    assert client.state is ConnectionState.CLOSED
    assert client.open_slots == set()
    assert client.in_flight == 0
    assert client.events_received() == []


def test_v2_client_accepts_every_mix_of_forms() -> None:
    """3.9.4: ``cols`` or ``obs``, ``meta_cols`` or ``meta``, arrays or ndarrays."""
    [reply] = v2_step_reply(
        {"cols": DROP, "obs": [{"o": 1}, {"o": 2}], "reward": np.zeros(2)}
    ).events_received()
    assert reply.columns is None
    assert reply.observations == [{"o": 1}, {"o": 2}]
    assert reply.metadata is None
    assert reply.meta(1) == {"m": "y"}
    [reply] = v2_step_reply(
        {"meta_cols": DROP, "meta": [None, {"k": 1}], "done": np.ones(2, bool)}
    ).events_received()
    assert reply.observations is None
    assert reply.metadata == [None, {"k": 1}]
    assert [reply.meta(0), reply.meta(1)] == [None, {"k": 1}]
    assert reply.dones.tolist() == [True, True]
    [reply] = v2_step_reply({"meta_cols": DROP}).events_received()
    assert reply.metadata == [None, None]
    assert reply.meta(0) is None
    [reply] = v2_step_reply({"numeric": DROP, "cols": {"o": [1, 2]}}).events_received()
    assert reply.numeric == frozenset()


def test_v2_client_prefers_cols_and_meta_cols() -> None:
    """3.9.4: when both forms come, the columnar one counts."""
    [reply] = v2_step_reply({"obs": "ignored", "meta": 7}).events_received()
    assert reply.observations is None
    assert reply.meta_columns == {"m": ["x", "y"]}


def test_v2_client_columnar_reply_with_every_slot_failed() -> None:
    [reply] = v2_step_reply(
        {"errors": {0: ["EXECUTION_ERROR", "a", {}], 1: ["SESSION_ERROR", "b", {}]}}
    ).events_received()
    assert [reply.observation(0), reply.observation(1)] == [None, None]
    assert [reply.meta(0), reply.meta(1)] == [None, None]


def test_v2_state_reply_ignores_columns() -> None:
    """3.9: columns are for reset and step only; ``state`` replies are version 1's."""
    client = v2_client()
    rid = client.send_state([0])
    client.receive_data(pack({"op": "state", "id": rid, "state": [{"s": 1}], "cols": 1}))
    [reply] = client.events_received()
    assert reply.observations == [{"s": 1}]
    assert reply.columns is None
    assert reply.observation(0) == {"s": 1}
    rid = client.send_state([0])
    with pytest.raises(RemoteProtocolError, match="'state' must be a list of 1"):
        client.receive_data(pack({"op": "state", "id": rid, "cols": {"s": [1]}}))


def test_v1_client_ignores_the_columnar_forms() -> None:
    """3.9: on version 1, ``cols`` and ``meta_cols`` are unknown keys, arrays not allowed."""
    v1_fields = {"obs": [{"o": 1}, {}], "reward": np.zeros(2), "done": np.zeros(2, bool)}
    [reply] = v2_step_reply(v1_fields, version=1).events_received()
    assert reply.columns is None
    assert reply.meta_columns is None
    assert reply.observations == [{"o": 1}, {}]
    assert reply.metadata == [None, None]
    with pytest.raises(RemoteProtocolError, match="'obs' must be a list of 2"):
        v2_step_reply({}, version=1)
    with pytest.raises(RemoteProtocolError, match="'reward' must be a <f8 array"):
        v2_step_reply({**v1_fields, "reward": [0.0, 0.0]}, version=1)
    with pytest.raises(RemoteProtocolError, match=r"'done' must be a \|b1 array"):
        v2_step_reply({**v1_fields, "done": [False, False]}, version=1)


# ------------------------------------------------ the reply's accessors, helpers


def test_reply_accessors_without_columns() -> None:
    reply = BatchReplyReceived(
        Op.STEP, 1, (0, 1), [{"o": 1}, None], np.zeros(2), np.zeros(2, bool),
        None, {1: ErrorReceived("X", "m", {}, False)},
    )  # fmt: skip
    assert reply.observation(0) == {"o": 1}
    assert reply.observation(1) is None
    assert reply.meta(0) is None  # no metadata at all


def test_column_value() -> None:
    array = np.arange(6, dtype="<i2").reshape(3, 2)
    assert column_value(["a", "b"], 1, False) == "b"
    assert column_value(["a", "b"], 1, True) == "b"  # numeric is for ndarrays only
    assert column_value(array, 2, True) == [4, 5]
    row = column_value(array, 2, False)
    assert same(row, np.array([4, 5], dtype="<i2"))
    row[0] = 0
    assert array[2, 0] == 4  # a copy
    assert column_value(np.array([1.5, 2.5]), 0, True) == 1.5
    assert same(column_value(np.array([1.5, 2.5]), 0, False), np.array(1.5))


def test_columns_to_rows() -> None:
    array = np.arange(4, dtype="<f4").reshape(2, 2)
    assert columns_to_rows({}, frozenset(), 3) == [{}, {}, {}]
    assert columns_to_rows({"a": [1, 2], "b": array}, frozenset({"b"}), 2) == [
        {"a": 1, "b": [0.0, 1.0]},
        {"a": 2, "b": [2.0, 3.0]},
    ]
    rows = columns_to_rows({"b": array}, frozenset(), 2)
    assert same(rows, [{"b": array[0]}, {"b": array[1]}])
    rows[0]["b"][0] = 9
    assert array[0, 0] == 0  # copies


# ------------------------------------------------------- 3.9: hypothesis round trips

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
dtypes = st.sampled_from(sorted(ALLOWED_DTYPES)).map(np.dtype)
ndarrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
mp_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | text
    | st.binary(max_size=8)
)
mp_values = st.recursive(
    mp_scalars | ndarrays,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def column_maps(draw: st.DrawFn, n: int) -> tuple[dict[str, Any], frozenset[str]]:
    """A map of columns of ``n`` entries (lists and ndarrays) and its numeric columns."""
    keys = draw(st.lists(text, max_size=4, unique=True))
    columns: dict[str, Any] = {}
    numeric = set()
    for key in keys:
        if draw(st.booleans()):
            columns[key] = draw(st.lists(mp_values, min_size=n, max_size=n))
        else:
            rest = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
            columns[key] = draw(hnp.arrays(dtypes, (n, *rest)))
            if draw(st.booleans()):
                numeric.add(key)
    return columns, frozenset(numeric)


def expected_rows(columns: dict[str, Any], numeric: frozenset[str], n: int) -> list[Any]:
    """One map per slot, written out by hand from the rules of 3.9.2."""
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, column in columns.items():
        for k in range(n):
            if not isinstance(column, np.ndarray):
                rows[k][key] = column[k]
            elif key in numeric:
                rows[k][key] = column[k].tolist()
            else:
                rows[k][key] = np.array(column[k])
    return rows


slot_lists = st.lists(st.integers(0, 2**40), min_size=1, max_size=5, unique=True)


@ROUND_TRIP
@given(st.data())
def test_columns_round_trip_client_to_server(data: st.DataObject) -> None:
    """3.9.3: any columns a v2 client sends reach the server as the rows they stand for."""
    pair = ready(2)
    slots = data.draw(slot_lists)
    pair.client.open_slots.update(slots)
    columns, numeric = data.draw(column_maps(len(slots)))
    op = data.draw(st.sampled_from(["reset", "step"]))
    rid = getattr(pair.client, f"send_{op}")(slots, columns, numeric=numeric)
    [frame] = pair.client.data_to_send()
    message = unpack(frame)
    assert same(message["cols"], columns)
    assert message.get("numeric", []) == sorted(numeric)
    pair.server.receive_data(frame)
    [event] = pair.server.events_received()
    assert (event.op.value, event.request_id, event.slots) == (op, rid, tuple(slots))
    assert same(list(event.args), expected_rows(columns, numeric, len(slots)))


@ROUND_TRIP
@given(st.data())
def test_columns_round_trip_server_to_client(data: st.DataObject) -> None:
    """3.9.4: a table reaches a v2 client as columns and a v1 client as the same rows."""
    slots = data.draw(
        slot_lists | st.lists(st.integers(0, 99), min_size=16, max_size=18, unique=True)
    )
    n = len(slots)
    columns, numeric = data.draw(column_maps(n))
    rewards = np.array(data.draw(st.lists(st.floats(), min_size=n, max_size=n)), dtype="<f8")
    dones = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype="|b1")
    failed = data.draw(st.sets(st.integers(0, n - 1)))
    errors = {pos: SlotError(data.draw(text), data.draw(text)) for pos in failed}
    metadata = data.draw(
        st.none() | st.dictionaries(text, st.lists(mp_values, min_size=n, max_size=n), max_size=3)
    )
    result = ResultTable(columns, rewards, dones, numeric, metadata, errors)
    replies = []
    for version in (2, 1):
        pair = ready(version)
        pair.client.open_slots.update(slots)
        pair.answer(pair.step(slots), result)
        replies.append(pair.reply())
    v2, v1 = replies
    assert same(v2.columns, columns)
    assert v2.numeric == numeric
    assert same(v2.meta_columns, metadata)
    rows = expected_rows(columns, numeric, n)
    for reply in replies:
        assert same(reply.rewards, rewards)
        assert same(reply.dones, dones)
        assert set(reply.errors) == {slots[pos] for pos in failed}
        for k in range(n):
            if k in failed:
                assert reply.observation(k) is None
                assert reply.meta(k) is None
                continue
            assert same(reply.observation(k), rows[k])
            meta = None if metadata is None else {key: col[k] for key, col in metadata.items()}
            assert same(reply.meta(k), meta or None)
    assert v1.observations is not None
    assert same(v1.observations, [None if k in failed else rows[k] for k in range(n)])


# --------------------------------------------------- 4.2: the v2 example of 3.9

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
V2_EXAMPLE = re.compile(r"<!-- v2-example: ([\w-]+) -->\n```text\n(.*?)```", re.DOTALL)


def test_v2_examples_match_the_encoder() -> None:
    """3.9.5: each annotated hex dump of a v2 frame is exactly what the code writes."""
    documented = {
        name: bytes.fromhex(" ".join(line.split("#", 1)[0] for line in body.splitlines()))
        for name, body in V2_EXAMPLE.findall(DOC.read_text(encoding="utf-8"))
    }
    pair = Pair(2)
    pair.client.client_name = "demo"
    pair.hello()
    pair.open(0, 1)
    pair.client.send_step([0, 1], {"message": ["hi", "yo"]})
    [request_frame] = pair.client.data_to_send()
    pair.server.receive_data(request_frame)
    [request] = pair.server.events_received()
    pair.server.send_table(
        request,
        table({"echoed_message": ["hi", "yo"]}, [0.5, math.nan], [False, True]),
    )
    [reply_frame] = pair.server.data_to_send()
    pair.client.receive_data(reply_frame)
    assert documented == {"v2-step-request": request_frame, "v2-step-reply": reply_frame}


# ----------------------------------------------------------- bugs found (fixed)


def test_client_refuses_columns_the_server_rejects() -> None:
    client = v2_client()
    before = snapshot(client)
    with pytest.raises(LocalProtocolError):
        client.send_step([0, 1], {"a": "xy"})
    assert snapshot(client) == before


@pytest.mark.parametrize(
    "observations", [{"o": "ab"}, {"o": {"p": 1, "q": 2}}, {1: [1, 2]}], ids=["str", "dict", "key"]
)
def test_send_table_refuses_columns_the_client_rejects(observations: Any) -> None:
    server, event = pending_step(2)
    with pytest.raises(LocalProtocolError):
        server.send_table(event, ResultTable(observations, Z2, B2))


def test_small_send_table_casts_like_the_ndarray_path() -> None:
    pair = ready(2, 0, 1)
    pair.answer(pair.step([0, 1]), ResultTable(GOOD, Z2, np.zeros(2, dtype="|u1")))
    assert pair.reply().dones.tolist() == [False, False]


@pytest.mark.parametrize(
    ("observations", "metadata"),
    [
        ({"o": [1, 2], "p": [1, 2, 3]}, None),
        ({"o": np.float64(1)}, None),
        (GOOD, {"m": [1], "k": [1, 2]}),
    ],
    ids=["ragged", "0-d", "ragged-metadata"],
)
def test_v1_send_table_refuses_ragged_columns_with_local_protocol_error(
    observations: Any, metadata: Any
) -> None:
    server, event = pending_step(1)
    with pytest.raises(LocalProtocolError):
        server.send_table(event, ResultTable(observations, Z2, B2, metadata=metadata))


def test_client_columns_accept_any_mapping() -> None:
    client = v2_client()
    client.send_step([0, 1], types.MappingProxyType({"a": [1, 2]}))
    assert unpack(client.data_to_send()[0])["cols"] == {"a": [1, 2]}
