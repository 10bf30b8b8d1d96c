"""Awkward environment values over both endpoints: how they are serialised, and what an
environment that misbehaves (state raises, close raises) does to its session."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator

import pytest
from openenv_gym_test_envs import (
    LIFECYCLE,
    WHEN,
    OddEnv,
    OddObservation,
    PingAction,
    PingObservation,
    PingState,
    Shade,
)
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import ClientConnection, connect

from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame
from openenv_gym.runtime.loader import EnvModels


def json_ws(url: str) -> ClientConnection:
    return connect(url, compression=None, proxy=None, open_timeout=5)


def ask_json(ws: ClientConnection, frame: str) -> dict:
    ws.send(frame)
    return json.loads(ws.recv(timeout=5))


@contextlib.contextmanager
def batch_ws(url: str) -> Iterator[ClientConnection]:
    with connect(
        url, subprotocols=[SUBPROTOCOL], compression=None, proxy=None, open_timeout=5
    ) as ws:
        ws.send(encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "raw"}))
        assert decode_frame(ws.recv(timeout=5))["op"] == "hello"
        yield ws


def ask_batch(ws: ClientConnection, message: dict) -> dict:
    ws.send(encode_frame(message))
    return decode_frame(ws.recv(timeout=5))


def test_json_fields_are_written_as_pydantic_json_mode(env_server):
    running = env_server(OddEnv)
    with json_ws(running.ws()) as ws:
        reply = ask_json(ws, '{"type":"step","data":{"message":"odd"}}')
    expected = OddObservation(
        when=WHEN, shade=Shade.DARK, ident="00000000-0000-0000-0000-000000000007"
    )
    expected.metadata = {"at": WHEN}
    assert reply["type"] == "observation"
    # Exactly what OpenEnv's model_dump_json writes for the same observation.
    assert reply["data"]["observation"] == json.loads(
        expected.model_dump_json(exclude={"reward", "done"})
    )
    assert reply["data"]["observation"]["when"] == "2024-01-02T03:04:05"
    assert reply["data"]["observation"]["shade"] == "dark"
    assert reply["data"]["metadata"] == {"at": "2024-01-02T03:04:05"}


def test_json_rewards_as_pydantic_writes_them(env_server):
    running = env_server(OddEnv)
    with json_ws(running.ws()) as ws:
        ws.send('{"type":"reset"}')
        assert '"reward":1,' in ws.recv(timeout=5)  # an int stays an int
        ws.send('{"type":"step","data":{"message":"true"}}')
        assert '"reward":true,' in ws.recv(timeout=5)
        reply = ask_json(ws, '{"type":"step","data":{"message":"nan"}}')
        assert reply["type"] == "observation"
        assert reply["data"]["reward"] is None  # NaN is not JSON: null, as Pydantic writes it


def test_state_may_be_a_plain_dict(env_server):
    running = env_server(OddEnv)
    with json_ws(running.ws()) as ws:
        assert ask_json(ws, '{"type":"state"}') == {"type": "state", "data": {"plain": True}}
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0]})
        assert ask_batch(ws, {"op": "state", "id": 2, "slots": [0]})["state"] == [{"plain": True}]


def test_state_raising_is_an_execution_error(env_server):
    running = env_server(OddEnv)
    with json_ws(running.ws()) as ws:
        ask_json(ws, '{"type":"step","data":{"message":"break-state"}}')
        reply = ask_json(ws, '{"type":"state"}')
        assert reply == {
            "type": "error",
            "data": {"message": "state is broken", "code": "EXECUTION_ERROR"},
        }
        assert ask_json(ws, '{"type":"step","data":{"message":"x"}}')["type"] == "observation"
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0, 1]})
        ask_batch(ws, {"op": "step", "id": 2, "slots": [0], "args": [{"message": "break-state"}]})
        reply = ask_batch(ws, {"op": "state", "id": 3, "slots": [0, 1]})
        assert reply["errors"] == {0: ["EXECUTION_ERROR", "state is broken", {}]}
        assert reply["state"] == [None, {"plain": True}]


def test_batch_result_msgpack_cannot_carry_fails_only_its_slot(env_server):
    running = env_server(OddEnv)
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0, 1]})
        reply = ask_batch(
            ws,
            {
                "op": "step",
                "id": 2,
                "slots": [0, 1],
                "args": [{"message": "odd"}, {"message": "true"}],
            },
        )
        assert reply["op"] == "step"
        assert set(reply["errors"]) == {0}
        assert reply["errors"][0][0] == "EXECUTION_ERROR"
        assert reply["obs"][0] is None
        assert reply["reward"][1] == 1.0
        # The connection and both slots survive.
        reply = ask_batch(ws, {"op": "state", "id": 3, "slots": [0, 1]})
        assert "errors" not in reply


def test_batch_rewards_are_float64(env_server):
    running = env_server(OddEnv)
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0, 1, 2]})
        reply = ask_batch(
            ws,
            {
                "op": "step",
                "id": 2,
                "slots": [0, 1, 2],
                "args": [{"message": "true"}, {"message": "nan"}, {"message": "plain"}],
            },
        )
    assert reply["reward"][0] == 1.0
    assert reply["reward"][1] != reply["reward"][1]  # NaN
    assert reply["reward"][2] != reply["reward"][2]  # None -> NaN


def test_close_raising_still_frees_the_slot(env_server, caplog):
    running = env_server(OddEnv)
    caplog.set_level(logging.WARNING, logger="openenv_gym.runtime")
    with json_ws(running.ws()) as ws:
        ws.send('{"type":"close"}')
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=5)
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0, 1]})
        reply = ask_batch(ws, {"op": "close", "id": 2, "slots": [0]})
        assert "errors" not in reply
    assert LIFECYCLE.wait_closed(3)
    assert running.server.wait_active(0)
    assert any("close() raised" in r.getMessage() for r in caplog.records)


class _NoSeed:
    """An env whose ``reset`` takes no seed, made by a factory function (upstream's
    openspiel: ``create_app(create_openspiel_environment, ...)``, ``reset(self)``)."""

    def reset(self) -> PingObservation:
        return PingObservation(echoed="reset")

    def step(self, action: PingAction) -> PingObservation:
        return PingObservation(echoed=action.message)

    @property
    def state(self) -> PingState:
        return PingState()


def _make_no_seed() -> _NoSeed:
    return _NoSeed()


def test_reset_kwargs_a_factory_functions_instances_do_not_take_are_dropped(env_server):
    running = env_server(_make_no_seed, models=EnvModels(PingAction, PingObservation, PingState))
    with json_ws(running.ws()) as ws:
        reply = ask_json(ws, '{"type":"reset","data":{"seed":3,"episode_id":"e"}}')
        assert reply["type"] == "observation", reply
        assert reply["data"]["observation"]["echoed"] == "reset"
    with batch_ws(running.ws("/batch")) as ws:
        ask_batch(ws, {"op": "open", "id": 1, "slots": [0, 1]})
        reply = ask_batch(ws, {"op": "reset", "id": 2, "slots": [0, 1], "args": [{"seed": 1}] * 2})
        assert not reply.get("errors"), reply
