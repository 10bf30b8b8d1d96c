"""The sync facade ``open_session`` over both wire protocols, against a real EnvServer."""

from __future__ import annotations

import pytest
from openenv_gym_test_envs import LIFECYCLE, FailAfterProbe, OddEnv

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    CapacityError,
    ConfigurationError,
    ConnectError,
    ExecutionError,
    FactoryError,
    InvalidActionError,
    ServerError,
    ServerValidationError,
    UsageError,
)
from openenv_gym.transport.session import open_session

TIMEOUTS = Timeouts(connect=5.0, step=5.0, close=5.0)
PROTOCOLS = ["batch", "json"]


def open_and_reset(url: str, protocol: str) -> None:
    """Open a session and reset it (a server may refuse at either point), then close it."""
    session = open_session(url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        session.reset()
    finally:
        session.close()


@pytest.fixture(params=PROTOCOLS)
def protocol(request):
    return request.param


def test_auto_picks_batch_on_our_server(ping_server):
    session = open_session(ping_server.url, protocol="auto", timeouts=TIMEOUTS)
    try:
        assert session.protocol == "batch"
        assert session.reset(seed=1).observation["echoed"] == "ready seed=1"
    finally:
        session.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_explicit_protocol_is_used(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        assert session.protocol == protocol
    finally:
        session.close()


def test_protocol_from_environment_variable(ping_server, monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_PROTOCOL", "json")
    session = open_session(ping_server.url, timeouts=TIMEOUTS)
    try:
        assert session.protocol == "json"
    finally:
        session.close()


def test_bad_protocol_name_is_a_configuration_error(ping_server):
    with pytest.raises(ConfigurationError, match="protocol must be"):
        open_session(ping_server.url, protocol="grpc", timeouts=TIMEOUTS)


def test_reset_step_state_close(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        reply = session.reset(seed=7, episode_id="ep-9", ignored="dropped by the server")
        assert reply.observation["echoed"] == "ready seed=7"
        assert reply.reward is None  # null on the wire, NaN in the batched column
        assert reply.done is False
        assert reply.metadata is None

        reply = session.step({"message": "hello"})
        assert reply.observation["echoed"] == "hello"
        assert reply.observation["length"] == 5
        assert reply.reward == 2.5
        assert reply.done is False
        assert reply.metadata == {"step": 1}

        assert session.step({"message": "done"}).done is True
        assert session.state() == {"episode_id": "ep-9", "step_count": 2, "last": "done"}
        assert not session.closed
    finally:
        session.close()
    assert session.closed
    assert LIFECYCLE.wait_closed(1)
    assert ping_server.server.wait_active(0)


def test_same_replies_over_both_protocols(ping_server):
    def run(protocol: str) -> list:
        session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
        try:
            replies = [session.reset(seed=3)]
            replies += [session.step({"message": m}) for m in ("a", "bb", "done")]
            out = [
                # Over /ws the observation also carries its own ``metadata`` field, as
                # openenv >= 0.4 sends it; the batched protocol sends it once, beside.
                (
                    {k: v for k, v in r.observation.items() if k != "metadata"},
                    r.reward,
                    r.done,
                    r.metadata,
                )
                for r in replies
            ]
            return [*out, session.state()]
        finally:
            session.close()

    assert run("batch") == run("json")


def test_validation_error_keeps_session(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        session.reset()
        with pytest.raises(ServerValidationError) as info:
            session.step({"message": "x", "bogus": 1})
        error = info.value
        assert isinstance(error, InvalidActionError)
        assert isinstance(error, ValueError)
        assert error.code == "VALIDATION_ERROR"
        assert error.session_closed is False
        assert [e["type"] for e in error.details["errors"]] == ["extra_forbidden"]
        assert not session.closed
        assert session.step({"message": "fine"}).observation["echoed"] == "fine"
    finally:
        session.close()


def test_execution_error_keeps_session(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        with pytest.raises(ExecutionError, match="boom: step raised") as info:
            session.step({"message": "raise"})
        assert info.value.code == "EXECUTION_ERROR"
        assert info.value.session_closed is False
        assert not session.closed
        assert session.step({"message": "again"}).metadata == {"step": 1}
        assert session.state()["step_count"] == 1
    finally:
        session.close()


def test_state_error_keeps_session(env_server, protocol):
    running = env_server(OddEnv)
    session = open_session(running.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        assert session.state() == {"plain": True}
        session.step({"message": "break-state"})
        with pytest.raises(ExecutionError, match="state is broken"):
            session.state()
        assert not session.closed
        assert session.step({"message": "true"}).reward == 1.0
    finally:
        session.close()


def test_capacity_error(env_server, protocol):
    running = env_server(max_sessions=1)
    holder = open_session(running.url, protocol=protocol, timeouts=TIMEOUTS)
    try:
        holder.reset()
        # Over /ws the server accepts the upgrade and sends CAPACITY_REACHED unsolicited;
        # the client reads it as the answer to its first request.
        with pytest.raises(CapacityError) as info:
            open_and_reset(running.url, protocol)
        assert info.value.session_closed is True
        assert info.value.details["max_sessions"] == 1
        assert info.value.details["active_sessions"] == 1
    finally:
        holder.close()
    assert running.server.wait_active(0)
    open_and_reset(running.url, protocol)


def test_capacity_error_over_json_closes_the_session(env_server):
    running = env_server(max_sessions=1)
    holder = open_session(running.url, protocol="json", timeouts=TIMEOUTS)
    try:
        holder.reset()
        refused = open_session(running.url, protocol="json", timeouts=TIMEOUTS)
        try:
            with pytest.raises(CapacityError):
                refused.reset()
            assert refused.closed
            with pytest.raises(UsageError):
                refused.step({"message": "x"})
        finally:
            refused.close()
    finally:
        holder.close()


def test_factory_error(env_server, protocol):
    running = env_server(FailAfterProbe(), models=FailAfterProbe.models)
    with pytest.raises(FactoryError, match="constructor exploded") as info:
        open_and_reset(running.url, protocol)
    assert isinstance(info.value, ServerError)
    assert info.value.details == {"factory_name": "fail_after_probe"}
    assert running.server.wait_active(0)


def test_close_is_idempotent(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    session.reset()
    session.close()
    session.close()
    assert session.closed
    for call in (session.reset, session.state, lambda: session.step({"message": "x"})):
        with pytest.raises(UsageError):
            call()
    session.close()
    assert LIFECYCLE.wait_closed(1)
    assert ping_server.server.wait_active(0)


def test_close_without_any_request(ping_server, protocol):
    session = open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS)
    session.close()
    assert session.closed
    assert ping_server.server.wait_active(0)


def test_many_sessions_share_the_loop(ping_server, protocol):
    sessions = [
        open_session(ping_server.url, protocol=protocol, timeouts=TIMEOUTS) for _ in range(6)
    ]
    try:
        for i, session in enumerate(sessions):
            session.reset(episode_id=f"ep-{i}")
        for i, session in enumerate(sessions):
            for _ in range(i):
                session.step({"message": "m"})
        assert [s.state()["step_count"] for s in sessions] == list(range(6))
        assert [s.state()["episode_id"] for s in sessions] == [f"ep-{i}" for i in range(6)]
        assert ping_server.server.active == 6
    finally:
        for session in sessions:
            session.close()
    assert ping_server.server.wait_active(0)


def test_headers_are_sent_with_the_upgrade(ws_server, protocol):
    seen = []

    def record(connection, request):
        seen.append(request.headers.get("Authorization"))
        return connection.respond(403, "forbidden\n")

    async def handler(ws):  # never reached: every upgrade is refused
        await ws.close()

    url = ws_server(handler, process_request=record)
    with pytest.raises(ConnectError):
        open_session(
            url, protocol=protocol, timeouts=TIMEOUTS, headers={"Authorization": "Bearer t"}
        )
    assert seen
    assert set(seen) == {"Bearer t"}
