"""EnvServer's OpenEnv JSON ``/ws`` endpoint, checked frame by frame with a raw client.

The client is the plain ``websockets`` sync client, not our transport, so these tests pin
the exact bytes an official OpenEnv client would see (protocol research sections 3 and 13).
"""

from __future__ import annotations

import json

import pytest
from openenv_gym_test_envs import LIFECYCLE, DuckEnv, FailAfterProbe
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK
from websockets.sync.client import ClientConnection, connect


def raw(url: str) -> ClientConnection:
    return connect(url, compression=None, proxy=None, open_timeout=5, close_timeout=5)


def ask(ws: ClientConnection, frame: str | bytes) -> str:
    """Send one frame, return the one text frame received."""
    ws.send(frame)
    reply = ws.recv(timeout=5)
    assert isinstance(reply, str), "OpenEnv /ws replies are text frames"
    return reply


def expect_closed(ws: ClientConnection, code: int = 1000) -> None:
    with pytest.raises(ConnectionClosed) as info:
        ws.recv(timeout=5)
    assert info.value.rcvd is not None
    assert info.value.rcvd.code == code


def test_reset_step_state_close_exact_frames(ping_server):
    with raw(ping_server.ws()) as ws:
        # Unknown reset kwargs ("bogus") are dropped: PingEnv.reset takes no **kwargs.
        reply = ask(ws, '{"type":"reset","data":{"seed":3,"episode_id":"ep-1","bogus":1}}')
        assert reply == (
            '{"type":"observation","data":{"observation":'
            '{"metadata":{},"echoed":"ready seed=3","length":0},"reward":null,"done":false}}'
        )
        reply = ask(ws, '{"type":"step","data":{"message":"hi"}}')
        assert reply == (
            '{"type":"observation","data":{"observation":'
            '{"metadata":{"step":1},"echoed":"hi","length":2},"reward":1.0,"done":false,'
            '"metadata":{"step":1}}}'
        )
        reply = ask(ws, '{"type":"state"}')
        assert reply == '{"type":"state","data":{"episode_id":"ep-1","step_count":1,"last":"hi"}}'
        reply = ask(ws, '{"type":"step","data":{"message":"done"}}')
        assert json.loads(reply)["data"]["done"] is True
        assert ping_server.server.active == 1
        ws.send('{"type":"close"}')
        expect_closed(ws, 1000)
    # The server closed the socket only after closing the instance and freeing its slot.
    assert LIFECYCLE.wait_closed(1)
    assert LIFECYCLE.created == LIFECYCLE.closed == 1
    assert ping_server.server.wait_active(0)


def test_reset_without_data_and_step_before_reset(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = json.loads(ask(ws, '{"type":"step","data":{"message":"early"}}'))
        assert reply["type"] == "observation"
        assert reply["data"]["observation"]["echoed"] == "early"
        reply = json.loads(ask(ws, '{"type":"reset"}'))
        assert reply["data"]["observation"]["echoed"] == "ready seed=None"


def test_reset_kwargs_all_pass_when_reset_takes_var_kwargs(env_server):
    running = env_server(DuckEnv)
    with raw(running.ws()) as ws:
        reply = json.loads(ask(ws, '{"type":"reset","data":{"b":1,"a":2}}'))
    assert reply["data"]["observation"]["echoed"] == "a,b"


def test_one_instance_per_connection(ping_server):
    with raw(ping_server.ws()) as first, raw(ping_server.ws()) as second:
        ask(first, '{"type":"step","data":{"message":"one"}}')
        ask(first, '{"type":"step","data":{"message":"two"}}')
        ask(second, '{"type":"step","data":{"message":"three"}}')
        assert json.loads(ask(first, '{"type":"state"}'))["data"]["step_count"] == 2
        assert json.loads(ask(second, '{"type":"state"}'))["data"]["step_count"] == 1
        assert ping_server.server.active == 2
    assert ping_server.server.wait_active(0)
    assert LIFECYCLE.wait_closed(2)


def assert_session_alive(ws: ClientConnection) -> None:
    assert json.loads(ask(ws, '{"type":"state"}'))["type"] == "state"


def test_invalid_json_keeps_session(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = json.loads(ask(ws, "this is not json"))
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "INVALID_JSON"
        assert reply["data"]["message"].startswith("Invalid JSON")
        assert_session_alive(ws)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ('{"type":"bogus"}', "Unknown message type: bogus"),
        ('{"data":{}}', "Unknown message type: "),
        ("[1,2]", "Unknown message type: "),
    ],
)
def test_unknown_type_keeps_session(ping_server, frame, message):
    with raw(ping_server.ws()) as ws:
        reply = ask(ws, frame)
        assert reply == json.dumps(
            {"type": "error", "data": {"message": message, "code": "UNKNOWN_TYPE"}},
            separators=(",", ":"),
        )
        assert_session_alive(ws)


