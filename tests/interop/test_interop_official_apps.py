"""Unmodified OpenEnv env packages (upstream's shapes) hosted by ``serve --app-dir``.

Every family of :mod:`interop_official` (echo, finqa, grid_world, textarena, openspiel
shapes, and one ``openenv init`` generates) is served natively under uvicorn, as upstream
runs it, and by ``openenv-gym serve --app-dir``. For each: ``openenv/Generic-v0`` (and the
matching id, where one exists) steps ours batched, with the same observations, rewards
and ends as the native server gives over JSON; the MCP routes answer for the MCP ones; a
class not marked concurrent never has two sessions in one process (and ``--concurrent``
puts them all in one).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

pytest.importorskip("openenv")

import gymnasium
import numpy as np
import psutil
from interop_official import ENVS, FAMILIES, Served
from interop_support import WIRE_METADATA, get_json
from websockets.sync.client import connect

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym.assemble import fetch_schema
from openenv_gym.exceptions import AppError
from openenv_gym.integrations.trl import environment_factory
from openenv_gym.runtime.apps import AppTarget, load_app
from openenv_gym.spaces import TOOLS
from openenv_gym.transport.session import open_session

# the first test starts every family's two servers side by side (each imports OpenEnv and
# its web interface's Gradio: seconds of CPU apiece); the limit only stops a hang
pytestmark = [pytest.mark.openenv, pytest.mark.timeout(600)]

ALL = [*FAMILIES, "gen_env"]
SEEDS = [3, 11, 27]
STEPS = 6

SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "echo_tool_env": [
        {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}},
        {"type": "call_tool", "tool_name": "echo_with_length", "arguments": {"message": "abc"}},
        {"type": "call_tool", "tool_name": "no_such_tool", "arguments": {}},
    ],
    "tool_qa_env": [
        {
            "type": "call_tool",
            "tool_name": "get_descriptions",
            "arguments": {"company_name": "acme"},
        },
        {
            "type": "call_tool",
            "tool_name": "sql_query",
            "arguments": {"company_name": "acme", "table_name": "revenue", "query": "year=2023"},
        },
        {"type": "call_tool", "tool_name": "submit_answer", "arguments": '{"answer": "150"}'},
    ],
    "grid_walk_env": [{"action": move} for move in ("RIGHT", "UP", "UP", "LEFT", "RIGHT")],
    "word_arena_env": [{"message": f"[{w}]"} for w in ("crane", "slate", "xyzzy", "pious")],
    "spiel_env": [{"action_id": a} for a in (0, 2, 2, 1, 0, 1, 1, 2, 0)],
    "gen_env": [{"message": m} for m in ("hello", "", "openenv")],
}
"""Actions as each server's JSON, for the same-episode checks."""


def _served(official: dict[str, Served], name: str) -> Served:
    return official[name]


def _reply(received: Any) -> tuple[Any, Any, bool]:
    """An observation as the wire gave it, minus what names the process (``pid``).

    openenv-core 0.3.x sends no ``metadata`` (our server sends it, as openenv >= 0.4
    does: ``docs/compatibility.md``), so against it the rest is compared.
    """
    observation = dict(received.observation)
    metadata = observation.pop("metadata", None)
    if WIRE_METADATA and isinstance(metadata, dict):
        observation["metadata"] = {k: v for k, v in metadata.items() if k != "pid"}
    return observation, received.reward, received.done


def _episode(url: str, seed: int, actions: list[dict[str, Any]]) -> list[Any]:
    """One episode through our JSON client: every reply (errors as their code)."""
    session = open_session(url, protocol="json")
    try:
        replies = [_reply(session.reset(seed=seed))]
        for action in actions:
            try:
                replies.append(_reply(session.step(action)))
            except Exception as exc:
                replies.append(("error", type(exc).__name__))
    finally:
        session.close()
    return replies


@pytest.mark.parametrize("name", ALL)
def test_same_episodes_as_the_native_server_over_json(official, name) -> None:
    served = _served(official, name)
    for seed in SEEDS:
        native = _episode(served.native.url, seed, SCRIPTS[name])
        ours = _episode(served.ours.url, seed, SCRIPTS[name])
        assert ours == native, f"seed {seed}"


@pytest.mark.parametrize("name", ALL)
def test_schema_is_the_native_servers(official, name) -> None:
    served = _served(official, name)
    ours = get_json(served.ours.url + "/schema")[1]
    native = get_json(served.native.url + "/schema")[1]
    assert ours["action"] == native["action"]
    assert ours["observation"] == native["observation"]


def _actions(envs: Any, name: str, step: int) -> Any:
    """A batch of actions for ``envs``: sampled (seeded), explicit for open integers."""
    if name == "spiel_env" and envs.unwrapped.spec.id == "openenv/Generic-v0":
        return np.array([[0, 1, 2][(step + k) % 3] for k in range(envs.num_envs)])
    return envs.action_space.sample()


