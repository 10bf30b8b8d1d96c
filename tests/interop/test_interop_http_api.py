"""OpenEnv's HTTP API on our server, checked with OpenEnv's own tools (issue 16).

* ``openenv validate --url`` -- OpenEnv's runtime probe, in both release lines (the
  command exists in openenv-core 0.3.0 and in openenv 0.10; 0.3.0 prints its JSON report,
  0.10 a text report ending ``Verdict: PASS`` or, with ``--json``, the JSON report) --
  passes against ``openenv-gym serve`` echo, wordle, catch and two hosted MCP environment
  classes, in both modes, and finds the mode we serve.
* The same environment class behind OpenEnv's ``create_app`` and behind our server answers
  the same HTTP requests (``/reset``, ``/step``, ``/state``, ``/mcp``, 404, 405)
  identically, up to the differences ``docs/compatibility.md`` lists.
* OpenEnv's official MCP client (``MCPToolClient``) over HTTP ``/mcp`` sessions: in 0.10
  its default "production" mode (``openenv/session/create``, then ``/ws?session_id=``
  sharing that session's instance); in 0.3.0 with ``use_production_mode = True`` (tools
  over ``/mcp`` only). Neither line has an official client for the HTTP ``/reset`` /
  ``/step`` endpoints (``EnvClient`` speaks ``/ws`` only), so simulation mode is driven
  here by plain HTTP requests, compared with OpenEnv's own app.
"""

from __future__ import annotations

import asyncio
import http.client
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("openenv")

from interop_support import OPENENV_VERSION, WIRE_METADATA, Server
from openenv.core.mcp_client import MCPToolClient
from openenv_mcp_envs import flag_for

pytestmark = pytest.mark.openenv

TARGETS = {
    "echo": ("echo",),
    "wordle": ("wordle",),
    "catch": ("catch",),
    "mcp-linewalk": ("--env", "openenv_mcp_envs:LineWalkEnvironment"),
    "mcp-echo": ("--env", "openenv_mcp_envs:McpEchoEnvironment"),
}


@pytest.fixture(scope="module")
def openenv_cli() -> Any:
    """OpenEnv's command-line app (typer), or skip if this line has no ``validate --url``."""
    try:
        from openenv.cli.__main__ import app
        from openenv.cli.commands import validate
    except ImportError:
        pytest.skip("this OpenEnv line has no `openenv validate`")
    if "url" not in inspect.signature(validate.validate).parameters:
        pytest.skip("this OpenEnv line has no `openenv validate --url`")
    return app


