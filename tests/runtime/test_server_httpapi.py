"""OpenEnv's HTTP API on EnvServer: /openapi.json, POST /mcp, and the two modes.

Shapes and codes are pinned against what OpenEnv's own ``create_app`` answers for the same
requests (openenv 0.10; ``tests/interop/test_interop_http_api.py`` runs ``openenv validate``
and the official MCP client against real servers). Every request with a body, to any path
and with any method, gets an HTTP response: never a closed socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest
from openenv_gym_test_envs import (
    LIFECYCLE,
    DuckEnv,
    PingAction,
    PingEnv,
    PingObservation,
)
from pydantic import BaseModel
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv_gym._version import __version__
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.runtime.httpapi import API_VERSION
from openenv_gym.runtime.mcp import parse_call
from openenv_gym.runtime.settings import ServerConfig, ServerMode

CONTROL = ("/reset", "/step", "/state")


# ------------------------------------------------------------------------- helpers


def call(
    base_url: str,
    method: str,
    path: str,
    body: bytes | str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, headers, body)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        data = body.encode() if isinstance(body, str) else body
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def post_json(base_url: str, path: str, payload: Any) -> tuple[int, Any]:
    status, _, body = call(base_url, "POST", path, json.dumps(payload))
    return status, json.loads(body)


def rpc(base_url: str, method: str, params: dict[str, Any] | None = None, id: Any = 1) -> Any:
    """A JSON-RPC call to /mcp: the response object (always HTTP 200)."""
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        payload["params"] = params
    status, reply = post_json(base_url, "/mcp", payload)
    assert status == 200
    return reply


def rpc_error(reply: Any) -> tuple[int, str]:
    assert reply["jsonrpc"] == "2.0"
    assert "result" not in reply
    return reply["error"]["code"], reply["error"]["message"]


def raw_exchange(base_url: str, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a raw socket and read until the server closes or goes quiet."""
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        with contextlib.suppress(TimeoutError):
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    return b"".join(chunks)


def statuses(data: bytes) -> list[int]:
    """The status codes of the HTTP responses in ``data``, in order (bodies skipped)."""
    codes = []
    while data:
        head, sep, data = data.partition(b"\r\n\r\n")
        assert sep, f"an incomplete response head: {head!r}"
        lines = head.split(b"\r\n")
        assert lines[0].startswith(b"HTTP/1.1 "), lines[0]
        codes.append(int(lines[0].split()[1]))
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        )
        data = data[length:]
    return codes


# ---------------------------------------------------------------------------- envs


class _Tool(BaseModel):
    name: str
    description: str
    inputSchema: dict[str, Any]  # MCP's field name


class _ToolResult:
    """Shaped as FastMCP's CallToolResult: a plain object, dumped by its attributes."""

    def __init__(self, data: Any) -> None:
        self.data = data
        self.is_error = False


class FakeMcpClient:
    """Duck-typed FastMCP ``Client``: reentrant context, ``list_tools``, ``call_tool``."""

    def __init__(self, env: ToolEnv) -> None:
        self.env = env
        self.depth = 0

    def is_connected(self) -> bool:
        return self.depth > 0

    async def __aenter__(self) -> FakeMcpClient:
        self.depth += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.depth -= 1

    async def list_tools(self) -> list[_Tool]:
        assert self.depth, "used without a connection"
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        return [_Tool(name="add", description="Add n to the total.", inputSchema=schema)]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> _ToolResult:
        assert self.depth, "used without a connection"
        if name != "add":
            raise RuntimeError(f"Unknown tool: {name!r}")
        self.env.total += int(arguments["n"])
        return _ToolResult(self.env.total)


class ToolEnv(PingEnv):
    """PingEnv with MCP tools (duck-typed like OpenEnv's MCPEnvironment); ``total`` steps
    answer the tools' running total, so a WebSocket attached to a session sees its calls."""

    sessions_entered: ClassVar[int] = 0
    sessions_left: ClassVar[int] = 0

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.mcp_client: FakeMcpClient | None = FakeMcpClient(self)

    @contextlib.asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[FakeMcpClient]:
        assert self.mcp_client is not None
        type(self).sessions_entered += 1
        try:
            async with self.mcp_client as client:
                yield client
        finally:
            type(self).sessions_left += 1

    def step(self, action: PingAction) -> PingObservation:  # type: ignore[override]
        if action.message == "total":
            return PingObservation(echoed=str(self.total))
        return super().step(action)


