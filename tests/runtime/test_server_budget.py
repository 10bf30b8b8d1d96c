"""What one request may cost the server (docs/security.md; issue 22, items 1 and 6).

The value budget (``max_values``) on every decoder the server runs (batched msgpack, ``/ws``
JSON, HTTP JSON bodies); error replies that are bounded summaries; deep JSON answered 400 on
every HTTP route; MCP sessions over plain HTTP bounded in number; a warning when a guard is
off. Real servers, real sockets.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator

import pytest
from openenv_gym_test_envs import PingAction, PingEnv, PingObservation
from test_server_httpapi import call, post_json, rpc, rpc_error
from test_server_limits import ws
from websockets.sync.client import ClientConnection

from openenv_gym.protocol.batch import SUBPROTOCOL_V2, decode_frame, encode_frame
from openenv_gym.protocol.openenv.messages import MAX_ERRORS, brief
from openenv_gym.runtime.errors import MAX_MESSAGE

DEEP = "[" * 20_000 + "]" * 20_000  # under the value budget, over the parser's depth


def batch(conn: ClientConnection, message: dict) -> dict:
    conn.send(encode_frame(message))
    return decode_frame(conn.recv(timeout=10))


@contextlib.contextmanager
def opened(url: str) -> Iterator[ClientConnection]:
    """A v2 batched connection with slots 0 and 1 open."""
    with ws(url, subprotocols=[SUBPROTOCOL_V2]) as conn:
        batch(conn, {"op": "hello", "id": 0, "versions": [2]})
        assert "errors" not in batch(conn, {"op": "open", "id": 1, "slots": [0, 1]})
        yield conn


def echoed(conn: ClientConnection, rid: int) -> list[str]:
    reply = batch(conn, {"op": "step", "id": rid, "slots": [0, 1], "cols": {"message": ["a", "b"]}})
    return list(reply["cols"]["echoed"])


# ------------------------------------------------------------------ batched


def test_a_batched_frame_over_the_budget_fails_alone_with_its_id(env_server):
    server = env_server(max_values=1000)
    with opened(server.ws("/batch")) as conn:
        reply = batch(conn, {"op": "step", "id": 5, "slots": [0], "args": [{"m": [[]] * 5000}]})
        assert reply == {
            "op": "error",
            "id": 5,
            "code": "INVALID_REQUEST",
            "message": "frame decodes into more than 1000 values",
        }
        assert echoed(conn, 6) == ["a", "b"]


def test_a_slot_whose_argument_is_huge_gets_a_bounded_validation_error(env_server):
    """Issue 22: 15 M empty arrays as ``message`` got their whole echo back (a 124 MB reply
    for 1.6 M extra keys). Now the error echoes a short repr, and its slot fails alone."""
    server = env_server()
    with opened(server.ws("/batch")) as conn:
        huge = [[]] * 60_000
        extra = {f"k{i}": i for i in range(30)}
        conn.send(
            encode_frame(
                {
                    "op": "step",
                    "id": 5,
                    "slots": [0, 1],
                    "args": [{"message": huge}, {"message": "ok", **extra}],
                }
            )
        )
        raw = conn.recv(timeout=30)
        assert len(raw) < 16_000  # the reply to two bad slots, bounded in bytes
        reply = decode_frame(raw)
        first, second = reply["errors"][0], reply["errors"][1]
        assert first[0] == second[0] == "VALIDATION_ERROR"
        [entry] = first[2]["errors"]
        assert entry["type"] == "string_type"
        assert entry["input"].startswith("[[], [], [], [], [], [], ...")
        entries = second[2]["errors"]
        assert len(entries) == MAX_ERRORS + 1
        assert entries[0]["type"] == "extra_forbidden"
        assert entries[-1]["msg"] == f"30 errors in all: the first {MAX_ERRORS} are shown"
        assert echoed(conn, 6) == ["a", "b"]


def test_an_action_with_many_extra_keys_is_refused_from_its_keys(env_server):
    """Issue 22: 1.6 M extra keys. Now the slot's error lists the first few and their
    count, from the keys alone: Pydantic never sees the rest."""
    server = env_server()
    with opened(server.ws("/batch")) as conn:
        args = [{"message": "", **{f"k{i}": i for i in range(1000)}}, {"message": "fine"}]
        reply = batch(conn, {"op": "step", "id": 5, "slots": [0, 1], "args": args})
        assert list(reply["errors"]) == [0]
        code, _, details = reply["errors"][0]
        errors = details["errors"]
        assert code == "VALIDATION_ERROR"
        assert errors[0]["type"] == "string_too_short"  # its declared field, validated alone
        assert [e["loc"] for e in errors[1:MAX_ERRORS]] == [[f"k{i}"] for i in range(7)]
        assert errors[-1]["msg"] == f"1001 errors in all: the first {MAX_ERRORS} are shown"
        assert reply["cols"]["echoed"][1] == "fine"


def test_more_errors_than_are_worth_reading_give_only_their_count():
    """Pydantic's errors are not read past a few dozen: only their count is given."""
    from pydantic import TypeAdapter, ValidationError

    from openenv_gym.runtime.errors import validation_errors

    with pytest.raises(ValidationError) as caught:
        TypeAdapter(list[int]).validate_python(["x"] * 1000)
    assert validation_errors(caught.value) == [
        {
            "type": "too_many_errors",
            "loc": [],
            "msg": "1000 errors in all: the first 0 are shown",
            "input": None,
        }
    ]
    with pytest.raises(ValidationError) as caught:
        TypeAdapter(list[int]).validate_python(["x" * 500] * 20)
    errors = validation_errors(caught.value)
    assert len(errors) == MAX_ERRORS + 1
    assert errors[0]["input"] == brief("x" * 500)