def run_validate(app: Any, url: str, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """``openenv validate --url URL`` run in this process: (the JSON report, the text one).

    openenv-core 0.3.0 prints the JSON report; openenv >= 0.4 prints a text report ending
    ``Verdict: PASS`` / ``FAIL`` and writes the JSON one with ``--output``.
    """
    from openenv.cli.commands import validate
    from typer.testing import CliRunner

    args = ["validate", "--url", url]
    report_file = tmp_path / "report.json"
    text_report = "output" in inspect.signature(validate.validate).parameters
    if text_report:
        args += ["--output", str(report_file)]
    result = CliRunner().invoke(app, args)
    output = result.stdout.strip()
    report = json.loads(report_file.read_text() if text_report else output)
    assert result.exit_code == (0 if report["passed"] else 1), output
    return report, output if text_report else ""


@pytest.mark.parametrize("mode", ["simulation", "production"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_openenv_validate_passes(openenv_cli, tmp_path, shared_server, target, mode):
    server = shared_server(*TARGETS[target], "--mode", mode)
    report, text = run_validate(openenv_cli, server.url, tmp_path)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"], failed
    assert report["mode"] == mode
    assert report["standard_version"] == "1.0.0"
    assert report["standard_profile"] == "openenv-http/1.x"
    assert {c["id"] for c in report["criteria"]} >= {
        "openapi_version_available",
        "health_endpoint",
        "metadata_endpoint",
        "schema_endpoint",
        "mcp_endpoint",
        "mode_endpoint_consistency",
    }
    if text:
        assert text.splitlines()[-1] == "Verdict: PASS"
        assert f"mode: {mode}" in text


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["simulation", "production"])
def test_the_openenv_command(openenv_cli, shared_server, mode):
    """The installed ``openenv`` console script itself (slow to start: once per mode)."""
    command = Path(sys.executable).with_name("openenv")
    server = shared_server(*TARGETS["wordle"], "--mode", mode)
    done = subprocess.run(
        [str(command), "validate", "--url", server.url],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout.strip()
    if output.startswith("{"):  # openenv-core 0.3.0
        report = json.loads(output)
        assert (report["passed"], report["mode"]) == (True, mode)
    else:
        assert output.splitlines()[-1] == "Verdict: PASS"
        assert f"mode: {mode}" in output


@pytest.mark.parametrize("app", ["echo", "linewalk"])
def test_openenv_validate_reads_upstreams_app_the_same_way(
    openenv_cli, tmp_path, shared_app, shared_server, app
):
    spec = {"echo": TARGETS["echo"], "linewalk": TARGETS["mcp-linewalk"]}[app]
    theirs, _ = run_validate(openenv_cli, shared_app(app).url, tmp_path)
    ours, _ = run_validate(openenv_cli, shared_server(*spec, "--mode", "simulation").url, tmp_path)
    summary = ("passed", "mode", "standard_version", "standard_profile")
    assert {k: ours[k] for k in summary} == {k: theirs[k] for k in summary}
    assert [c["id"] for c in ours["criteria"]] == [c["id"] for c in theirs["criteria"]]


# ----------------------------------------------------------------- parity over HTTP


def ask(url: str, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
    """One request; (status, JSON body)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        headers = {} if body is None else {"Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def rpc_body(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> str:
    payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        payload["params"] = params
    return json.dumps(payload)


COMMON = {
    "reset-seeded": ("POST", "/reset", '{"seed": 1, "episode_id": "e", "unknown": 1}'),
    "reset-negative-seed": ("POST", "/reset", '{"seed": -1}'),
    "reset-not-json": ("POST", "/reset", "{oops"),
    "reset-not-object": ("POST", "/reset", "[1]"),
    "step-no-body": ("POST", "/step", None),
    "step-no-action": ("POST", "/step", "{}"),
    "step-bad-timeout": ("POST", "/step", '{"action": {}, "timeout_s": -1}'),
    "state": ("GET", "/state", None),
    "get-reset": ("GET", "/reset", None),
    "post-state": ("POST", "/state", "{}"),
    "put-step": ("PUT", "/step", "{}"),
    "get-mcp": ("GET", "/mcp", None),
    "unknown-path": ("POST", "/nope", "{}"),
    "mcp-not-json": ("POST", "/mcp", "{oops"),
    "mcp-unknown-method": ("POST", "/mcp", rpc_body("resources/list", id="r")),
    "mcp-unknown-session": ("POST", "/mcp", rpc_body("openenv/session/close", {"session_id": "x"})),
    "mcp-close-without-id": ("POST", "/mcp", rpc_body("openenv/session/close", {})),
}

PER_APP: dict[str, dict[str, tuple[str, str, str | None]]] = {
    "counter": {
        "step": ("POST", "/step", '{"action": {"delta": 2}}'),
        "step-invalid": ("POST", "/step", '{"action": {"delta": 9, "x": 1}}'),
        "mcp-tools-list": ("POST", "/mcp", rpc_body("tools/list")),
    },
    "linewalk": {
        "step": (
            "POST",
            "/step",
            json.dumps({"action": {"type": "call_tool", "tool_name": "look", "arguments": {}}}),
        ),
        "step-list-tools": ("POST", "/step", '{"action": {"type": "list_tools"}}'),
        "mcp-tools-list": ("POST", "/mcp", rpc_body("tools/list")),
        "mcp-call": ("POST", "/mcp", rpc_body("tools/call", {"name": "look", "arguments": {}})),
        "mcp-bad-arguments": (
            "POST",
            "/mcp",
            rpc_body("tools/call", {"name": "move", "arguments": {"direction": "up"}}),
        ),
        "mcp-unknown-tool": ("POST", "/mcp", rpc_body("tools/call", {"name": "fly"})),
    },
}
SPECS = {
    "counter": ("--env", "openenv_counter_env:CounterEnvironment"),
    "linewalk": TARGETS["mcp-linewalk"],
}
CASES = [(app, name) for app in sorted(PER_APP) for name in sorted({**COMMON, **PER_APP[app]})]


def as_this_line(name: str, reply: Any) -> Any:
    """Our reply as the installed OpenEnv line writes it (documented differences)."""
    if not isinstance(reply, dict):
        return reply
    if not WIRE_METADATA and "observation" in reply:  # 0.3.x drops metadata
        reply.pop("metadata", None)
        reply["observation"].pop("metadata", None)
    return reply


def comparable(name: str, reply: Any) -> Any:
    """What must be equal: random ids out, JSON-RPC -32600 messages by code only."""
    if isinstance(reply, dict) and name == "state":
        reply.pop("episode_id", None)
    if isinstance(reply, dict) and reply.get("error", {}).get("code") == -32600:
        reply["error"].pop("message")
    return reply


@pytest.mark.parametrize(("app", "name"), CASES)
def test_http_api_answers_as_openenvs_app(shared_app, shared_server, app, name):
    method, path, body = {**COMMON, **PER_APP[app]}[name]
    theirs = ask(shared_app(app).url, method, path, body)
    ours = ask(shared_server(*SPECS[app]).url, method, path, body)
    if name == "state" and OPENENV_VERSION < (0, 4):  # 0.3.x: the base State only
        ours = (ours[0], {k: ours[1][k] for k in ("episode_id", "step_count")})
    assert ours[0] == theirs[0]
    assert comparable(name, as_this_line(name, ours[1])) == comparable(name, theirs[1])


def test_plain_env_mcp_answers(shared_app, shared_server):
    """tools/* on an env without MCP: -32603; a missing name is -32602 from 0.4 on, and
    0.3.x checks MCP support first (we answer as 0.10 does)."""
    for server in (shared_app("counter"), shared_server(*SPECS["counter"])):
        status, reply = ask(server.url, "POST", "/mcp", rpc_body("tools/list"))
        assert (status, reply["error"]["code"]) == (200, -32603)
    status, reply = ask(
        shared_server(*SPECS["counter"]).url, "POST", "/mcp", rpc_body("tools/call", {})
    )
    assert (status, reply["error"]) == (
        200,
        {"code": -32602, "message": "Missing 'name' in params", "data": None},
    )


def test_openapi_paths_are_upstreams_less_the_task_api(shared_app, shared_server):
    theirs = set(ask(shared_app("counter").url, "GET", "/openapi.json")[1]["paths"])
    ours = set(ask(shared_server(*SPECS["counter"]).url, "GET", "/openapi.json")[1]["paths"])
    task_api = {p for p in theirs if p == "/list_environments" or p.startswith("/{env_name}")}
    assert ours - {"/ws", "/batch"} == theirs - task_api


# ---------------------------------------------------------------- official MCP client


async def _drive_mcp_client(url: str, seed: int) -> dict[str, Any]:
    """What OpenEnv's ``MCPToolClient`` sees in production mode, as a dict to compare."""
    if OPENENV_VERSION >= (0, 5):
        async with MCPToolClient(base_url=url) as env:  # HTTP session + /ws?session_id=
            await env.reset(seed=seed)
            tools = [tool.name for tool in await env.list_tools()]
            look = await env.call_tool("look")
            moved = [await env.call_tool("move", direction="right", steps=1) for _ in "ab"]
            state = await env.state()
            session_id = env._production_session_id
        return {
            "tools": tools,
            "look": look,
            "moved": moved,
            "steps": state.step_count,
            "session": session_id,
        }
    env = MCPToolClient(base_url=url)  # 0.3.0: HTTP /mcp only when asked for
    env.use_production_mode = True
    try:
        tools = [tool.name for tool in await env.list_tools()]
        moved = [await env.call_tool("move", direction="right", steps=1) for _ in "ab"]
        session_id = env._production_session_id
    finally:
        await env.close()
    return {"tools": tools, "moved": moved, "session": session_id}


@pytest.mark.parametrize("which", ["openenv", "ours"])
def test_official_mcp_client_in_production_mode(shared_app, shared_server, which):
    if which == "openenv":
        server: Server = shared_app("linewalk")
    else:
        server = shared_server(*TARGETS["mcp-linewalk"], "--mode", "production")
    seen = asyncio.run(_drive_mcp_client(server.url, seed=4))
    assert seen["tools"] == ["move", "look"]
    assert seen["moved"] == [{"position": 1}, {"position": 2}]  # one instance: the session's
    if OPENENV_VERSION >= (0, 5):
        # the WebSocket's reset and the HTTP tool calls act on the same instance
        assert seen["look"] == f"You stand at 0; the flag is at {flag_for(4)}."
        assert seen["steps"] == 0  # tool calls over /mcp bypass step()
    # the client closed its session on the way out
    status, reply = ask(
        server.url, "POST", "/mcp", rpc_body("tools/list", {"session_id": seen["session"]})
    )
    assert (status, reply["error"]["code"]) == (200, -32602)