class AsyncPingEnv(PingEnv):
    """Its own ``reset_async`` / ``step_async``: the HTTP API must await them."""

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None) -> Any:
        await asyncio.sleep(0.01)
        return PingObservation(echoed=f"async seed={seed}")

    async def step_async(self, action: PingAction) -> PingObservation:
        if action.message == "slow":
            await asyncio.sleep(0.3)
        if action.message == "raise":
            raise ValueError("async boom")
        return PingObservation(echoed=f"async {action.message}", reward=2)


@pytest.fixture
def tool_server(env_server):
    ToolEnv.sessions_entered = ToolEnv.sessions_left = 0
    return env_server(ToolEnv)


# ------------------------------------------------------------------------- OpenAPI


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_openapi_document_of_simulation_mode(ping_server):
    status, headers, body = call(ping_server.url, "GET", "/openapi.json")
    assert (status, headers["Content-Type"]) == (200, "application/json")
    doc = json.loads(body)
    assert doc["openapi"].startswith("3.1")
    assert doc["info"]["version"] == API_VERSION == "1.0.0"
    assert doc["info"]["x-openenv-gym-version"] == __version__
    assert doc["info"]["x-openenv-mode"] == "simulation"
    assert sorted(doc["paths"]) == sorted(
        ["/health", "/metadata", "/schema", "/mcp", "/ws", "/batch", *CONTROL]
    )
    assert list(doc["paths"]["/reset"]) == ["post"]
    assert list(doc["paths"]["/step"]) == ["post"]
    assert list(doc["paths"]["/state"]) == ["get"]
    assert list(doc["paths"]["/mcp"]) == ["post"]
    schemas = doc["components"]["schemas"]
    # the environment's own models, referenced where they travel
    assert schemas["PingAction"]["properties"]["message"]["minLength"] == 1
    step_body = schemas["StepRequest"]["properties"]["action"]
    assert step_body == {"$ref": "#/components/schemas/PingAction"}
    state = doc["paths"]["/state"]["get"]["responses"]["200"]["content"]["application/json"]
    assert state["schema"] == {"$ref": "#/components/schemas/PingState"}
    assert "PingObservation" in schemas
    for ref in _refs(doc):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref


def test_openapi_lists_exactly_the_paths_served(ping_server):
    doc = json.loads(call(ping_server.url, "GET", "/openapi.json")[2])
    for path, operations in doc["paths"].items():
        for method in operations:
            status, _, _ = call(ping_server.url, method.upper(), path, b"{}")
            assert status not in (404, 405), (method, path)


def test_production_mode_has_no_http_reset_step_state(env_server):
    running = env_server(PingEnv, mode="production")
    doc = json.loads(call(running.url, "GET", "/openapi.json")[2])
    assert doc["info"]["x-openenv-mode"] == "production"
    assert not set(CONTROL) & set(doc["paths"])
    for path in CONTROL:
        for method in ("GET", "POST"):
            status, _, body = call(running.url, method, path, b"{}")
            assert (status, json.loads(body)) == (404, {"detail": "Not Found"})
    assert call(running.url, "GET", "/health")[0] == 200
    assert rpc(running.url, "openenv/session/create")["result"]["session_id"]


def test_server_mode_setting():
    assert ServerConfig().mode is ServerMode.SIMULATION
    assert ServerConfig(mode="PRODUCTION").mode is ServerMode.PRODUCTION  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown server mode"):
        ServerConfig(mode="staging")  # type: ignore[arg-type]


def test_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_MODE", "production")
    assert ServerConfig.from_env().mode is ServerMode.PRODUCTION
    assert ServerConfig.from_env(mode="simulation").mode is ServerMode.SIMULATION


# --------------------------------------------------------------- /reset /step /state


def test_reset_is_stateless_and_shaped_as_openenvs(ping_server):
    status, reply = post_json(ping_server.url, "/reset", {"seed": 3, "episode_id": "e", "x": 1})
    assert status == 200
    assert reply == {
        "observation": {"metadata": {}, "echoed": "ready seed=3", "length": 0},
        "reward": None,
        "done": False,
        "metadata": None,
    }
    # an instance per request, closed after it, no slot held
    assert LIFECYCLE.created == LIFECYCLE.closed == 1
    assert ping_server.server.active == 0
    status, _, body = call(ping_server.url, "POST", "/reset")  # no body: defaults
    assert status == 200
    assert json.loads(body)["observation"]["echoed"] == "ready seed=None"