def _single(served_url: str, env_id: str) -> Any:
    return gymnasium.make(env_id, base_url=served_url, protocol="json")


def _compare_batched_with_native(served: Served, env_id: str, name: str) -> None:
    """Our server batched (make_vec) against the native one over JSON, one sub-env at a time."""
    envs = gymnasium.make_vec(env_id, num_envs=len(SEEDS), base_url=served.ours.url)
    try:
        assert envs.unwrapped.protocols == ("batch",)
        envs.action_space.seed(7)
        obs, _ = envs.reset(seed=SEEDS)
        batches = [_actions(envs, name, step) for step in range(STEPS)]
        steps = [envs.step(actions) for actions in batches]
    finally:
        envs.close()
    for k, seed in enumerate(SEEDS):  # one native session at a time (some take only one)
        env = _single(served.native.url, env_id)
        try:
            first, _ = env.reset(seed=seed)
            if WIRE_METADATA or not served.family.mcp:  # an MCP reset shows its metadata
                _same_row(obs, k, first)
            for actions, (obs_b, rewards, terminated, _, _) in zip(batches, steps, strict=True):
                single_obs, reward, done, _, _ = env.step(_row(actions, k))
                if WIRE_METADATA or not served.family.mcp:
                    _same_row(obs_b, k, single_obs)
                elif isinstance(single_obs, dict):  # a tool server's text falls back to the
                    blank = (None,) * len(SEEDS)  # metadata 0.3.x does not send: the rest
                    _same_row({**obs_b, "text": blank}, k, {**single_obs, "text": None})
                # else a text id's whole observation is that text (Echo-v0 on a tool server):
                # with no metadata on 0.3.x's wire only the reward and the end compare
                assert float(rewards[k]) == pytest.approx(float(reward))
                assert bool(terminated[k]) == done
                if done:
                    break
        finally:
            env.close()


def _row(batch: Any, k: int) -> Any:
    if isinstance(batch, dict):
        return {key: _row(value, k) for key, value in batch.items()}
    return batch[k]


def _same_row(batch: Any, k: int, single: Any) -> None:
    np.testing.assert_equal(_row(batch, k), single)


@pytest.mark.parametrize("name", ALL)
def test_generic_steps_ours_batched_with_the_native_episodes(official, name) -> None:
    _compare_batched_with_native(_served(official, name), "openenv/Generic-v0", name)


@pytest.mark.parametrize("name", [n for n, f in FAMILIES.items() if f.matching_id])
def test_the_matching_id_steps_ours_batched_with_the_native_episodes(official, name) -> None:
    served = _served(official, name)
    _compare_batched_with_native(served, served.family.matching_id, name)


# --------------------------------------------------------------------------- MCP routes

MCP = [n for n, f in FAMILIES.items() if f.mcp]
TOOLSETS = {
    "echo_tool_env": ["echo_message", "echo_with_length"],
    "tool_qa_env": ["get_descriptions", "get_table_info", "sql_query", "submit_answer"],
}
CALLS = {
    "echo_tool_env": ("echo_message", {"message": "ping"}),
    "tool_qa_env": ("get_table_info", {"company_name": "acme", "table_name": "staff"}),
}


def _rpc(url: str, method: str, params: dict[str, Any]) -> Any:
    body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1})
    request = urllib.request.Request(
        url + "/mcp", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("side", ["native", "ours"])
@pytest.mark.parametrize("name", MCP)
def test_generic_lists_and_calls_the_tools(official, name, side) -> None:
    """The finqa shape: a CallToolAction subclass refuses the list_tools step, so the client
    lists over MCP; on either server, Generic-v0 lists every tool and calls them."""
    url = getattr(_served(official, name), side).url
    assert [t["name"] for t in fetch_schema(url)[TOOLS]] == TOOLSETS[name]
    env = gymnasium.make("openenv/Generic-v0", base_url=url)
    try:
        env.reset(seed=3)
        tool, arguments = CALLS[name]
        index = TOOLSETS[name].index(tool)
        action = env.action_space.sample()
        action["tool"] = index
        action["arguments"][tool] = arguments
        obs, *_ = env.step(action)
        assert obs["tool_name"] == tool
        assert not obs["is_error"]
    finally:
        env.close()


@pytest.mark.parametrize("side", ["native", "ours"])
def test_make_vec_and_trl_call_the_four_tools_of_the_finqa_shape(official, side) -> None:
    url = getattr(_served(official, "tool_qa_env"), side).url
    n = 1 if side == "native" else 3  # upstream's server takes one session of this class
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=n, base_url=url)
    try:
        assert envs.unwrapped.protocols == ("json",) if side == "native" else ("batch",)
        envs.reset(seed=list(range(n)))
        envs.action_space.seed(1)
        for tool in TOOLSETS["tool_qa_env"]:
            actions = envs.action_space.sample()
            actions["tool"][:] = TOOLSETS["tool_qa_env"].index(tool)
            obs, _, terminated, _, _ = envs.step(actions)
            if tool == "submit_answer":  # its reply is a plain Observation, as finqa's
                assert terminated.all()
            else:
                assert obs["tool_name"] == (tool,) * n
                assert not obs["is_error"].any()
    finally:
        envs.close()
    factory = environment_factory("openenv/Generic-v0", base_url=url)
    try:
        instance = factory()
        assert sorted(n for n in TOOLSETS["tool_qa_env"] if hasattr(instance, n)) == sorted(
            TOOLSETS["tool_qa_env"]
        )
        instance.reset(seed=3)
        assert "revenue" in instance.get_descriptions(company_name="acme")
        assert "columns" in instance.get_table_info(company_name="acme", table_name="staff")
        instance.submit_answer(answer="42")
        assert instance.done
    finally:
        factory.close()


