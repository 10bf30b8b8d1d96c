"""Instances are built off the event loop: a slow constructor stalls no other client.

Upstream TextArena's constructor takes seconds. The server builds every instance on a
thread of its builder pool (``EnvCalls.build``), whichever endpoint asked for it (``/batch``
``open``, a ``/ws`` connection, ``POST /reset``), and calls it on the event loop as always;
a class marked ``REQUIRES_SINGLE_THREAD_EXECUTOR`` keeps every call, its constructor's
included, on the loop's thread. Each check waits for the events themselves, with a deadline
that only stops a hang.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from openenv_gym_test_envs import LIFECYCLE, PingAction, PingEnv, PingObservation, RunningServer
from websockets.sync.client import connect

from openenv_gym.protocol import batch as bp
from openenv_gym.transport.session import open_session

HANG = 30.0
"""Only stops a hang: nothing here waits on a clock otherwise."""


class GatedEnv(PingEnv):
    """PingEnv whose constructor, once :attr:`gated`, waits for :attr:`gate` (no sleep).

    It says it has begun by setting :attr:`entered`; the test opens the gate when it has
    seen what it waits for. The start-up probe and the sessions opened before the gate
    closes are built at once.
    """

    gated: ClassVar[bool] = False
    gate: ClassVar[threading.Event] = threading.Event()
    entered: ClassVar[threading.Event] = threading.Event()
    built_on: ClassVar[list[str]] = []
    stepped_on: ClassVar[list[str]] = []

    def __init__(self) -> None:
        type(self).built_on.append(threading.current_thread().name)
        if type(self).gated:
            type(self).entered.set()
            if not type(self).gate.wait(HANG):
                raise RuntimeError("the test never opened the gate")
        super().__init__()

    def step(self, action: PingAction) -> PingObservation:
        """PingEnv's step, noting the thread it runs on."""
        type(self).stepped_on.append(threading.current_thread().name)
        return super().step(action)


class PinnedEnv(GatedEnv):
    """As :class:`GatedEnv`, but bound to one thread (OpenEnv's flag)."""

    REQUIRES_SINGLE_THREAD_EXECUTOR: ClassVar[bool] = True


@pytest.fixture(autouse=True)
def _gate_open() -> Iterator[None]:
    """Every test starts with the gate open and ungated, and leaves it open (no hang)."""
    for kind in (GatedEnv, PinnedEnv):
        kind.gated = False
        kind.built_on.clear()
        kind.stepped_on.clear()
    GatedEnv.gate.clear()
    GatedEnv.entered.clear()
    yield
    GatedEnv.gated = False
    GatedEnv.gate.set()


def _post(server: RunningServer, path: str, payload: Any) -> Any:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=HANG) as response:
        return json.loads(response.read())


def _open_and_reset(server: RunningServer, how: str) -> Any:
    """One session over ``how`` and its first reset.

    ``http``: a stateless POST /reset; ``mcp``: an MCP session made and closed (POST /mcp
    builds its instance as the other endpoints do).
    """
    if how == "http":
        return _post(server, "/reset", {"seed": 1})["observation"]["echoed"]
    if how == "mcp":
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
        made = _post(server, "/mcp", rpc)["result"]["session_id"]
        rpc = {"jsonrpc": "2.0", "id": 2, "method": "openenv/session/close"}
        closed = _post(server, "/mcp", {**rpc, "params": {"session_id": made}})["result"]
        return "ready seed=1" if closed["closed"] else closed
    session = open_session(server.url, protocol=how)
    try:
        return session.reset(seed=1).observation["echoed"]
    finally:
        session.close()


def _one_step(server: RunningServer, how: str) -> None:
    session = open_session(server.url, protocol=how)
    try:
        session.reset(seed=0)
        session.step({"message": "hi"})
    finally:
        session.close()


def _in_thread(run: Callable[[], Any]) -> tuple[threading.Event, list[Any]]:
    """Run ``run`` on a thread; an event set when it returned or raised, and what it gave."""
    done, out = threading.Event(), []

    def target() -> None:
        try:
            out.append(run())
        except BaseException as exc:
            out.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, daemon=True).start()
    return done, out