def test_step_replies_with_metadata_inside_and_beside(ping_server):
    status, reply = post_json(ping_server.url, "/step", {"action": {"message": "hi"}})
    assert status == 200
    assert reply == {
        "observation": {"metadata": {"step": 1}, "echoed": "hi", "length": 2},
        "reward": 1.0,
        "done": False,
        "metadata": {"step": 1},
    }
    # stateless: the second step is again the first of a fresh instance
    assert post_json(ping_server.url, "/step", {"action": {"message": "hi"}}) == (200, reply)


def test_state_is_a_fresh_instances(ping_server):
    post_json(ping_server.url, "/step", {"action": {"message": "hi"}})
    status, _, body = call(ping_server.url, "GET", "/state")
    assert status == 200
    assert json.loads(body) == {"episode_id": None, "step_count": 0, "last": None}


def test_int_reward_is_a_float_over_http(env_server):
    running = env_server(DuckEnv)
    status, reply = post_json(running.url, "/reset", {"anything": 1})
    assert (status, reply["reward"], reply["observation"]["echoed"]) == (200, 1.0, "anything")


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        (
            "/reset",
            '{"seed": -1}',
            [
                {
                    "type": "greater_than_equal",
                    "loc": ["body", "seed"],
                    "msg": "Input should be greater than or equal to 0",
                    "input": -1,
                    "ctx": {"ge": 0},
                }
            ],
        ),
        (
            "/reset",
            "xx",
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", 0],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": "Expecting value"},
                }
            ],
        ),
        (
            "/step",
            "",
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}],
        ),
        (
            "/step",
            "{}",
            [{"type": "missing", "loc": ["body", "action"], "msg": "Field required", "input": {}}],
        ),
    ],
)
def test_bad_bodies_are_422_as_fastapi_writes_them(ping_server, path, body, detail):
    status, _, reply = call(ping_server.url, "POST", path, body)
    assert (status, json.loads(reply)) == (422, {"detail": detail})
    assert LIFECYCLE.created == 0  # refused before any instance is built


def test_invalid_action_is_422_with_the_actions_errors(ping_server):
    status, reply = post_json(ping_server.url, "/step", {"action": {"message": "", "x": 1}})
    assert status == 422
    errors = {(e["type"], tuple(e["loc"])) for e in reply["detail"]}
    assert errors == {("string_too_short", ("message",)), ("extra_forbidden", ("x",))}
    assert LIFECYCLE.created == 0


@pytest.mark.parametrize("body", ["[1]", "3", '"s"'])
def test_non_object_reset_body_is_422(ping_server, body):
    status, _, reply = call(ping_server.url, "POST", "/reset", body)
    assert status == 422
    assert json.loads(reply)["detail"][0]["loc"] == ["body"]


def test_environment_error_is_500_and_the_instance_is_closed(ping_server):
    status, reply = post_json(ping_server.url, "/step", {"action": {"message": "raise"}})
    assert (status, reply) == (500, {"detail": "boom: step raised"})
    assert LIFECYCLE.wait_closed(1)
    assert ping_server.server.active == 0


def test_no_free_slot_is_503(env_server):
    running = env_server(PingEnv, max_sessions=1)
    with connect(running.ws(), proxy=None, open_timeout=5):
        assert running.server.wait_active(1)
        status, reply = post_json(running.url, "/reset", {})
        assert status == 503
        assert reply == {"detail": "Server at capacity: 1/1 sessions active."}
    assert running.server.wait_active(0)
    assert post_json(running.url, "/reset", {})[0] == 200


def test_async_environment_methods_are_awaited(env_server):
    running = env_server(AsyncPingEnv)
    status, reply = post_json(running.url, "/reset", {"seed": 5})
    assert (status, reply["observation"]["echoed"]) == (200, "async seed=5")
    status, reply = post_json(running.url, "/step", {"action": {"message": "hi"}})
    assert (status, reply["observation"]["echoed"], reply["reward"]) == (200, "async hi", 2.0)
    status, reply = post_json(running.url, "/step", {"action": {"message": "raise"}})
    assert (status, reply) == (500, {"detail": "async boom"})
    assert LIFECYCLE.wait_closed(3)
    assert running.server.wait_active(0)