class LoudEnv(PingEnv):
    """Raises with its action's message, whole (an environment echoing its input)."""

    def step(self, action: PingAction) -> PingObservation:  # type: ignore[override]
        raise ValueError(action.message)


def test_an_environment_error_message_is_cut(env_server):
    server = env_server(LoudEnv)
    with opened(server.ws("/batch")) as conn:
        args = [{"message": "x" * 10**5}]
        reply = batch(conn, {"op": "step", "id": 5, "slots": [0], "args": args})
        code, message, _ = reply["errors"][0]
        assert code == "EXECUTION_ERROR"
        assert len(message) == MAX_MESSAGE


# ------------------------------------------------------------------ /ws


def test_a_ws_frame_over_the_budget_is_invalid_json_and_the_session_goes_on(env_server):
    server = env_server(max_values=1000)
    with ws(server.ws()) as conn:
        conn.send(json.dumps({"type": "step", "data": {"message": "x", "k": [0] * 5000}}))
        data = json.loads(conn.recv(timeout=10))["data"]
        assert data["code"] == "INVALID_JSON"
        assert data["message"] == "Invalid JSON: more than 1000 values (this server's limit)"
        conn.send(json.dumps({"type": "step", "data": {"message": "still"}}))
        assert json.loads(conn.recv(timeout=10))["data"]["observation"]["echoed"] == "still"


def test_ws_extra_keys_in_the_action_give_a_bounded_error(env_server):
    server = env_server()
    with ws(server.ws()) as conn:
        data = {"message": "x", **{f"k{i}": i for i in range(30)}}
        conn.send(json.dumps({"type": "step", "data": data}))
        reply = json.loads(conn.recv(timeout=10))["data"]
        assert reply["code"] == "VALIDATION_ERROR"
        assert len(reply["errors"]) == MAX_ERRORS + 1
        assert reply["errors"][-1]["msg"] == f"30 errors in all: the first {MAX_ERRORS} are shown"


# ------------------------------------------------------------------ HTTP (item 6)


@pytest.mark.parametrize("path", ["/reset", "/step"])
def test_deep_json_to_an_http_route_is_400_without_a_traceback(ping_server, path, caplog):
    with caplog.at_level(logging.INFO, logger="openenv_gym"):
        status, body = post_raw(ping_server.url, path, DEEP)
    assert status == 400
    assert body["detail"][0]["type"] == "json_too_deep"
    assert "Traceback" not in caplog.text
    assert "RecursionError" not in caplog.text


def test_deep_json_to_mcp_is_400_with_a_parse_error(ping_server, caplog):
    with caplog.at_level(logging.INFO, logger="openenv_gym"):
        status, body = post_raw(ping_server.url, "/mcp", DEEP)
    assert status == 400
    assert body["error"]["code"] == -32700
    assert body["error"]["data"] == {"refused": "nesting"}
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("path", ["/reset", "/step", "/mcp"])
def test_an_http_body_over_the_budget_is_400(env_server, path):
    server = env_server(max_values=100)
    status, body = post_raw(
        server.url, path, json.dumps({"action": {"message": "x"}, "k": [0] * 500})
    )
    assert status == 400
    if path == "/mcp":
        assert body["error"]["data"] == {"refused": "values"}
    else:
        assert body["detail"][0]["type"] == "json_too_large"
    status, _ = post_json(server.url, "/reset", {})
    assert status == 200


def test_invalid_http_action_errors_are_bounded_and_keep_their_url(ping_server):
    action = {"message": "x", **{f"k{i}": i for i in range(30)}}
    status, body = post_json(ping_server.url, "/step", {"action": action})
    assert status == 422
    detail = body["detail"]
    assert len(detail) == MAX_ERRORS + 1
    assert detail[0]["url"].startswith("https://errors.pydantic.dev/")
    assert "url" not in detail[-1]


def post_raw(url: str, path: str, body: str) -> tuple[int, dict]:
    status, _, data = call(url, "POST", path, body, {"Content-Type": "application/json"})
    return status, json.loads(data)


def test_mcp_sessions_over_http_are_bounded_in_number(env_server):
    server = env_server(max_http_sessions=2)
    first = rpc(server.url, "openenv/session/create")["result"]["session_id"]
    rpc(server.url, "openenv/session/create")
    reply = rpc(server.url, "openenv/session/create")
    code, message = rpc_error(reply)
    assert code == -32000
    assert message.startswith("Too many MCP sessions over HTTP: 2/2 open")
    assert reply["error"]["data"] == {"open_sessions": 2, "max_http_sessions": 2}
    assert server.server.active == 2  # the refused one took no instance
    rpc(server.url, "openenv/session/close", {"session_id": first})
    assert "result" in rpc(server.url, "openenv/session/create")


def test_a_guard_turned_off_is_a_warning(env_server, caplog):
    with caplog.at_level(logging.WARNING, logger="openenv_gym"):
        env_server(handshake_timeout=None, send_timeout=None)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("handshake_timeout is off: ") and "slowloris" in m for m in warned)
    assert any(m.startswith("send_timeout is off: ") for m in warned)
    assert not any(m.startswith("idle_timeout is off") for m in warned)
