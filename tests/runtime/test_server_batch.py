"""EnvServer's batched ``/batch`` endpoint, driven with a raw ``websockets`` client.

Frames are built and parsed with ``openenv_gym.protocol.batch.encode_frame`` /
``decode_frame`` only, so the server is checked against the wire format, not against our
client state machine.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from openenv_gym_test_envs import LIFECYCLE, FailAfterProbe, PingEnv
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_gym._version import __version__
from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame


def raw(url: str, *, offer: bool = True) -> ClientConnection:
    return connect(
        url,
        subprotocols=[SUBPROTOCOL] if offer else None,
        compression=None,
        proxy=None,
        open_timeout=5,
        close_timeout=5,
        max_size=None,
    )


def recv(ws: ClientConnection) -> dict:
    data = ws.recv(timeout=5)
    assert isinstance(data, bytes), "batched replies are binary frames"
    return decode_frame(data)


def ask(ws: ClientConnection, message: dict) -> dict:
    ws.send(encode_frame(message))
    return recv(ws)


class Batch:
    """A raw batched connection: hello done, request ids counted."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 1
        hello = ask(ws, {"op": "hello", "id": 0, "versions": [1], "client": "raw-test"})
        assert hello["op"] == "hello"
        self.hello = hello

    def __call__(self, op: str, slots: list[int], args: list[dict] | None = None) -> dict:
        message = {"op": op, "id": self.next_id, "slots": slots}
        if args is not None:
            message["args"] = args
        self.next_id += 1
        reply = ask(self.ws, message)
        assert reply["id"] == message["id"]
        assert reply["op"] == op
        return reply


def test_subprotocol_selected_and_hello(ping_server):
    with raw(ping_server.ws("/batch")) as ws:
        assert ws.subprotocol == SUBPROTOCOL
        reply = ask(ws, {"op": "hello", "id": 0, "versions": [7, 1], "client": "raw-test"})
    assert reply == {
        "op": "hello",
        "id": 0,
        "version": 1,
        "server": f"openenv-gym/{__version__}",
        "env": "PingEnv",
        "max_slots": 4096,
        "max_frame": 16 * 2**20,
    }


def test_ws_endpoint_does_not_select_the_batch_subprotocol(ping_server):
    with raw(ping_server.ws("/ws")) as ws:
        assert ws.subprotocol is None


def test_open_reset_step_state_close_many_slots(ping_server):
    slots = list(range(8))
    with raw(ping_server.ws("/batch")) as ws:
        batch = Batch(ws)
        reply = batch("open", slots)
        assert "errors" not in reply
        assert ping_server.server.active == 8
        assert LIFECYCLE.created == 8

        reply = batch("reset", slots, [{"seed": s, "unknown": True} for s in slots])
        assert reply["obs"] == [{"echoed": f"ready seed={s}", "length": 0} for s in slots]
        assert reply["reward"].dtype == np.float64
        assert np.isnan(reply["reward"]).all()  # env gave reward None
        assert reply["done"].dtype == np.bool_
        assert not reply["done"].any()
        assert "meta" not in reply  # no slot had metadata
        assert "errors" not in reply

        messages = [{"message": "x" * (s + 1)} for s in slots]
        messages[3] = {"message": "done"}
        reply = batch("step", slots, messages)
        assert [o["echoed"] for o in reply["obs"]] == [m["message"] for m in messages]
        assert all("metadata" not in o for o in reply["obs"])  # metadata travels in "meta"
        assert reply["reward"].tolist() == [0.5 * len(m["message"]) for m in messages]
        assert reply["done"].tolist() == [s == 3 for s in slots]
        assert reply["meta"] == [{"step": 1}] * 8

        reply = batch("state", [5, 2])
        assert reply["state"] == [
            {"episode_id": None, "step_count": 1, "last": "xxxxxx"},
            {"episode_id": None, "step_count": 1, "last": "xxx"},
        ]

        reply = batch("close", [0, 1])
        assert set(reply) == {"op", "id"}
        assert ping_server.server.active == 6
        assert LIFECYCLE.closed == 2
        # A closed slot id can be opened again: a fresh instance.
        batch("open", [0])
        assert batch("state", [0])["state"] == [{"episode_id": None, "step_count": 0, "last": None}]