def test_awaited_answers_keep_pipelined_requests_in_order(env_server):
    running = env_server(AsyncPingEnv)
    slow = json.dumps({"action": {"message": "slow"}}).encode()
    data = (
        b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(slow), slow)
        + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        + b"POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    reply = raw_exchange(running.url, data)
    assert statuses(reply) == [200, 200, 404]
    assert reply.index(b"async slow") < reply.index(b'{"status":"healthy"}')


def test_a_connection_lost_while_awaiting_closes_the_instance(env_server):
    running = env_server(AsyncPingEnv)
    slow = json.dumps({"action": {"message": "slow"}}).encode()
    parts = urlsplit(running.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as sock:
        sock.sendall(
            b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(slow), slow)
        )
        assert running.server.wait_active(1)
    assert LIFECYCLE.wait_closed(1)
    assert running.server.wait_active(0)


# ------------------------------------------------------------- methods, paths, bodies

EVERY_PATH = [
    "/", "/health", "/metadata", "/schema", "/openapi.json", "/mcp", "/reset", "/step",
    "/state", "/ws", "/batch", "/docs", "/nope", "/mcp/extra",
]  # fmt: skip


@pytest.mark.parametrize("mode", ["simulation", "production"])
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "GET", "OPTIONS"])
def test_a_body_to_any_path_gets_an_http_response(env_server, mode, method):
    running = env_server(PingEnv, mode=mode)
    body = b'{"action": {"message": "hi"}, "jsonrpc": "2.0"}'
    requests = b"".join(
        b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (method.encode(), path.encode(), len(body), body)
        for path in EVERY_PATH
    )
    reply = raw_exchange(running.url, requests)
    codes = statuses(reply)
    assert len(codes) == len(EVERY_PATH), reply[-500:]
    assert all(200 <= code < 500 for code in codes), dict(zip(EVERY_PATH, codes, strict=True))
    answered = dict(zip(EVERY_PATH, codes, strict=True))
    assert answered["/nope"] == answered["/docs"] == answered["/mcp/extra"] == 404
    if method == "POST":
        assert answered["/mcp"] == 200
        assert answered["/health"] == 405
        assert answered["/step"] == (200 if mode == "simulation" else 404)
    if method in ("PUT", "PATCH", "DELETE", "OPTIONS"):
        assert {
            code
            for path, code in answered.items()
            if path not in ("/", "/docs", "/nope", "/mcp/extra")
        } <= {405, 404}


def test_method_not_allowed_names_the_allowed_ones(ping_server):
    status, headers, body = call(ping_server.url, "PUT", "/step", b"{}")
    assert (status, headers["Allow"], json.loads(body)) == (
        405,
        "POST",
        {"detail": "Method Not Allowed"},
    )
    status, headers, _ = call(ping_server.url, "GET", "/mcp")
    assert (status, headers["Allow"]) == (405, "POST")


def test_head_is_get_without_a_body(ping_server):
    status, headers, body = call(ping_server.url, "HEAD", "/state")
    assert (status, body, headers["Content-Length"]) == (200, b"", "0")


def test_oversized_and_chunked_bodies_are_refused_with_a_response(env_server):
    running = env_server(PingEnv, max_body=64)
    big = b"{" + b" " * 100 + b"}"
    reply = raw_exchange(
        running.url,
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big),
    )
    assert statuses(reply) == [413]
    chunked = (
        b"POST /reset HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    assert statuses(raw_exchange(running.url, chunked)) == [411]


def test_the_token_guards_every_endpoint(env_server):
    running = env_server(PingEnv, token="s3cret")
    for path in ("/mcp", "/reset", "/step", "/openapi.json"):
        status, headers, _ = call(running.url, "POST", path, b"{}")
        assert (status, headers["WWW-Authenticate"]) == (401, "Bearer"), path
    good = {"Authorization": "Bearer s3cret"}
    assert call(running.url, "GET", "/openapi.json", headers=good)[0] == 200
    status, _, body = call(running.url, "POST", "/reset", b"{}", headers=good)
    assert (status, json.loads(body)["done"]) == (200, False)


# ------------------------------------------------------------------------ JSON-RPC


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", -32700),
        (b"{", -32700),
        (b"\xff", -32700),
        (b"{}", -32600),
        (b"[]", -32600),
        (b'[{"jsonrpc": "2.0", "method": "tools/list"}]', -32600),
        (b"7", -32600),
        (b'{"jsonrpc": "1.0", "method": "tools/list", "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "method": 5, "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "method": "x", "id": 1, "extra": 1}', -32600),
        (b'{"jsonrpc": "2.0", "method": "x", "id": true}', -32600),
        (b'{"jsonrpc": "2.0", "method": "x", "id": 1.5}', -32600),
        (b'{"jsonrpc": "2.0", "method": "x", "params": 3, "id": 1}', -32600),
        (b'{"jsonrpc": "2.0", "method": "x", "params": [1], "id": 1}', -32602),
    ],
)
def test_malformed_requests(body, code):
    reply = parse_call(body)
    assert isinstance(reply, dict)
    assert reply["jsonrpc"] == "2.0"
    assert reply["error"]["code"] == code
    assert reply["error"]["data"] is None


