"""Our server runtime hosting MCP tool environments written as upstream writes them.

``openenv-gym serve --env openenv_mcp_envs:LineWalkEnvironment`` (and the MCP echo): the
classes are OpenEnv ``MCPEnvironment`` subclasses with FastMCP tools, annotated
``step(action: Action)``. Our runtime must publish ``CallToolAction`` /
``CallToolObservation`` as ``/schema`` (as upstream's ``create_app(Env, CallToolAction,
CallToolObservation)`` does), turn ``{"type": "list_tools"}`` / ``{"type": "call_tool"}``
actions into OpenEnv's MCP models, await the classes' own ``step_async`` (the tool calls of
a batched request run side by side), and give over the BATCHED protocol what OpenEnv's
app gives over JSON.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("openenv")

import gymnasium
import numpy as np
from interop_support import WIRE_METADATA, Server
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
)
from openenv.core.env_server.types import Action
from openenv.core.generic_client import GenericEnvClient
from openenv_mcp_envs import ECHO_READY, LineWalkEnvironment, McpEchoEnvironment, flag_for
from pydantic import TypeAdapter

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.assemble import fetch_schema
from openenv_gym.exceptions import ServerValidationError
from openenv_gym.runtime.loader import resolve_models
from openenv_gym.spaces import TOOLS, is_mcp_schema
from openenv_gym.transport.session import open_session

pytestmark = pytest.mark.openenv

WALK = "openenv_mcp_envs:LineWalkEnvironment"
ECHO = "openenv_mcp_envs:McpEchoEnvironment"
N = 12


@pytest.fixture
def walk(shared_server) -> Server:
    return shared_server("--env", WALK)


@pytest.fixture
def echo(shared_server) -> Server:
    return shared_server("--env", ECHO)


@pytest.mark.parametrize("cls", [McpEchoEnvironment, LineWalkEnvironment])
def test_models_are_the_ones_upstream_serves_it_with(cls) -> None:
    models = resolve_models(cls)
    assert (models.action, models.observation) == (CallToolAction, CallToolObservation)
    accepts = TypeAdapter(models.accepts)
    assert type(accepts.validate_python({"type": "list_tools"})) is ListToolsAction
    call = accepts.validate_python({"type": "call_tool", "tool_name": "look", "arguments": {}})
    assert type(call) is CallToolAction
    assert type(accepts.validate_python({})) is Action  # anything else: the class's own


def test_schema_and_tools_as_upstreams_app_publishes_them(walk, shared_app) -> None:
    ours, theirs = fetch_schema(walk.url), fetch_schema(shared_app("linewalk").url)
    assert is_mcp_schema(ours)
    assert ours["action"] == theirs["action"]
    assert ours["observation"] == theirs["observation"]
    assert [t["name"] for t in ours[TOOLS]] == ["move", "look"]
    assert ours[TOOLS] == theirs[TOOLS]


def _towards(flags: list[int]) -> dict[str, np.ndarray]:
    """The one-tool action batch (``tool="move"``) that reaches each flag in one move."""
    return {
        "direction": np.array([1 if f > 0 else 0 for f in flags]),  # Discrete: left, right
        "steps": np.array([abs(f) for f in flags]),
    }


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_make_vec_steps_tool_calls_over_both_protocols(walk, protocol) -> None:
    envs = gymnasium.make_vec(
        "openenv/Generic-v0", num_envs=N, base_url=walk.url, protocol=protocol, tool="move"
    )
    try:
        assert envs.unwrapped.protocols == (protocol,)
        # flags within 2 of the start, so that one step away and back fits a move (<= 3)
        seeds = [s for s in range(1000) if abs(flag_for(s)) <= 2][:N]
        obs, _ = envs.reset(seed=seeds)
        # the reset greeting is the metadata as JSON on both protocols
        assert obs["text"] == ('{"goal":"reach the flag"}',) * N
        flags = [flag_for(s) for s in seeds]
        # first a move away from the flag: no reward, the episode goes on
        away = _towards([-f for f in flags])
        away["steps"] = np.ones(N, dtype=np.int64)
        obs, rewards, terminated, _, infos = envs.step(away)
        assert rewards.tolist() == [0.0] * N
        assert not terminated.any()
        positions = infos["result"]["structured_content"]["position"].tolist()
        assert positions == [-1 if f > 0 else 1 for f in flags]
        # then back and onto the flag: reward 1.0 and the end, for every sub-env
        back = _towards([f - p for f, p in zip(flags, positions, strict=True)])
        obs, rewards, terminated, _, _ = envs.step(back)
        assert rewards.tolist() == [1.0] * N
        assert terminated.all()
        assert obs["tool_name"] == ("move",) * N
        assert obs["is_error"].tolist() == [0] * N
    finally:
        envs.close()


def test_batched_and_upstreams_json_give_the_same_episode(walk, shared_app) -> None:
    """Sampled Generic-v0 actions (both tools) from one seed, on our batched server and on
    OpenEnv's app over JSON: the same observations, rewards and ends."""
    runs = []
    for url, protocol in ((walk.url, "batch"), (shared_app("linewalk").url, "json")):
        envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=4, base_url=url, protocol=protocol)
        envs.action_space.seed(3)
        try:
            obs, _ = envs.reset(seed=[7, 8, 9, 10])
            trace: list[object] = [_texts(obs)]
            for _ in range(12):
                obs, rewards, terminated, _, _ = envs.step(envs.action_space.sample())
                trace.append((_texts(obs), rewards.tolist(), terminated.tolist()))
            runs.append(trace)
        finally:
            envs.close()
    assert runs[0] == runs[1]