@pytest.mark.parametrize("name", MCP)
def test_mcp_routes_answer_as_the_native_servers(official, name) -> None:
    served = _served(official, name)
    tool, arguments = CALLS[name]
    answers = {}
    for side in ("native", "ours"):
        url = getattr(served, side).url
        listed = _rpc(url, "tools/list", {})["result"]["tools"]
        called = _rpc(url, "tools/call", {"name": tool, "arguments": arguments})["result"]
        with connect(url.replace("http://", "ws://") + "/ws", proxy=None) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
            json.loads(ws.recv(timeout=30))
            step = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
            ws.send(json.dumps({"type": "step", "data": step}))
            stepped = json.loads(ws.recv(timeout=30))
        answers[side] = ([t["name"] for t in listed], _text(called), stepped["data"]["done"])
        assert stepped["type"] == "observation"
    assert answers["ours"] == answers["native"]
    assert answers["ours"][0] == TOOLSETS[name]


def _text(result: dict[str, Any]) -> list[str]:
    return [c.get("text") for c in result.get("content", [])]


# --------------------------------------------------------------------------- concurrency


def _pids(url: str, n: int) -> list[int]:
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=n, base_url=url)
    try:
        assert envs.unwrapped.protocols == ("batch",)
        _, info = envs.reset(seed=list(range(n)))
        return [int(p) for p in info["metadata"]["pid"]]
    finally:
        envs.close()


def test_a_class_not_marked_concurrent_gets_a_process_per_session(official) -> None:
    ours = _served(official, "grid_walk_env").ours
    pids = _pids(ours.url, 4)
    assert len(set(pids)) == 4
    assert ours.proc.pid not in pids
    workers = {p.pid for p in psutil.Process(ours.proc.pid).children(recursive=True)}
    assert set(pids) <= workers


def test_concurrent_hosts_them_all_in_the_server_process(fresh_server) -> None:
    server = fresh_server("--app-dir", str(ENVS / "grid_walk_env"), "--concurrent")
    assert _pids(server.url, 4) == [server.proc.pid] * 4


def test_app_in_the_older_layout_of_grid_world(fresh_server) -> None:
    """``--app envs.grid_walk_env.server.app:app`` from the parent of ``envs`` (PYTHONPATH),
    as upstream's older images run grid_world_env."""
    server = fresh_server("--app", "envs.grid_walk_env.server.app:app")
    assert len(set(_pids(server.url, 2))) == 2


def test_local_provider_starts_an_app_dir() -> None:
    envs = gymnasium.make_vec(
        "openenv/Catch-v0",
        num_envs=2,
        provider="local",
        app_dir=str(ENVS / "spiel_env"),
        start_timeout=300,  # the server imports OpenEnv (and Gradio): a bound, not a speed
    )
    try:
        assert envs.unwrapped.protocols == ("batch",)
        obs, _ = envs.reset(seed=[1, 2])
        assert obs.shape == (2, 50)
        envs.step(np.array([0, 2]))
    finally:
        envs.close()


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("json:dumps", "json:dumps is a builtins.function that no OpenEnv app factory"),
        ("interop_official:FAMILIES", "that no OpenEnv app factory"),
        ("interop_official:nothing_here", "has no attribute 'nothing_here'"),
        ("no_such_module_xyz:app", "cannot import 'no_such_module_xyz'"),
    ],
)
def test_a_module_that_builds_no_app_says_what_it_found(spec, message) -> None:
    with pytest.raises(AppError, match=re.escape(message)):
        load_app(AppTarget.parse(spec))


def test_serve_exits_2_with_the_reason(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "openenv_gym", "serve", "--app-dir", str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("openenv-gym: error: --app-dir")
    assert "is not a directory" in proc.stderr