def test_validation_error_extra_top_level_key(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = ask(ws, '{"type":"reset","extra":1}')
        assert reply == (
            '{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR",'
            '"errors":[{"type":"extra_forbidden","loc":["extra"],'
            '"msg":"Extra inputs are not permitted","input":1}]}}'
        )
        assert_session_alive(ws)


def test_validation_error_step_without_data(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = json.loads(ask(ws, '{"type":"step"}'))
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        assert [e["loc"] for e in reply["data"]["errors"]] == [["data"]]
        assert reply["data"]["errors"][0]["type"] == "missing"
        assert_session_alive(ws)


@pytest.mark.parametrize(
    ("action", "kind", "loc"),
    [
        ({"message": ""}, "string_too_short", ["message"]),
        ({}, "missing", ["message"]),
        ({"message": "x", "extra": 1}, "extra_forbidden", ["extra"]),
        ({"message": 5}, "string_type", ["message"]),
    ],
)
def test_validation_error_bad_action_keeps_session(ping_server, action, kind, loc):
    with raw(ping_server.ws()) as ws:
        reply = json.loads(ask(ws, json.dumps({"type": "step", "data": action})))
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        errors = reply["data"]["errors"]
        assert isinstance(errors, list)
        assert [(e["type"], e["loc"]) for e in errors] == [(kind, loc)]
        assert all("url" not in e for e in errors)
        # The rejected step did not reach the env.
        assert json.loads(ask(ws, '{"type":"state"}'))["data"]["step_count"] == 0


def test_action_metadata_always_allowed(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = json.loads(ask(ws, '{"type":"step","data":{"message":"m","metadata":{"k":1}}}'))
    assert reply["type"] == "observation"


def test_execution_error_keeps_session(ping_server):
    with raw(ping_server.ws()) as ws:
        reply = ask(ws, '{"type":"step","data":{"message":"raise"}}')
        assert (
            reply
            == '{"type":"error","data":{"message":"boom: step raised","code":"EXECUTION_ERROR"}}'
        )
        reply = json.loads(ask(ws, '{"type":"step","data":{"message":"after"}}'))
        assert reply["data"]["observation"]["echoed"] == "after"
        assert reply["data"]["metadata"] == {"step": 1}


def test_capacity_reached_then_freed(env_server):
    running = env_server(max_sessions=1)
    with raw(running.ws()) as first:
        ask(first, '{"type":"reset"}')  # the first session holds the only slot
        with raw(running.ws()) as second:
            # Unsolicited, right after the upgrade, then a normal close.
            reply = second.recv(timeout=5)
            assert reply == (
                '{"type":"error","data":{"message":"Server at capacity: 1/1 sessions active. '
                'Cannot accept new connections.","code":"CAPACITY_REACHED",'
                '"active_sessions":1,"max_sessions":1}}'
            )
            expect_closed(second, 1000)
        assert running.server.active == 1
        first.send('{"type":"close"}')
        expect_closed(first, 1000)
    assert running.server.wait_active(0)
    with raw(running.ws()) as third:
        assert json.loads(ask(third, '{"type":"reset"}'))["type"] == "observation"


def test_factory_error_closes_session(env_server):
    factory = FailAfterProbe()
    running = env_server(factory, models=FailAfterProbe.models)
    with raw(running.ws()) as ws:
        reply = ws.recv(timeout=5)
        assert reply == (
            '{"type":"error","data":{"message":"Environment factory \'fail_after_probe\' failed '
            'to create instance: constructor exploded","code":"FACTORY_ERROR",'
            '"factory_name":"fail_after_probe"}}'
        )
        expect_closed(ws, 1000)
    assert running.server.wait_active(0)
    assert factory.calls == 2


def test_binary_frame_is_a_session_error(ping_server):
    with raw(ping_server.ws()) as ws:
        ask(ws, '{"type":"reset"}')
        reply = ask(ws, b'{"type":"state"}')
        assert reply == (
            '{"type":"error","data":{"message":"Binary frames are not supported",'
            '"code":"SESSION_ERROR"}}'
        )
        expect_closed(ws, 1000)
    assert LIFECYCLE.wait_closed(1)
    assert ping_server.server.wait_active(0)


def test_client_disconnect_closes_instance(ping_server):
    with raw(ping_server.ws()) as ws:
        ask(ws, '{"type":"reset"}')
    assert LIFECYCLE.wait_closed(1)
    assert ping_server.server.wait_active(0)


def test_server_shutdown_closes_sessions(env_server):
    running = env_server()
    with raw(running.ws()) as ws:
        ask(ws, '{"type":"reset"}')
        running.thread.run(running.server.aclose())
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
    assert LIFECYCLE.wait_closed(1)
    assert running.server.active == 0


def test_int_reward_is_not_coerced(env_server):
    running = env_server(DuckEnv)
    with raw(running.ws()) as ws:
        reply = json.loads(ask(ws, '{"type":"reset"}'))
    # OpenEnv does not coerce the reward on /ws: an int stays an int.
    assert reply["data"]["reward"] == 1
    assert type(reply["data"]["reward"]) is int


def test_path_prefix_query_string_is_ignored(ping_server):
    with raw(ping_server.ws("/ws?session=x")) as ws:
        assert json.loads(ask(ws, '{"type":"reset"}'))["type"] == "observation"


def test_close_frame_without_reply_and_no_further_frames(ping_server):
    with raw(ping_server.ws()) as ws:
        ws.send('{"type":"close"}')
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=5)
