"""The same environment class behind OpenEnv's app and behind our server: the same wire.

:class:`openenv_counter_env.CounterEnvironment` is served by OpenEnv's ``create_app``
(uvicorn) and by ``openenv-gym serve --env``; a raw ``websockets`` client sends each frame
below to both, on a fresh session each time, and the replies (and whether the session
survives) must be equal, up to the differences ``docs/protocol.md`` and
``docs/compatibility.md`` document:

* our ``VALIDATION_ERROR`` entries carry no ``url`` key (Pydantic's link to its docs);
* our server always sends ``metadata`` as openenv >= 0.4 does; openenv-core 0.3.0 drops it;
* a JSON frame that is not an object: OpenEnv ends the session (``SESSION_ERROR``), we
  answer ``UNKNOWN_TYPE`` and keep it (asserted separately).

HTTP: ``/health`` and ``/metadata`` are equal; ``/schema`` has the same ``action`` and
``observation``; ``state`` is the env's state model except from OpenEnv 0.3.0, which
always reports the base ``State``; OpenEnv >= 0.8 adds ``reset_observation``, which we do
not send (OpenEnv's own validator reads it as absent = the step observation's schema).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("openenv")

from interop_support import OPENENV_VERSION, WIRE_METADATA, Server, get_json
from openenv.core.env_server.types import State
from openenv_counter_env import CounterObservation
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

pytestmark = pytest.mark.openenv

SPEC = "openenv_counter_env:CounterEnvironment"
PREFIX = {"type": "reset", "data": {"seed": 1, "episode_id": "wire"}}

FRAMES = {
    "reset": json.dumps({"type": "reset", "data": {"seed": 5, "episode_id": "e"}}),
    "reset-kwargs": json.dumps({"type": "reset", "data": {"start": 2, "unknown": 1}}),
    "reset-negative-seed": json.dumps({"type": "reset", "data": {"seed": -5}}),
    "reset-string-seed": json.dumps({"type": "reset", "data": {"seed": "abc"}}),
    "step": json.dumps({"type": "step", "data": {"delta": 1}}),
    "step-lax-int": json.dumps({"type": "step", "data": {"delta": "1"}}),
    "step-with-metadata": json.dumps({"type": "step", "data": {"delta": 1, "metadata": {"a": 1}}}),
    "state": json.dumps({"type": "state"}),
    "invalid-json": "{not json",
    "unknown-type": json.dumps({"type": "bogus"}),
    "no-type": json.dumps({}),
    "step-without-data": json.dumps({"type": "step"}),
    "step-out-of-range": json.dumps({"type": "step", "data": {"delta": 9}}),
    "step-extra-field": json.dumps({"type": "step", "data": {"delta": 1, "x": 1}}),
    "step-wrong-type": json.dumps({"type": "step", "data": {"delta": "left"}}),
    "env-raises": json.dumps({"type": "step", "data": {"delta": -2}}),
    "reset-extra-key": json.dumps({"type": "reset", "extra": 1}),
    "reset-null-data": json.dumps({"type": "reset", "data": None}),
    "state-with-data": json.dumps({"type": "state", "data": {"a": 1}}),
}


@pytest.fixture(scope="module")
def servers(shared_app, shared_server) -> dict[str, Server]:
    return {"openenv": shared_app("counter"), "ours": shared_server("--env", SPEC)}


def exchange(server: Server, frame: str) -> tuple[Any, bool]:
    """(reply to ``frame`` after a reset, whether the session is still alive after it)."""
    with connect(server.ws_url, open_timeout=10) as ws:
        ws.send(json.dumps(PREFIX))
        json.loads(ws.recv(timeout=10))
        ws.send(frame)
        reply = json.loads(ws.recv(timeout=10))
        try:
            ws.send(json.dumps({"type": "state"}))
            alive = json.loads(ws.recv(timeout=10))["type"] == "state"
        except ConnectionClosed:
            alive = False
        return reply, alive


def without_url(reply: dict[str, Any]) -> dict[str, Any]:
    """OpenEnv's reply without Pydantic's ``url`` in VALIDATION_ERROR entries."""
    data = reply.get("data")
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        data["errors"] = [{k: v for k, v in e.items() if k != "url"} for e in data["errors"]]
    return reply


def as_this_line(reply: dict[str, Any]) -> dict[str, Any]:
    """Our reply as the installed OpenEnv line would send it (0.3.x: no metadata)."""
    data = reply.get("data")
    if not WIRE_METADATA and reply.get("type") == "observation":
        data.pop("metadata", None)
        data["observation"].pop("metadata", None)
    return reply


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_same_reply(servers, name):
    theirs, their_alive = exchange(servers["openenv"], FRAMES[name])
    ours, our_alive = exchange(servers["ours"], FRAMES[name])
    assert as_this_line(ours) == without_url(theirs)
    assert our_alive is their_alive is True


def test_close_frame(servers):
    for server in servers.values():
        with connect(server.ws_url, open_timeout=10) as ws:
            ws.send(json.dumps(PREFIX))
            ws.recv(timeout=10)
            ws.send(json.dumps({"type": "close"}))  # no reply: the server closes
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=10)
            assert ws.close_code == 1000


def test_non_object_frame_documented_difference(servers):
    theirs, their_alive = exchange(servers["openenv"], "[1, 2]")
    assert theirs["data"]["code"] == "SESSION_ERROR"
    assert their_alive is False
    ours, our_alive = exchange(servers["ours"], "[1, 2]")
    assert ours == {
        "type": "error",
        "data": {"message": "Unknown message type: ", "code": "UNKNOWN_TYPE"},
    }
    assert our_alive is True


def test_http_endpoints(servers):
    theirs = {
        p: get_json(servers["openenv"].url + p)[1] for p in ("/health", "/schema", "/metadata")
    }
    ours = {p: get_json(servers["ours"].url + p)[1] for p in ("/health", "/schema", "/metadata")}
    assert ours["/health"] == theirs["/health"] == {"status": "healthy"}
    assert ours["/metadata"] == theirs["/metadata"]
    assert ours["/schema"]["action"] == theirs["/schema"]["action"]
    assert ours["/schema"]["observation"] == theirs["/schema"]["observation"]
    if OPENENV_VERSION >= (0, 4):  # create_app(state_cls=...)
        assert ours["/schema"]["state"] == theirs["/schema"]["state"]
    else:  # 0.3.0 always reports the base State
        assert theirs["/schema"]["state"] == State.model_json_schema()
    if OPENENV_VERSION >= (0, 8):
        reset_schema = theirs["/schema"].pop("reset_observation")
        assert reset_schema == CounterObservation.model_json_schema()
    assert set(ours["/schema"]) == set(theirs["/schema"]) == {"action", "observation", "state"}


def test_openenv_validate(servers):
    """OpenEnv's own runtime probe (``openenv validate --url``): both servers pass every
    criterion, and both are read as simulation mode (``test_interop_http_api.py`` runs the
    command against every server we ship, in both modes)."""
    from openenv.cli._validation import validate_running_environment

    def verdicts(server: Server) -> tuple[str, dict[str, bool]]:
        report = validate_running_environment(server.url, timeout_s=10.0)
        return report["mode"], {c["id"]: c["passed"] for c in report["criteria"]}

    theirs, ours = verdicts(servers["openenv"]), verdicts(servers["ours"])
    assert ours == theirs
    assert ours[0] == "simulation"
    assert all(ours[1].values())