def test_per_slot_errors_do_not_fail_the_batch(ping_server):
    with raw(ping_server.ws("/batch")) as ws:
        batch = Batch(ws)
        batch("open", [0, 1, 2])

        reply = batch("open", [2, 9])
        assert reply["errors"][0][0] == "SLOT_IN_USE"
        assert set(reply["errors"]) == {0}
        assert ping_server.server.active == 4  # slot 9 opened

        reply = batch("step", [0, 99, 1], [{"message": "a"}, {"message": "b"}, {"message": "c"}])
        assert set(reply["errors"]) == {1}
        code, message, details = reply["errors"][1]
        assert (code, details) == ("NO_SUCH_SLOT", {})
        assert "99" in message
        assert reply["obs"][0]["echoed"] == "a"
        assert reply["obs"][1] is None
        assert reply["obs"][2]["echoed"] == "c"
        assert math.isnan(reply["reward"][1])
        assert not reply["done"][1]

        reply = batch("step", [0, 1, 2], [{"message": ""}, {"message": "raise"}, {"message": "ok"}])
        code, message, details = reply["errors"][0]
        assert (code, message) == ("VALIDATION_ERROR", "Invalid message")
        assert [(e["type"], e["loc"]) for e in details["errors"]] == [
            ("string_too_short", ["message"])
        ]
        assert reply["errors"][1] == ["EXECUTION_ERROR", "boom: step raised", {}]
        assert 2 not in reply["errors"]
        assert reply["obs"][2]["echoed"] == "ok"
        assert reply["reward"][2] == 1.0

        # Failed slots stay open and usable.
        reply = batch("state", [0, 1, 2])
        assert [s["step_count"] for s in reply["state"]] == [1, 1, 1]
        reply = batch("close", [1, 77])
        assert reply["errors"][1][0] == "NO_SUCH_SLOT"
        assert ping_server.server.active == 3


def test_capacity_reached_per_slot(env_server):
    running = env_server(max_sessions=3)
    with raw(running.ws("/batch")) as ws:
        batch = Batch(ws)
        assert batch.hello["max_slots"] == 3
        reply = batch("open", [0, 1, 2, 3, 4])
        assert set(reply["errors"]) == {3, 4}
        code, message, details = reply["errors"][3]
        assert code == "CAPACITY_REACHED"
        assert "3/3" in message
        assert details == {"active_sessions": 3, "max_sessions": 3}
        assert running.server.active == 3
        # The slots that were granted work; the refused ones are not open.
        reply = batch("step", [2, 3], [{"message": "a"}, {"message": "b"}])
        assert reply["obs"][0]["echoed"] == "a"
        assert reply["errors"][1][0] == "NO_SUCH_SLOT"
        batch("close", [0])
        assert "errors" not in batch("open", [3])


def test_factory_error_per_slot(env_server):
    running = env_server(FailAfterProbe(), models=FailAfterProbe.models)
    with raw(running.ws("/batch")) as ws:
        batch = Batch(ws)
        reply = batch("open", [0, 1])
        assert [e[0] for e in reply["errors"].values()] == ["FACTORY_ERROR"] * 2
        assert reply["errors"][0][2] == {"factory_name": "fail_after_probe"}
        assert "constructor exploded" in reply["errors"][0][1]
        assert running.server.active == 0
        # The connection survives.
        assert batch("state", [0])["errors"][0][0] == "NO_SUCH_SLOT"


@pytest.mark.parametrize(
    ("frame", "code", "rid"),
    [
        (b"\xc1", "INVALID_FRAME", None),  # never valid msgpack
        (b"\x93\x01\x02\x03", "INVALID_FRAME", None),  # an array, not a map
        ("text frame", "INVALID_FRAME", None),
        (encode_frame({"op": "step", "slots": [0], "args": [{}]}), "INVALID_REQUEST", None),
        (encode_frame({"op": "jump", "id": 5, "slots": [0]}), "INVALID_REQUEST", 5),
        (encode_frame({"op": "step", "id": 6, "slots": [0]}), "INVALID_REQUEST", 6),
        (encode_frame({"op": "state", "id": 7, "slots": [0, 0]}), "INVALID_REQUEST", 7),
        (encode_frame({"op": "state", "id": 8, "slots": []}), "INVALID_REQUEST", 8),
        (encode_frame({"op": "state", "id": -1, "slots": [0]}), "INVALID_REQUEST", None),
    ],
)
def test_malformed_frame_gets_error_frame_and_connection_survives(ping_server, frame, code, rid):
    with raw(ping_server.ws("/batch")) as ws:
        batch = Batch(ws)
        batch("open", [0])
        ws.send(frame)
        reply = recv(ws)
        assert reply["op"] == "error"
        assert reply["code"] == code
        assert reply["id"] == rid
        assert isinstance(reply["message"], str)
        assert reply["message"]
        assert batch("step", [0], [{"message": "still here"}])["obs"][0]["echoed"] == "still here"


