"""OpenEnv's official clients against OUR server (``openenv-gym serve echo|wordle|catch``).

Clients: ``GenericEnvClient`` (async, and ``.sync()``) and a typed ``EnvClient`` subclass
(:class:`EchoClient`). Every error code our server can send over ``/ws`` is provoked: those
the client API cannot send (bad JSON, a binary frame) go as raw frames on the client's own
socket (``client._ws``, the same attribute in both lines).

Version differences asserted here (not skipped):

* ``StepResult.metadata`` exists from openenv 0.4; 0.3.0's ``StepResult`` has no such field.
  (Our server always sends ``metadata``, inside ``observation`` and at the top level, as
  openenv >= 0.4 servers do, so 0.3.0 clients still find it in ``observation``.)
* A plain ``with client:`` works from 0.4 (sync/async dispatch); 0.3.0 raises ``TypeError``
  (async only, ``.sync()`` for blocking use).
* A session the server refused (CAPACITY_REACHED, FACTORY_ERROR) is pushed as an error
  frame followed by a close. The 0.10 client reads that frame and raises
  ``RuntimeError("Server error: ... (code: CAPACITY_REACHED)")``; 0.3.0 raises the bare
  ``websockets`` ``ConnectionClosedOK`` from its send on the closed socket (the reason is
  lost). The tests wait until the socket is closed first, so each version's outcome is
  deterministic.
* A socket the server closed (SESSION_ERROR) is dropped and replaced by the >= 0.5 client
  on its next call (a new session); 0.3.0 keeps it and raises ``ConnectionClosed``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

pytest.importorskip("openenv")

from interop_support import OPENENV_VERSION, WIRE_METADATA, Server
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

from openenv_gym.runtime.environment import State
from openenv_gym_servers.catch import CatchAction, CatchEnvironment
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation
from openenv_gym_servers.wordle import WordleAction, WordleEnvironment

pytestmark = pytest.mark.openenv

AUTO_DISPATCH = OPENENV_VERSION >= (0, 4)
"""openenv >= 0.4: client methods are sync or async by call site; ``with`` works."""

RECONNECTS = OPENENV_VERSION >= (0, 5)
"""openenv >= 0.5 (PR #1103): a socket closed by the server is replaced on the next call."""


class EchoClient(EnvClient[EchoAction, EchoObservation, State]):
    """A typed client for our Echo, written as OpenEnv's env packages write theirs."""

    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        reward, done = payload.get("reward"), payload.get("done", False)
        observation = EchoObservation.model_validate(
            {**payload["observation"], "reward": reward, "done": done}
        )
        extra = {"metadata": payload.get("metadata")} if WIRE_METADATA else {}
        return StepResult(observation=observation, reward=reward, done=done, **extra)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State.model_validate(payload)


def wire_fields(obs: Any) -> dict[str, Any]:
    """An observation's ``observation`` payload, as OpenEnv (>= 0.4) and our server send it."""
    return obs.model_dump(mode="json", exclude={"reward", "done"})


async def wait_closed(client: Any) -> None:
    async with asyncio.timeout(10.0):
        await client._ws.wait_closed()


def connect_when_free(url: str, deadline: float = 10.0) -> None:
    """A new session can reset as soon as the server has released the last slot."""

    async def attempt() -> bool:
        client = GenericEnvClient(base_url=url)
        try:
            await client.connect()
            await client.reset()
            return True
        except (RuntimeError, ConnectionClosed):
            return False
        finally:
            await client.close()

    end = time.monotonic() + deadline
    while not asyncio.run(attempt()):
        assert time.monotonic() < end, "the slot was never released"
        time.sleep(0.05)


# --------------------------------------------------------------------- the happy path


def test_generic_client_async(shared_server):
    url = shared_server("echo").url

    async def scenario() -> None:
        client = GenericEnvClient(base_url=url)
        async with client:
            result = await client.reset(seed=1, episode_id="ep-1")
            assert result.observation["echoed_message"] == "Echo environment ready!"
            assert (result.reward, result.done) == (0.0, False)
            result = await client.step({"message": "hi"})
            assert result.observation["echoed_message"] == "hi"
            assert result.observation["message_length"] == 2
            assert result.reward == pytest.approx(0.2)
            metadata = {"original_message": "hi", "step": 1}
            assert result.observation["metadata"] == metadata
            if WIRE_METADATA:
                assert result.metadata == metadata
            else:
                assert not hasattr(result, "metadata")  # 0.3.0: no such field
            assert await client.state() == {"episode_id": "ep-1", "step_count": 1}
        assert client._ws is None  # closed (after sending {"type": "close"})

    asyncio.run(scenario())


def test_generic_client_sync(shared_server):
    url = shared_server("echo").url
    with GenericEnvClient(base_url=url).sync() as client:
        assert client.reset(episode_id="s").observation["echoed_message"] == (
            "Echo environment ready!"
        )
        result = client.step({"message": "sync"})
        assert (result.observation["echoed_message"], result.done) == ("sync", False)
        assert client.state() == {"episode_id": "s", "step_count": 1}


@pytest.mark.parametrize("compression", [False, True])
def test_compression(shared_server, compression):
    """The official client offers permessage-deflate; we accept it only with --compression."""
    url = shared_server("wordle", *(["--compression"] if compression else [])).url

    async def scenario() -> None:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(seed=3)
            result = await client.step({"message": "[crane]"})
            assert result.observation["messages"]
            extensions = [type(e).__name__ for e in client._ws.protocol.extensions]
            assert extensions == (["PerMessageDeflate"] if compression else [])

    asyncio.run(scenario())


def test_plain_with_statement(shared_server):
    url = shared_server("echo").url
    client = GenericEnvClient(base_url=url)
    if AUTO_DISPATCH:
        with client:
            assert client.step({"message": "plain"}).observation["echoed_message"] == "plain"
    else:  # 0.3.0: async only
        with pytest.raises(TypeError, match="async by default"), client:
            pass


def test_typed_client(shared_server):
    url = shared_server("echo").url
    with EchoClient(base_url=url).sync() as client:
        result = client.reset(episode_id="typed")
        assert isinstance(result.observation, EchoObservation)
        assert result.observation.echoed_message == "Echo environment ready!"
        result = client.step(EchoAction(message="hey"))
        assert result.observation == EchoObservation(
            echoed_message="hey",
            message_length=3,
            reward=result.reward,
            done=False,
            metadata={"original_message": "hey", "step": 1},
        )
        assert result.reward == pytest.approx(0.3)
        if WIRE_METADATA:
            assert result.metadata == {"original_message": "hey", "step": 1}
        state = client.state()
        assert isinstance(state, State)
        assert (state.episode_id, state.step_count) == ("typed", 1)


def test_typed_client_async(shared_server):
    url = shared_server("echo").url

    async def scenario() -> None:
        async with EchoClient(base_url=url) as client:
            await client.reset()
            result = await client.step(EchoAction(message="async"))
            assert result.observation.echoed_message == "async"
            assert (await client.state()).step_count == 1

    asyncio.run(scenario())


CASES = {
    "echo": (EchoEnvironment, [EchoAction(message="hi"), EchoAction(message="there")]),
    "wordle": (WordleEnvironment, [WordleAction(message="[crane]"), WordleAction(message="x")]),
    "catch": (CatchEnvironment, [CatchAction(action_id=0), CatchAction(action_id=2)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_as_in_process(shared_server, name):
    """What the official client reads is exactly what the environment made."""
    env_cls, actions = CASES[name]
    url = shared_server(name).url
    local = env_cls()
    with GenericEnvClient(base_url=url).sync() as client:
        expected = local.reset(seed=11, episode_id="same")
        result = client.reset(seed=11, episode_id="same")
        assert result.observation == wire_fields(expected)
        assert (result.reward, result.done) == (expected.reward, expected.done)
        for action in actions:
            expected = local.step(action)
            result = client.step(action)  # a Pydantic action: GenericEnvClient dumps it
            assert result.observation == wire_fields(expected)
            assert (result.reward, result.done) == (expected.reward, expected.done)
        assert client.state() == local.state.model_dump(mode="json")


# --------------------------------------------------------------------------- errors


def test_error_codes_keep_the_session(shared_server):
    url = shared_server("catch").url

    async def scenario() -> None:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(seed=0)
            # INVALID_JSON: the client API only sends JSON, so a raw frame on its socket
            await client._ws.send("{not json")
            frame = await client._receive()
            assert frame["type"] == "error"
            assert frame["data"]["code"] == "INVALID_JSON"
            assert frame["data"]["message"].startswith("Invalid JSON")
            # UNKNOWN_TYPE: a well-formed message of no known type, via the client's own path
            with pytest.raises(
                RuntimeError, match=r"Unknown message type: bogus \(code: UNKNOWN_TYPE\)"
            ):
                await client._send_and_receive({"type": "bogus"})
            # VALIDATION_ERROR: public API, with Pydantic's error list on the wire
            with pytest.raises(RuntimeError, match=r"\(code: VALIDATION_ERROR\)"):
                await client.step({"action_id": "left"})
            with pytest.raises(RuntimeError, match=r"\(code: VALIDATION_ERROR\)"):
                await client.step({"action_id": 1, "extra": True})
            await client._ws.send(json.dumps({"type": "step", "data": {"action_id": "left"}}))
            frame = await client._receive()
            assert frame["data"]["code"] == "VALIDATION_ERROR"
            assert frame["data"]["errors"][0]["loc"] == ["action_id"]
            # EXECUTION_ERROR: the environment raised
            with pytest.raises(
                RuntimeError, match=r"illegal action_id .*\(code: EXECUTION_ERROR\)"
            ):
                await client.step({"action_id": 7})
            # the session survived every one of them, with nothing applied
            assert (await client.state())["step_count"] == 0
            result = await client.step({"action_id": 1})
            assert result.observation["game_phase"] == "playing"
            assert (await client.state())["step_count"] == 1

    asyncio.run(scenario())


def test_session_error_closes_the_session(shared_server):
    url = shared_server("echo").url

    async def scenario() -> None:
        client = GenericEnvClient(base_url=url)
        async with client:
            await client.reset(episode_id="before")
            await client._ws.send(b"\x00binary")  # OpenEnv's /ws speaks text frames only
            frame = await client._receive()
            assert frame["data"]["code"] == "SESSION_ERROR"
            await wait_closed(client)
            if RECONNECTS:  # a fresh socket: a fresh session, no episode yet
                assert await client.state() == {"episode_id": None, "step_count": 0}
            else:
                with pytest.raises(ConnectionClosed):
                    await client.state()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("serve_args", "code"),
    [
        (("echo", "--max-sessions", "1"), "CAPACITY_REACHED"),
        (("--env", "interop_support:FailAfterFirst"), "FACTORY_ERROR"),
    ],
)
def test_refused_session(fresh_server, serve_args, code):
    server: Server = fresh_server(*serve_args)
    capacity = code == "CAPACITY_REACHED"

    async def refuse() -> None:
        refused = GenericEnvClient(base_url=server.url)
        try:
            await refused.connect()  # the upgrade is accepted; the refusal comes pushed
            frame = json.loads(await refused._ws.recv())
            assert frame["type"] == "error"
            assert frame["data"]["code"] == code
            if capacity:
                assert frame["data"]["active_sessions"] == 1
                assert frame["data"]["max_sessions"] == 1
            else:
                assert frame["data"]["factory_name"] == "failafterfirst"
                assert "constructor exploded" in frame["data"]["message"]
            await wait_closed(refused)
            assert refused._ws.close_code == 1000
            # how each client line surfaces it on the next call
            if RECONNECTS:
                with pytest.raises(RuntimeError, match=rf"\(code: {code}\)"):
                    await refused.reset()
            else:
                with pytest.raises(ConnectionClosedOK):
                    await refused.reset()
        finally:
            await refused.close()

    async def scenario() -> None:
        if not capacity:
            await refuse()
            return
        holder = GenericEnvClient(base_url=server.url)
        async with holder:
            await holder.reset()  # holds the only slot
            await refuse()
            result = await holder.step({"message": "still here"})
            assert result.observation["echoed_message"] == "still here"

    asyncio.run(scenario())
    if capacity:
        connect_when_free(server.url)


def test_close_is_clean(fresh_server):
    server = fresh_server("echo", "--max-sessions", "1")

    async def scenario() -> None:
        client = GenericEnvClient(base_url=server.url)
        await client.connect()
        await client.reset()
        await client._send({"type": "close"})  # no reply; the server closes with 1000
        await wait_closed(client)
        assert client._ws.close_code == 1000
        await client.close()

    asyncio.run(scenario())
    connect_when_free(server.url)  # and the slot is free again
