"""Issue 22, item 6 (the server's part), against ``openenv-gym serve`` in a process of its own.

Deep JSON to an HTTP route is a 400 with a typed error, never a 500 with a traceback; MCP
sessions created over plain HTTP hold capacity without a connection, so they are bounded
in number; a client that asks for it keeps its sessions through a pause longer than the
idle timeout by pinging; turning a guard off is a warning on stderr. Each failed on
``b51bec2`` (a 500 and a ``RecursionError`` traceback; sessions until ``max_sessions``;
every episode lost; silence).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import Any

import pytest
from websockets.sync.client import connect

from openenv_gym.runtime.websocket import KEEPALIVE_HEADER

DEEP = "[" * 20_000 + "]" * 20_000


def post(url: str, path: str, body: str) -> tuple[int, Any]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def stderr_of(server: Any) -> str:
    """Everything the server wrote to stderr, once it is stopped."""
    server.proc.terminate()
    _, err = server.proc.communicate(timeout=30)
    return str(err)


@pytest.mark.parametrize("path", ["/reset", "/step", "/mcp"])
def test_deep_json_to_every_http_route_is_400_and_no_traceback(cli_server, path):
    server = cli_server("openenv_gym_test_envs:PingEnv", "--log-level", "INFO")
    status, body = post(server.url, path, DEEP)
    assert status == 400
    if path == "/mcp":
        assert body["error"] == {
            "code": -32700,
            "message": "Parse error: JSON nested too deeply",
            "data": {"refused": "nesting"},
        }
    else:
        assert body["detail"][0]["type"] == "json_too_deep"
    status, _ = post(server.url, "/reset", "{}")  # and it serves on
    assert status == 200
    err = stderr_of(server)
    assert "Traceback" not in err
    assert "RecursionError" not in err


def test_mcp_sessions_over_http_are_bounded(cli_server):
    server = cli_server("openenv_gym_test_envs:PingEnv", "--max-http-sessions", "3")
    created = []
    for k in range(5):
        request = {"jsonrpc": "2.0", "method": "openenv/session/create", "id": k}
        status, body = post(server.url, "/mcp", json.dumps(request))
        assert status == 200
        created.append(body)
    assert all("result" in reply for reply in created[:3])
    for reply in created[3:]:
        assert reply["error"]["code"] == -32000
        assert reply["error"]["data"] == {"open_sessions": 3, "max_http_sessions": 3}


def test_a_pinging_client_keeps_its_session_through_a_long_pause(cli_server):
    """The training loop that checkpoints for 20 minutes, with an idle timeout of 1 s: its
    session outlives three idle timeouts because its keepalive pings, and steps on."""
    server = cli_server("openenv_gym_test_envs:PingEnv", "--idle-timeout", "1")
    url = server.url.replace("http://", "ws://") + "/ws"
    headers = {KEEPALIVE_HEADER: "ping"}
    with connect(url, proxy=None, additional_headers=headers, ping_interval=0.2) as conn:
        assert conn.response.headers["OpenEnv-Gym-Idle-Timeout"] == "1"
        conn.send('{"type":"reset"}')
        conn.recv(timeout=10)
        time.sleep(3.5)  # the pause: no message for three idle timeouts
        conn.send('{"type":"step","data":{"message":"after the pause"}}')
        reply = json.loads(conn.recv(timeout=10))
        assert reply["data"]["observation"]["echoed"] == "after the pause"


@pytest.mark.parametrize(
    ("flag", "warning"),
    [
        ("--handshake-timeout", "handshake_timeout is off"),
        ("--idle-timeout", "idle_timeout is off"),
        ("--send-timeout", "send_timeout is off"),
        ("--ping-timeout", "ping_timeout is off"),
    ],
)
def test_turning_a_guard_off_is_a_warning(cli_server, flag, warning):
    server = cli_server("openenv_gym_test_envs:PingEnv", flag, "none")
    assert warning in stderr_of(server)