def test_hello_without_common_version_is_refused(ping_server):
    with raw(ping_server.ws("/batch")) as ws:
        reply = ask(ws, {"op": "hello", "id": 0, "versions": [99], "client": "future"})
    assert reply["op"] == "error"
    assert reply["id"] == 0
    assert reply["code"] == "INVALID_REQUEST"


def test_pipelined_requests_all_answered_with_their_ids(ping_server):
    with raw(ping_server.ws("/batch")) as ws:
        opening = [
            {"op": "hello", "id": 0, "versions": [1], "client": "raw-test"},
            {"op": "open", "id": 1, "slots": [0, 1, 2, 3]},
        ]
        # open is answered once its instances are built (off the event loop): its slots
        # are in flight until then, and a request naming them would be refused (3.5)
        frames = [{"op": "reset", "id": 2, "slots": [0, 1, 2, 3], "args": [{}] * 4}]
        frames += [
            {"op": "step", "id": 3 + i, "slots": [i % 4], "args": [{"message": f"m{i}"}]}
            for i in range(12)
        ]
        frames.append({"op": "state", "id": 15, "slots": [0, 1, 2, 3]})
        for frame in opening:  # both in flight before reading anything
            ws.send(encode_frame(frame))
        replies = [recv(ws) for _ in opening]
        for frame in frames:  # everything in flight before reading anything
            ws.send(encode_frame(frame))
        replies += [recv(ws) for _ in frames]
        frames = opening + frames
    assert [(r["op"], r["id"]) for r in replies] == [(f["op"], f["id"]) for f in frames]
    steps = {r["id"]: r["obs"][0]["echoed"] for r in replies if r["op"] == "step"}
    assert steps == {3 + i: f"m{i}" for i in range(12)}
    assert [s["step_count"] for s in replies[-1]["state"]] == [3, 3, 3, 3]


def test_capacity_shared_between_ws_and_batch(env_server):
    running = env_server(max_sessions=2)
    with raw(running.ws("/ws")) as json_ws:
        json_ws.send('{"type":"reset"}')
        assert json_ws.recv(timeout=5).startswith('{"type":"observation"')
        with raw(running.ws("/batch")) as ws:
            batch = Batch(ws)
            reply = batch("open", [0, 1])
            assert set(reply["errors"]) == {1}
            assert reply["errors"][1][2] == {"active_sessions": 2, "max_sessions": 2}
            # A second JSON session is refused while the batch slot is held...
            with raw(running.ws("/ws")) as refused:
                assert '"CAPACITY_REACHED"' in refused.recv(timeout=5)
            batch("close", [0])
            assert running.server.active == 1
            # ...and accepted once it is freed.
            with raw(running.ws("/ws")) as accepted:
                accepted.send('{"type":"state"}')
                assert accepted.recv(timeout=5).startswith('{"type":"state"')
    assert running.server.wait_active(0)


def test_disconnect_frees_every_slot(ping_server):
    with raw(ping_server.ws("/batch")) as ws:
        batch = Batch(ws)
        batch("open", list(range(5)))
        batch("reset", list(range(5)), [{}] * 5)
        assert ping_server.server.active == 5
    assert ping_server.server.wait_active(0)
    assert LIFECYCLE.wait_closed(5)
    assert LIFECYCLE.created == LIFECYCLE.closed == 5


def test_server_shutdown_closes_batch_connections(env_server):
    running = env_server()
    with raw(running.ws("/batch")) as ws:
        Batch(ws)("open", [0, 1])
        running.thread.run(running.server.aclose())
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
    assert LIFECYCLE.wait_closed(2)
    assert running.server.active == 0


def test_batch_without_subprotocol_still_served(ping_server):
    # The subprotocol is how a client learns the server speaks batch; the endpoint itself
    # does not insist on it.
    with raw(ping_server.ws("/batch"), offer=False) as ws:
        assert ws.subprotocol is None
        assert Batch(ws).hello["env"] == PingEnv.__name__