def test_the_request_id_is_echoed_when_it_was_readable():
    reply = parse_call(b'{"jsonrpc": "1.0", "method": "x", "id": "abc"}')
    assert isinstance(reply, dict)
    assert reply["id"] == "abc"
    reply = parse_call(b'{"jsonrpc": "2.0", "method": "x", "id": [1]}')
    assert isinstance(reply, dict)
    assert reply["id"] is None


def test_mcp_on_a_plain_env_answers_as_openenv_does(ping_server):
    url = ping_server.url
    status, reply = post_json(url, "/mcp", {})  # what `openenv validate` sends
    assert status == 200
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert rpc_error(rpc(url, "tools/list")) == (-32603, "Environment does not support MCP")
    called = rpc(url, "tools/call", {"name": "x", "arguments": {}}, id="c")
    assert called["id"] == "c"
    assert rpc_error(called) == (-32603, "Environment does not support MCP")
    assert rpc_error(rpc(url, "tools/call", {})) == (-32602, "Missing 'name' in params")
    assert rpc_error(rpc(url, "resources/list")) == (-32601, "Method not found: resources/list")
    assert rpc(url, "tools/list", id=None)["id"] is None  # a notification is answered too
    assert ping_server.server.wait_active(0)
    assert LIFECYCLE.created == LIFECYCLE.closed


def test_session_create_and_close(ping_server):
    url = ping_server.url
    created = rpc(url, "openenv/session/create", id=7)
    session_id = created["result"]["session_id"]
    assert created["id"] == 7
    assert ping_server.server.active == 1  # a session holds a slot, as upstream
    assert rpc(url, "openenv/session/close", {"session_id": session_id})["result"] == {
        "session_id": session_id,
        "closed": True,
    }
    assert ping_server.server.wait_active(0)
    assert LIFECYCLE.wait_closed(1)
    assert rpc_error(rpc(url, "openenv/session/close", {"session_id": session_id})) == (
        -32602,
        f"Unknown session_id: {session_id}",
    )
    assert rpc_error(rpc(url, "openenv/session/close", {})) == (
        -32602,
        "Invalid params - 'session_id' is required",
    )


def test_session_create_at_capacity_is_32000(env_server):
    running = env_server(PingEnv, max_sessions=1)
    assert "result" in rpc(running.url, "openenv/session/create")
    reply = rpc(running.url, "openenv/session/create")
    assert rpc_error(reply) == (-32000, "Server at capacity: 1/1 sessions active.")
    assert reply["error"]["data"] == {"active_sessions": 1, "max_sessions": 1}


def test_idle_sessions_are_closed(env_server):
    running = env_server(PingEnv, idle_timeout=0.2)
    rpc(running.url, "openenv/session/create")
    assert running.server.active == 1
    assert running.server.wait_active(0, timeout=5)
    assert LIFECYCLE.wait_closed(1)


def test_server_close_closes_sessions(env_server):
    running = env_server(PingEnv)
    for _ in range(3):
        rpc(running.url, "openenv/session/create")
    assert running.server.active == 3
    running.thread.run(running.server.aclose())
    assert LIFECYCLE.wait_closed(3)
    assert running.server.active == 0


# ------------------------------------------------------------------------ MCP tools


def test_tools_list_and_call_on_a_new_instance_each(tool_server):
    url = tool_server.url
    listed = rpc(url, "tools/list")
    assert listed["result"] == {
        "tools": [
            {
                "name": "add",
                "description": "Add n to the total.",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            }
        ]
    }
    for _ in range(2):  # no session: every call starts from a fresh instance
        called = rpc(url, "tools/call", {"name": "add", "arguments": {"n": 2}})
        assert called["result"] == {"data": 2, "is_error": False}
    assert rpc_error(rpc(url, "tools/call", {"name": "sub", "arguments": {}})) == (
        -32603,
        "Unknown tool: 'sub'",
    )
    assert rpc_error(rpc(url, "tools/call", {"name": "add", "arguments": [1]}))[0] == -32602
    assert ToolEnv.sessions_entered == ToolEnv.sessions_left == 4
    assert tool_server.server.wait_active(0)