def _texts(obs: dict) -> tuple[str, ...]:
    """The texts; a reset's greeting as "" (openenv-core 0.3.0's app never sends it)."""
    greeting = '{"goal":"reach the flag"}'
    return tuple("" if t == greeting and not WIRE_METADATA else t for t in obs["text"])


def test_echo_id_on_the_hosted_mcp_echo(echo) -> None:
    for protocol in ("batch", "json"):
        envs = gymnasium.make_vec(
            "openenv/Echo-v0", num_envs=N, base_url=echo.url, protocol=protocol
        )
        try:
            obs, _ = envs.reset()
            assert list(obs) == [ECHO_READY] * N  # the greeting, from the metadata
            messages = [f"{protocol} {i}" for i in range(N)]
            assert list(envs.step(messages)[0]) == messages
        finally:
            envs.close()


def test_official_client_calls_tools_on_our_server(echo) -> None:
    async def scenario() -> None:
        async with GenericEnvClient(base_url=echo.url) as client:
            await client.reset()
            listed = await client.step({"type": "list_tools"})
            names = [t["name"] for t in listed.observation["tools"]]
            assert names == ["echo_message", "echo_with_length"]
            called = await client.step(
                {
                    "type": "call_tool",
                    "tool_name": "echo_with_length",
                    "arguments": {"message": "hey"},
                }
            )
            assert called.observation["tool_name"] == "echo_with_length"
            assert called.observation["result"]["structured_content"] == {
                "message": "hey",
                "length": 3,
            }
            assert called.observation["error"] is None
            state = await client.state()
            assert state["step_count"] == 2
            assert isinstance(state["episode_id"], str)
            assert state["episode_id"]

    asyncio.run(scenario())


def test_a_bad_tool_call_fails_alone_and_the_session_survives(walk) -> None:
    session = open_session(walk.url, protocol="batch")
    try:
        session.reset(seed=1)
        with pytest.raises(ServerValidationError):
            session.step({"type": "call_tool", "arguments": {}})  # no tool_name
        reply = session.step({"type": "call_tool", "tool_name": "nowhere", "arguments": {}})
        assert reply.observation["error"] is not None  # the tool server's own error
        reply = session.step({"type": "call_tool", "tool_name": "look", "arguments": {}})
        assert "You stand at 0" in str(reply.observation["result"])
    finally:
        session.close()


@pytest.mark.parametrize("protocol", ["batch", "json"])
@pytest.mark.parametrize("cls", ["ConnectionCountingEnvironment", "SoloConnectionCounting"])
def test_the_mcp_session_is_held_for_the_sessions_life(shared_server, cls, protocol) -> None:
    """As OpenEnv's /ws does: one MCP connection per instance, every tool call reusing it
    (in process, and in the worker of a class not marked concurrent); not one per call,
    which costs as much again as the call."""
    server = shared_server("--env", f"openenv_mcp_envs:{cls}")
    envs = gymnasium.make_vec(
        "openenv/Generic-v0",
        num_envs=3,
        base_url=server.url,
        protocol=protocol,
        tool="connections",
    )
    try:
        assert envs.unwrapped.protocols == (protocol,)
        envs.reset(seed=0)
        counts = []
        for _ in range(4):
            _, _, _, _, infos = envs.step(envs.action_space.sample())
            counts.append(infos["result"]["structured_content"]["result"].tolist())
        assert counts == [[1, 1, 1]] * 4
    finally:
        envs.close()
