"""What one frame may cost (issue 22, item 1): the value budget, bounded reprs and errors.

``decode_frame(max_values=...)`` stops a msgpack decode as soon as it passes the budget
(section 3.8); ``BatchServer`` refuses such a frame with its id when it can read one;
``messages.loads`` refuses JSON holding more values before parsing it; errors echo input
only when it is small (``cut``), list at most ``MAX_ERRORS`` entries, and ``brief`` never
sorts a peer's keys.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import msgpack
import pytest

from openenv_gym.exceptions import RemoteProtocolError
from openenv_gym.protocol.batch import BatchServer, decode_frame, encode_frame
from openenv_gym.protocol.batch.codec import FrameBudgetError
from openenv_gym.protocol.openenv import ServerSession
from openenv_gym.protocol.openenv.messages import (
    MAX_ERRORS,
    brief,
    count_values,
    cut,
    decode_request,
    loads,
)

# ------------------------------------------------------------------ msgpack (3.8)


@pytest.mark.parametrize(
    ("value", "count"),
    [
        ({"a": [1, 2, 3]}, 2 + 3),  # every key, value and item, the frame's map aside
        ({"a": [[], [], []]}, 2 + 3),
        ({"a": {"b": {}}}, 2 + 2),
        ({"a": [{"b": 1}, {"c": [2]}]}, 2 + 2 + 2 + 2 + 1),
    ],
)
def test_values_are_counted_as_documented(value, count):
    frame = encode_frame(value)
    assert decode_frame(frame, max_values=count) == value
    with pytest.raises(FrameBudgetError, match=f"more than {count - 1} values"):
        decode_frame(frame, max_values=count - 1)


def test_the_decode_stops_at_the_budget_not_at_the_end():
    """15 M empty arrays (issue 22): refused after the budget's worth, not after 15 M."""
    frame = encode_frame({"op": "step", "id": 1, "slots": [0], "args": [{"m": [[]] * 2_000_000}]})
    tracemalloc.start()
    try:
        with pytest.raises(FrameBudgetError):
            decode_frame(frame, max_values=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20  # the 2 M lists it would have made take 100 MB


def test_an_inner_list_can_end_the_decode():
    with pytest.raises(FrameBudgetError, match="more than 3 values"):
        decode_frame(encode_frame({"a": [[1, 2], [3, 4]]}), max_values=3)


def test_a_frame_no_longer_than_the_budget_is_not_counted():
    frame = encode_frame({"a": [[]] * 10})
    assert len(decode_frame(frame, max_values=len(frame))["a"]) == 10


@pytest.mark.parametrize(
    "value",
    [{"a": list(range(50))}, {str(k): 0 for k in range(50)}],
    ids=["one-long-array", "one-long-map"],
)
def test_one_container_longer_than_the_budget_is_refused_before_it_is_made(value):
    with pytest.raises(FrameBudgetError, match="more than 40 values"):
        decode_frame(encode_frame(value), max_values=40)


def test_garbage_is_still_garbage_under_a_budget():
    with pytest.raises(RemoteProtocolError, match="not valid msgpack") as caught:
        decode_frame(b"\xc1", max_values=10)
    assert not isinstance(caught.value, FrameBudgetError)
    with pytest.raises(RemoteProtocolError, match="not valid msgpack"):
        decode_frame(b"\x81\xa1a" + b"\x91" * 2000 + b"\x90", max_values=10**6)  # too deep


@pytest.mark.parametrize("enabled", [True, False])
def test_large_frames_decode_with_the_collector_paused_and_restored(enabled):
    frame = encode_frame({"a": [[]] * 100_000})
    (gc.enable if enabled else gc.disable)()
    try:
        assert len(decode_frame(frame, max_values=10**6)["a"]) == 100_000
        with pytest.raises(FrameBudgetError):
            decode_frame(frame, max_values=1000)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def raw_request(*entries: tuple[str, object], pad: int = 0) -> bytes:
    """A request map with ``entries`` first, in that order, then ``pad`` empty arrays."""
    body = b"".join(msgpack.packb(k) + msgpack.packb(v) for k, v in entries)
    body += msgpack.packb("pad") + msgpack.packb([[]] * pad)
    return bytes([0x80 | (len(entries) + 1)]) + body


def hello_server() -> BatchServer:
    server = BatchServer(max_values=100)
    server.receive_data(encode_frame({"op": "hello", "id": 0, "versions": [1]}))
    server.events_received()
    server.send_hello(server="s", env="e", max_slots=8)
    server.data_to_send()
    return server


@pytest.mark.parametrize(
    "entries",
    [(("op", "step"), ("id", 7)), (("id", 7), ("op", "state"))],
    ids=["op-id", "id-op"],
)
def test_a_frame_over_the_budget_is_refused_with_its_id(entries):
    server = hello_server()
    server.receive_data(raw_request(*entries, pad=500))
    [reply] = server.data_to_send()
    assert decode_frame(reply) == {
        "op": "error",
        "id": 7,
        "code": "INVALID_REQUEST",
        "message": "frame decodes into more than 100 values",
    }
    assert server.events_received() == []
    server.receive_data(encode_frame({"op": "state", "id": 7, "slots": [0]}))  # id free again
    assert server.events_received()[0].request_id == 7


@pytest.mark.parametrize(
    "entries",
    [
        (("id", 7), ("slots", [0])),  # op is not first
        (("op", "hello"), ("id", 7)),
        (("op", "bogus"), ("id", 7)),
        (("op", 3), ("id", 7)),
        (("op", "step"), ("id", 0)),
        (("op", "step"), ("id", -1)),
        (("op", "step"), ("id", 2**32)),
        (("op", "step"), ("id", 1)),  # in flight
        (("op", "step"), ("op", "step")),
        (("op", "step"), ("id", [7])),
        (("op", "step"),),  # then pad: one key only before it
    ],
)
def test_a_frame_over_the_budget_without_a_usable_id_is_an_invalid_frame(entries):
    server = hello_server()
    server.receive_data(encode_frame({"op": "state", "id": 1, "slots": [5]}))
    server.events_received()
    server.receive_data(raw_request(*entries, pad=500))
    [reply] = server.data_to_send()
    assert decode_frame(reply)["id"] is None
    assert decode_frame(reply)["code"] == "INVALID_FRAME"


def test_over_the_budget_before_hello_is_an_invalid_frame():
    server = BatchServer(max_values=100)
    server.receive_data(raw_request(("op", "step"), ("id", 7), pad=500))
    [reply] = server.data_to_send()
    assert (decode_frame(reply)["id"], decode_frame(reply)["code"]) == (None, "INVALID_FRAME")
    server.receive_data(b"\x92")  # not even a map: nothing to read an id from
    [reply] = server.data_to_send()
    assert decode_frame(reply)["code"] == "INVALID_FRAME"


def test_a_map_of_one_entry_over_the_budget():
    server = hello_server()
    server.receive_data(msgpack.packb({"pad": [[]] * 500}))
    [reply] = server.data_to_send()
    assert decode_frame(reply)["code"] == "INVALID_FRAME"


# ------------------------------------------------------------------ JSON (2.6)


def test_count_values_counts_separators_and_openers():
    assert count_values("[]") == count_values(b"[]") == 2
    assert count_values('{"a": "x,y"}') == 3  # inside strings too: an upper bound


def test_loads_refuses_more_values_before_parsing():
    text = json.dumps({"k": [0] * 100})
    assert loads(text, 200) == {"k": [0] * 100}
    with pytest.raises(ValueError, match="more than 50 values"):
        loads(text, 50)
    with pytest.raises(ValueError, match="more than 50 values"):
        loads(text.encode(), 50)
    assert loads("[1, 2, 3]", 5) == [1, 2, 3]  # shorter than the budget: not even counted


def test_a_ws_frame_over_the_budget_is_invalid_json_and_the_session_goes_on():
    server = ServerSession(max_values=100)
    server.receive_data(json.dumps({"type": "step", "data": {"m": [0] * 1000}}))
    [frame] = server.data_to_send()
    data = json.loads(frame)["data"]
    assert data == {
        "message": "Invalid JSON: more than 100 values (this server's limit)",
        "code": "INVALID_JSON",
    }
    server.receive_data('{"type":"state"}')
    assert server.events_received()


def test_many_extra_keys_give_the_first_errors_and_their_count():
    """Issue 22: a /ws frame of 1.3 M extra keys got a reply with every one of them."""
    message = {"type": "reset", **{f"k{i}": i for i in range(100)}}
    with pytest.raises(RemoteProtocolError) as caught:
        decode_request(json.dumps(message))
    errors = caught.value.details["errors"]  # type: ignore[attr-defined]
    assert len(errors) == MAX_ERRORS + 1
    assert [e["loc"] for e in errors[:MAX_ERRORS]] == [[f"k{i}"] for i in range(MAX_ERRORS)]
    assert errors[-1] == {
        "type": "too_many_errors",
        "loc": [],
        "msg": f"100 errors in all: the first {MAX_ERRORS} are shown",
        "input": None,
    }


def test_a_missing_data_error_echoes_a_large_message_briefly():
    message = {"type": "step", **{f"k{i}": "v" * 300 for i in range(3)}}
    with pytest.raises(RemoteProtocolError) as caught:
        decode_request(json.dumps(message))
    errors = caught.value.details["errors"]  # type: ignore[attr-defined]
    assert errors[0]["type"] == "missing"
    assert isinstance(errors[0]["input"], str)
    assert len(errors[0]["input"]) < 400
    assert errors[1]["input"] == brief("v" * 300)
    assert len(errors) == 4  # no count entry: all shown


def test_a_long_unknown_type_is_shown_briefly():
    with pytest.raises(RemoteProtocolError, match="Unknown message type: 'xxx") as caught:
        decode_request(json.dumps({"type": "x" * 10_000}))
    assert len(str(caught.value)) < 200


# ------------------------------------------------------------------ bounded reprs


class Key(str):
    """A key that counts comparisons: reprlib would sort every key of a map first."""

    compared = 0

    def __lt__(self, other: object) -> bool:
        Key.compared += 1
        return str.__lt__(self, other)  # type: ignore[operator]

    __hash__ = str.__hash__


def test_brief_shows_the_first_entries_in_their_order_and_never_sorts():
    keys = {Key(f"k{i}"): i for i in range(100_000, 0, -1)}
    shown = brief(keys)
    assert Key.compared == 0
    assert shown.startswith("{'k100000': 100000, 'k99999': 99999")
    assert shown.endswith("...}")
    assert brief({"a": {"b": {"c": {"d": 1}}}}) == "{'a': {'b': {'c': {...}}}}"
    assert brief({}) == "{}"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (set(), "set()"),
        (frozenset(), "frozenset()"),
        ({3}, "{3}"),
        (frozenset({3}), "frozenset({3})"),
        ({"a": [[{1}]]}, "{'a': [[{...}]]}"),
    ],
)
def test_brief_sets(value, shown):
    assert brief(value) == shown


def test_brief_cuts_long_sets():
    assert brief(set(range(100))).endswith(", ...}")


@pytest.mark.parametrize(
    ("value", "small"),
    [
        ({"message": "hi"}, True),
        ([], True),
        ({"a": [[[[]]]]}, True),  # empty containers cost nothing, however deep
        ({"a": [[[[1]]]]}, False),  # five levels with something in the fifth
        (list(range(32)), True),
        (list(range(33)), False),
        ("x" * 200, True),
        ("x" * 201, False),
        (b"x" * 201, False),
        ({"k": "x" * 201}, False),
        (3.5, True),
    ],
)
def test_cut_keeps_small_values_and_shortens_the_rest(value, small):
    assert (cut(value) is value) is small
    if not small:
        assert cut(value) == brief(value)