@pytest.mark.parametrize("how", ["batch", "json", "http", "mcp"])
def test_a_slow_constructor_does_not_stall_another_clients_steps(
    env_server: Callable[..., RunningServer], how: str
) -> None:
    server = env_server(GatedEnv)
    other = open_session(server.url, protocol="batch")
    try:
        other.reset(seed=0)
        GatedEnv.gated = True
        slow_done, slow_out = _in_thread(lambda: _open_and_reset(server, how))
        assert GatedEnv.entered.wait(HANG), "the slow session's constructor never began"
        stepped, stepped_out = _in_thread(
            lambda: [other.step({"message": f"m{k}"}).observation["echoed"] for k in range(5)]
        )
        # the other client steps while the constructor still waits: before the fix the
        # event loop was inside that constructor and no step could be answered
        assert stepped.wait(HANG), "another client's steps stalled behind a constructor"
        assert stepped_out == [[f"m{k}" for k in range(5)]]
        assert not slow_done.is_set(), slow_out
        GatedEnv.gate.set()
        assert slow_done.wait(HANG)
        assert slow_out == ["ready seed=1"]
    finally:
        GatedEnv.gate.set()
        other.close()
    assert server.server.wait_active(0, HANG)


def test_instances_are_built_off_the_loop_and_called_on_it(
    env_server: Callable[..., RunningServer],
) -> None:
    server = env_server(GatedEnv)
    GatedEnv.built_on.clear()
    _one_step(server, "batch")
    (built,) = GatedEnv.built_on
    (stepped,) = GatedEnv.stepped_on
    assert built.startswith("openenv-gym-build")
    assert stepped == "test-server"  # the server's event loop thread (openenv_gym_test_envs)


@pytest.mark.parametrize("how", ["batch", "json"])
def test_a_class_bound_to_one_thread_is_built_on_the_loop(
    env_server: Callable[..., RunningServer], how: str
) -> None:
    server = env_server(PinnedEnv)
    PinnedEnv.built_on.clear()
    _one_step(server, how)
    assert PinnedEnv.built_on == PinnedEnv.stepped_on == ["test-server"]


@pytest.mark.parametrize("path", ["/batch", "/ws"])
def test_a_client_gone_while_its_instance_is_built_frees_it_once_built(
    env_server: Callable[..., RunningServer], path: str
) -> None:
    server = env_server(GatedEnv, max_sessions=1)
    GatedEnv.gated = True
    subprotocols = [bp.SUBPROTOCOLS[bp.PROTOCOL_VERSION]] if path == "/batch" else None
    with connect(server.ws(path), subprotocols=subprotocols, proxy=None) as ws:  # type: ignore[arg-type]
        if path == "/batch":  # /ws builds its instance on the upgrade
            ws.send(bp.encode_frame({"op": "hello", "id": 0, "versions": [bp.PROTOCOL_VERSION]}))
            ws.recv(timeout=HANG)
            ws.send(bp.encode_frame({"op": "open", "id": 1, "slots": [0]}))
        assert GatedEnv.entered.wait(HANG)
        assert server.server.wait_active(1, HANG)  # its slot is held while it is built
    # the client is gone before its instance exists; then the constructor returns
    GatedEnv.gate.set()
    assert LIFECYCLE.wait_closed(1, HANG)  # the instance is closed once built
    assert server.server.wait_active(0, HANG)  # and its slot freed
    assert LIFECYCLE.created == 1


def test_builds_in_flight_hold_their_slots_so_a_peer_queues_no_more(
    env_server: Callable[..., RunningServer],
) -> None:
    # two sessions at most: one peer asks for three while the constructor waits
    server = env_server(GatedEnv, max_sessions=2)
    GatedEnv.gated = True
    subprotocols = [bp.SUBPROTOCOLS[bp.PROTOCOL_VERSION]]
    with connect(server.ws("/batch"), subprotocols=subprotocols, proxy=None) as ws:  # type: ignore[arg-type]
        ws.send(bp.encode_frame({"op": "hello", "id": 0, "versions": [bp.PROTOCOL_VERSION]}))
        ws.recv(timeout=HANG)
        ws.send(bp.encode_frame({"op": "open", "id": 1, "slots": [0, 1, 2]}))
        assert GatedEnv.entered.wait(HANG)
        assert server.server.wait_active(2, HANG)  # two builds asked for, two slots held
        # every endpoint is refused at once while the builds wait: nothing more is queued
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(server, "/reset", {})
        assert refused.value.code == 503
        with connect(server.ws("/ws"), proxy=None) as other:
            assert json.loads(other.recv(timeout=HANG))["data"]["code"] == "CAPACITY_REACHED"
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}
        assert _post(server, "/mcp", rpc)["error"]["code"] == -32000
        assert not GatedEnv.gate.is_set()
        GatedEnv.gate.set()
        reply = bp.decode_frame(ws.recv(timeout=HANG))
    assert reply["op"] == "open"
    assert list(reply["errors"]) == [2]  # the third slot, refused for capacity
    assert reply["errors"][2][0] == "CAPACITY_REACHED"
    assert LIFECYCLE.wait_closed(2, HANG)
    assert LIFECYCLE.created == 2
    assert server.server.wait_active(0, HANG)