def test_tool_calls_in_a_session_share_its_instance(tool_server):
    url = tool_server.url
    session_id = rpc(url, "openenv/session/create")["result"]["session_id"]
    assert ToolEnv.sessions_entered == 1  # held open for the session's life
    for total in (3, 6):
        params = {"name": "add", "arguments": {"n": 3}, "session_id": session_id}
        assert rpc(url, "tools/call", params)["result"]["data"] == total
    assert "tools" in rpc(url, "tools/list", {"session_id": session_id})["result"]
    assert ToolEnv.sessions_entered == 1
    assert rpc_error(rpc(url, "tools/list", {"session_id": "nope"})) == (
        -32602,
        "Unknown session_id: nope",
    )
    rpc(url, "openenv/session/close", {"session_id": session_id})
    assert ToolEnv.sessions_left == 1
    assert tool_server.server.wait_active(0)


def _ws_step(ws: Any, message: str) -> Any:
    ws.send(json.dumps({"type": "step", "data": {"message": message}}))
    return json.loads(ws.recv(timeout=5))


def test_a_websocket_attaches_to_a_session(tool_server):
    url = tool_server.url
    session_id = rpc(url, "openenv/session/create")["result"]["session_id"]
    rpc(url, "tools/call", {"name": "add", "arguments": {"n": 5}, "session_id": session_id})
    with connect(tool_server.ws(f"/ws?session_id={session_id}"), proxy=None) as ws:
        assert _ws_step(ws, "total")["data"]["observation"]["echoed"] == "5"
        assert tool_server.server.active == 1  # the session's slot, not a new one
        # one WebSocket at a time
        with connect(tool_server.ws(f"/ws?session_id={session_id}"), proxy=None) as second:
            error = json.loads(second.recv(timeout=5))
            assert error == {
                "type": "error",
                "data": {
                    "message": f"Session {session_id} already has an attached WebSocket",
                    "code": "SESSION_ERROR",
                },
            }
            with pytest.raises(ConnectionClosed):
                second.recv(timeout=5)
        params = {"name": "add", "arguments": {"n": 1}, "session_id": session_id}
        rpc(url, "tools/call", params)
        assert _ws_step(ws, "total")["data"]["observation"]["echoed"] == "6"
        # closing the session while attached: it closes when the WebSocket goes
        closing = rpc(url, "openenv/session/close", {"session_id": session_id})
        assert closing["result"] == {"session_id": session_id, "closed": False, "closing": True}
        assert tool_server.server.active == 1
    assert tool_server.server.wait_active(0)
    assert LIFECYCLE.wait_closed(1)


def test_the_session_outlives_its_websocket(tool_server):
    url = tool_server.url
    session_id = rpc(url, "openenv/session/create")["result"]["session_id"]
    with connect(tool_server.ws(f"/ws?session_id={session_id}"), proxy=None) as ws:
        _ws_step(ws, "hi")
    time.sleep(0.1)
    assert tool_server.server.active == 1
    with connect(tool_server.ws(f"/ws?session_id={session_id}"), proxy=None) as ws:
        ws.send('{"type": "state"}')
        assert json.loads(ws.recv(timeout=5))["data"]["step_count"] == 1
    rpc(url, "openenv/session/close", {"session_id": session_id})
    assert tool_server.server.wait_active(0)


def test_attaching_to_an_unknown_session_is_a_session_error(ping_server):
    with connect(ping_server.ws("/ws?session_id=nope"), proxy=None) as ws:
        assert json.loads(ws.recv(timeout=5)) == {
            "type": "error",
            "data": {"message": "Unknown session_id: nope", "code": "SESSION_ERROR"},
        }
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
    assert ping_server.server.active == 0


@pytest.mark.integration
def test_serve_mode_flag_and_variable(cli_server, monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_MODE", "production")
    production = cli_server("openenv_gym_test_envs:PingEnv")
    assert call(production.url, "POST", "/reset", b"{}")[0] == 404
    simulation = cli_server("openenv_gym_test_envs:PingEnv", "--mode", "simulation")
    assert call(simulation.url, "POST", "/reset", b"{}")[0] == 200
