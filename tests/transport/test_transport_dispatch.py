"""``Dispatcher`` over ``BatchShard`` and ``JsonShard``, against real ``EnvServer``s.

Each server runs in-process on a thread of its own (the ``env_server`` fixture) and hosts
the Echo environment, or :class:`SlowEcho`, whose ``step`` blocks the server (its event
loop) on a message starting with ``slow`` until the test releases it.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import psutil
import pytest
from blocked import wait_until_blocked
from openenv_gym_test_envs import SLEEP_RELEASE, RunningServer

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectionLostError,
    LocalProtocolError,
    RequestTimeoutError,
    ServerValidationError,
    TransportError,
    UsageError,
)
from openenv_gym.transport import keepalive
from openenv_gym.transport.dispatch import Dispatcher, Pending, Request
from openenv_gym.transport.shards import Outcome, Shard, connect_shard
from openenv_gym.transport.waiting import readable
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

TIMEOUTS = Timeouts(connect=5.0, step=30.0, close=5.0)
SOON = 20.0
"""Seconds a test waits for something that should happen (bounds a hang)."""

HANG_BOUND = 10.0
"""Upper bound, in seconds, for "promptly": far above any healthy time."""

STEPPING = threading.Event()
"""Set by :class:`SlowEcho` when a slow step starts (the server's loop is then blocked)."""


class SlowEcho(EchoEnvironment):
    """Echo whose step blocks on ``slow...`` messages until ``SLEEP_RELEASE`` (max 30 s).

    ``SLEEP_RELEASE`` is the test harness's gate: the ``env_server`` fixture sets it before
    it stops a server, so a blocked server never outlives its test.
    """

    step_batch = None  # type: ignore[assignment]  # one step() per slot, on both protocols

    def step(self, action: EchoAction) -> EchoObservation:
        if action.message.startswith("slow"):
            STEPPING.set()
            SLEEP_RELEASE.wait(30)
        return super().step(action)


@pytest.fixture(autouse=True)
def _stepping() -> Iterator[None]:
    STEPPING.clear()
    yield
    STEPPING.clear()


# ------------------------------------------------------------------------ helpers


class Fleet:
    """A dispatcher over shards on their own servers, and those servers."""

    def __init__(self, dispatcher: Dispatcher, servers: list[RunningServer]) -> None:
        self.dispatcher = dispatcher
        self.servers = servers

    @property
    def shards(self) -> list[Shard]:
        return self.dispatcher.shards

    def requests(self, op_: str, message: Callable[[int], str] | None = None) -> list[Request]:
        """One request per shard for all its sub-envs; step messages ``message(id)``."""
        out = []
        for k, shard in enumerate(self.shards):
            ids = shard.indices
            args = None if message is None else [{"message": message(i)} for i in ids]
            out.append(Request(k, op_, list(range(len(ids))), ids, args))
        return out


@pytest.fixture
def fleet(env_server: Callable[..., RunningServer]) -> Iterator[Callable[..., Fleet]]:
    """``fleet(("batch", 3), ("json", 2), slow={1}, timeouts={1: Timeouts(...)})``.

    One server per shard (SlowEcho for the indices in ``slow``, else Echo); sub-env ids
    are consecutive across shards. Dispatchers are closed at teardown, after the slow
    servers are released, and before the servers stop.
    """
    made: list[Dispatcher] = []

    def build(
        *layout: tuple[str, int],
        slow: frozenset[int] | set[int] = frozenset(),
        timeouts: dict[int, Timeouts] | None = None,
    ) -> Fleet:
        shards: list[Shard] = []
        servers: list[RunningServer] = []
        start = 0
        for k, (protocol, size) in enumerate(layout):
            running = env_server(SlowEcho if k in slow else EchoEnvironment)
            ids = list(range(start, start + size))
            start += size
            shard = connect_shard(
                running.url, ids, protocol, (timeouts or {}).get(k, TIMEOUTS), None
            )
            assert shard.protocol == protocol
            shards.append(shard)
            servers.append(running)
        dispatcher = Dispatcher(shards)
        made.append(dispatcher)
        return Fleet(dispatcher, servers)

    yield build
    SLEEP_RELEASE.set()
    for dispatcher in made:
        dispatcher.close()


def sub_envs(pending: Sequence[Pending]) -> int:
    return sum(len(p.ids) for p in pending)


def shard_of(fleet: Fleet, pending: Pending) -> int:
    return next(k for k, s in enumerate(fleet.shards) if s is pending.shard)


def assert_echoed(outcome: Outcome, message: Callable[[int], str]) -> None:
    """Every sub-env of ``outcome`` echoed ``message(id)``, with Echo's reward."""
    assert outcome.errors == {}
    for k, i in enumerate(outcome.ids):
        reply = outcome.reply(k)
        assert reply is not None
        assert reply.observation["echoed_message"] == message(int(i))
        assert reply.observation["message_length"] == len(message(int(i)))
        assert reply.reward == pytest.approx(0.1 * len(message(int(i))))
        assert reply.done is False
        assert not outcome.dones[k]


def cut_server_connections(port: int) -> int:
    """Shut down, from outside, every TCP connection the server on ``port`` accepted.

    As if its process had died: the kernel ends each connection (FIN) without a WebSocket
    close frame. Works while the server's event loop is blocked in an environment's step.
    """
    cut = 0
    for conn in psutil.Process().net_connections(kind="tcp"):
        if conn.fd < 0 or not conn.laddr or not conn.raddr or conn.laddr.port != port:
            continue
        with socket.socket(fileno=os.dup(conn.fd)) as dup:  # same socket, own descriptor
            dup.shutdown(socket.SHUT_RDWR)
        cut += 1
    return cut


def in_thread(fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """Run ``fn`` on a fresh daemon thread; its result or exception in a future."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the test through the future
            future.set_exception(exc)

    threading.Thread(target=target, daemon=True).start()
    return future


def assert_failed_columns(outcome: Outcome, op_: str, n: int) -> None:
    """A failed request's outcome still says what it answers and has every column whole:
    NaN rewards and ``False`` dones, one per sub-env, of the documented dtypes."""
    assert outcome.op == op_
    assert (outcome.rewards.dtype, outcome.rewards.shape) == (np.float64, (n,))
    assert np.isnan(outcome.rewards).all()
    assert (outcome.dones.dtype, outcome.dones.shape) == (np.bool_, (n,))
    assert not outcome.dones.any()


def hello(i: int) -> str:
    return f"hello-{i}"


def slow_or_hello(slow_shard_ids: set[int]) -> Callable[[int], str]:
    return lambda i: f"slow-{i}" if i in slow_shard_ids else hello(i)


# ------------------------------------------------------------------------ run / order


def test_run_resets_and_steps_every_shard(fleet):
    f = fleet(("batch", 3), ("batch", 4), ("json", 2))
    outcomes = f.dispatcher.run(f.requests("reset"))
    assert [list(o.ids) for o in outcomes] == [[0, 1, 2], [3, 4, 5, 6], [7, 8]]
    for outcome in outcomes:
        assert outcome.op == "reset"
        assert outcome.errors == {}
        assert all(
            outcome.reply(k).observation["echoed_message"] == "Echo environment ready!"
            for k in range(len(outcome.ids))
        )
    for _ in range(3):
        outcomes = f.dispatcher.run(f.requests("step", hello))
        for outcome in outcomes:
            assert_echoed(outcome, hello)
    states = f.dispatcher.run(f.requests("state"))
    for state in states:
        assert [state.observation(k)["step_count"] for k in range(len(state.ids))] == [3] * len(
            state.ids
        )


# ------------------------------------------------------------------------ collect


def test_collect_want_returns_the_first_done_and_the_rest_later(fleet):
    f = fleet(("batch", 3), ("batch", 3), ("json", 2), slow={2})
    f.dispatcher.run(f.requests("reset"))
    message = slow_or_hello({6, 7})
    pending = f.dispatcher.submit(f.requests("step", message))
    assert STEPPING.wait(SOON)  # the slow server is inside step: it cannot answer

    first = f.dispatcher.collect(pending, want=3)
    assert sub_envs(first) >= 3
    assert {shard_of(f, p) for p in first} <= {0, 1}  # never the slow one
    assert len(set(map(id, first))) == len(first)

    rest = [p for p in pending if all(p is not q for q in first)]
    assert any(shard_of(f, p) == 2 for p in rest)
    SLEEP_RELEASE.set()
    second = f.dispatcher.collect(rest)
    assert sorted(map(id, first + second)) == sorted(map(id, pending))
    for p in first + second:
        assert_echoed(Dispatcher.take(p), message)


def test_collect_with_frames_split_per_shard(fleet):
    # several requests in flight on one connection (batch) or one session each (json)
    f = fleet(("batch", 5), ("json", 3))
    f.dispatcher.run(f.requests("reset"))
    requests = [
        Request(0, "step", [0, 1], [0, 1], [{"message": hello(0)}, {"message": hello(1)}]),
        Request(0, "step", [2], np.array([2]), {"message": [hello(2)]}),
        Request(0, "step", [3, 4], np.array([3, 4]), {"message": [hello(3), hello(4)]}),
        Request(1, "step", [0], [5], [{"message": hello(5)}]),
        Request(1, "step", [1, 2], [6, 7], {"message": [hello(6), hello(7)]}),
    ]
    pending = f.dispatcher.submit(requests)
    done = f.dispatcher.collect(pending)
    assert sorted(map(id, done)) == sorted(map(id, pending))
    for p in pending:
        assert_echoed(Dispatcher.take(p), hello)


class _CountingSocket:
    """A real socket whose ``send`` calls are counted (everything else passes through)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sends = 0

    def send(self, data: Any) -> int:
        self.sends += 1
        return self._sock.send(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def test_several_frames_for_one_server_leave_in_one_write(fleet):
    # a reset frame and a step frame (NEXT_STEP autoreset), or frame_size windows: the
    # server is woken once and reads them together
    f = fleet(("batch", 4), ("batch", 2))
    f.dispatcher.run(f.requests("reset"))
    counted = []
    for shard in f.shards:
        ws = shard.sockets[0]
        ws.sock = _CountingSocket(ws.sock)
        counted.append(ws.sock)
    requests = [
        Request(0, "reset", [0], [0], None),
        Request(0, "step", [1, 2], [1, 2], [{"message": hello(1)}, {"message": hello(2)}]),
        Request(1, "step", [0], [4], {"message": [hello(4)]}),
        Request(0, "step", [3], [3], {"message": [hello(3)]}),
        Request(1, "step", [1], [5], [{"message": hello(5)}]),
    ]
    pending = f.dispatcher.submit(requests)
    assert [c.sends for c in counted] == [1, 1]
    done = f.dispatcher.collect(pending)
    assert sorted(map(id, done)) == sorted(map(id, pending))
    outcomes = [Dispatcher.take(p) for p in pending]
    assert outcomes[0].op == "reset"
    assert outcomes[0].reply(0).observation["echoed_message"] == "Echo environment ready!"
    for outcome in outcomes[1:]:
        assert_echoed(outcome, hello)
    # one request alone is written at once, as before
    pending = f.dispatcher.submit([Request(0, "step", [0], [0], [{"message": hello(0)}])])
    assert [c.sends for c in counted] == [2, 1]
    assert_echoed(Dispatcher.take(f.dispatcher.collect(pending)[0]), hello)


def test_a_server_gets_its_frames_before_the_next_server_is_encoded(fleet):
    # one server's frames are written once its last one is queued, not after every server's
    f = fleet(("batch", 2), ("batch", 2))
    f.dispatcher.run(f.requests("reset"))
    first = f.shards[0].sockets[0]
    first.sock = counted = _CountingSocket(first.sock)
    second = f.shards[1]
    seen: list[int] = []
    real_send = second.send

    def send(*args: Any, **kwargs: Any) -> Any:
        seen.append(counted.sends)
        return real_send(*args, **kwargs)

    second.send = send  # type: ignore[method-assign]
    requests = [
        Request(0, "reset", [0], [0], None),
        Request(0, "step", [1], [1], [{"message": hello(1)}]),
        Request(1, "step", [0, 1], [2, 3], [{"message": hello(2)}, {"message": hello(3)}]),
    ]
    pending = f.dispatcher.submit(requests)
    assert seen == [1]  # both of server 0's frames, in one write, before server 1's send
    assert counted.sends == 1
    outcomes = [Dispatcher.take(p) for p in f.dispatcher.collect(pending)]
    assert sorted(int(o.ids[0]) for o in outcomes) == [0, 1, 2]


def test_a_server_lost_while_frames_are_held_fails_those_requests(fleet):
    f = fleet(("batch", 2), ("batch", 1))
    f.dispatcher.run(f.requests("reset"))
    assert cut_server_connections(f.servers[0].server.port) == 1
    requests = [
        Request(0, "step", [0], [0], [{"message": hello(0)}]),
        Request(0, "step", [1], [1], [{"message": hello(1)}]),
        Request(1, "step", [0], [2], [{"message": hello(2)}]),
    ]
    outcomes = f.dispatcher.run(requests)
    by_id = {int(o.ids[0]): o for o in outcomes}
    for i in (0, 1):
        assert isinstance(by_id[i].errors[0], TransportError)
    assert_echoed(by_id[2], hello)


def test_collect_timeout_returns_fewer_when_a_server_is_slow(fleet):
    f = fleet(("batch", 3), ("json", 2), ("batch", 2), slow={2})
    f.dispatcher.run(f.requests("reset"))
    message = slow_or_hello({5, 6})
    pending = f.dispatcher.submit(f.requests("step", message))
    assert STEPPING.wait(SOON)

    done = f.dispatcher.collect(pending, timeout=0.5)  # returns, with fewer: not a hang
    assert sub_envs(done) < sub_envs(pending)
    assert all(shard_of(f, p) != 2 for p in done)

    # while the server is blocked its request stays pending, however often one asks
    left = [p for p in pending if all(p is not q for q in done)]
    more = f.dispatcher.collect(left, timeout=0.2)  # a fast one may finish only now
    assert all(shard_of(f, p) != 2 for p in more)
    done += more
    left = [p for p in left if all(p is not q for q in more)]
    assert [shard_of(f, p) for p in left] == [2]
    SLEEP_RELEASE.set()
    later = f.dispatcher.collect(left, timeout=SOON)
    assert sorted(map(id, done + later)) == sorted(map(id, pending))
    for p in pending:
        assert_echoed(Dispatcher.take(p), message)


def test_step_timeout_fails_only_the_slow_shard(fleet):
    f = fleet(
        ("batch", 2),
        ("json", 2),
        ("batch", 2),
        slow={1, 2},
        timeouts={1: Timeouts(connect=5, step=0.5), 2: Timeouts(connect=5, step=0.5)},
    )
    message = slow_or_hello({2, 3, 4, 5})
    pending = f.dispatcher.submit(f.requests("step", message))
    done = f.dispatcher.collect(pending)  # every request ends: answered or timed out
    assert sorted(map(id, done)) == sorted(map(id, pending))
    fast, slow_json, slow_batch = (Dispatcher.take(p) for p in pending)
    assert_echoed(fast, message)
    for outcome in (slow_json, slow_batch):
        assert set(outcome.errors) == {0, 1}
        assert all(isinstance(e, RequestTimeoutError) for e in outcome.errors.values())
        assert outcome.reply(0) is None
        assert np.isnan(outcome.rewards).all()
    assert isinstance(slow_batch.failure, RequestTimeoutError)  # the whole connection


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_collecting_late_keeps_the_replies_that_came_in_time(fleet, protocol):
    """Replies that arrived before their deadline count, however late the caller collects.

    The test waits for the replies to arrive, notes whether that was before the step
    timeout (on any sane machine it is: a loopback echo against 2 s), then waits until the
    deadline has passed, as a caller busy elsewhere would, and only then collects.
    """
    step = 2.0
    f = fleet((protocol, 2), timeouts={0: Timeouts(connect=5, step=step)})
    f.dispatcher.run(f.requests("reset"))
    earliest = time.monotonic() + step  # the requests' deadline is no earlier than this
    pending = f.dispatcher.submit(f.requests("step", hello))
    latest = time.monotonic() + step  # nor later than this
    sockets = f.shards[0].sockets

    def arrived() -> int:
        # the keepalive thread may already have read a reply off the socket into the
        # connection's queue (it wakes every few seconds): that reply has arrived too
        return sum(1 for ws in sockets if ws.messages or readable([ws]))

    end = time.monotonic() + SOON
    while arrived() < len(sockets) and time.monotonic() < end:
        time.sleep(0.01)
    assert arrived() == len(sockets)
    in_time = time.monotonic() < earliest
    while time.monotonic() <= latest:  # the caller is busy until past the deadline
        time.sleep(0.01)
    done = f.dispatcher.collect(pending, timeout=SOON)
    assert len(done) == 1
    outcome = Dispatcher.take(done[0])
    if in_time:  # the case this test is about
        assert_echoed(outcome, hello)
    else:  # a machine so slow the replies came late: they are timeouts, and say so
        print("\n[dispatch] the replies came after their deadline: the late case ran")
        assert all(isinstance(e, RequestTimeoutError) for e in outcome.errors.values())


# ------------------------------------------------------------------------ both protocols


@pytest.mark.parametrize("n", [3, 40])  # 40: the batched reply carries ndarray columns
@pytest.mark.parametrize("form", ["rows", "columns"])
def test_outcomes_hold_the_same_values_on_both_protocols(fleet, n, form):
    f = fleet(("batch", n), ("json", n))
    messages = [("é" * (k % 7)) + f"m{k}" for k in range(n)]

    def request(shard: int, op_: str, args: Any) -> Request:
        ids = np.arange(shard * n, shard * n + n)
        return Request(shard, op_, list(range(n)), ids, args)

    def args_of(key: str, values: list[Any]) -> Any:
        return {key: values} if form == "columns" else [{key: v} for v in values]

    resets = args_of("episode_id", [f"ep-{k}" for k in range(n)])
    steps = args_of("message", messages)
    for op_, args in (("reset", resets), ("step", steps), ("step", steps)):
        batch, json_ = f.dispatcher.run([request(0, op_, args), request(1, op_, args)])
        assert batch.columns is not None or batch.rows is not None
        assert json_.columns is None  # JSON replies come as rows
        np.testing.assert_array_equal(batch.rewards, json_.rewards)
        np.testing.assert_array_equal(batch.dones, json_.dones)
        for outcome in (batch, json_):  # the columns' documented types, whatever the values
            assert (outcome.rewards.dtype, outcome.rewards.shape) == (np.float64, (n,))
            assert (outcome.dones.dtype, outcome.dones.shape) == (np.bool_, (n,))
        assert batch.errors == json_.errors == {}
        for k in range(n):
            b, j = batch.reply(k), json_.reply(k)
            assert b is not None
            assert j is not None
            # over /ws the observation also carries its own "metadata" (as openenv sends
            # it); the batched protocol sends metadata once, beside the observation
            j_observation = dict(j.observation)
            assert j_observation.pop("metadata") == (j.metadata or {})
            assert typed(b.observation) == typed(j_observation)
            assert (b.reward, b.done, b.metadata) == (j.reward, j.done, j.metadata)
            assert type(b.reward) is type(j.reward)
        if op_ == "step":
            assert batch.reply(1).observation["echoed_message"] == messages[1]
    batch, json_ = f.dispatcher.run([request(0, "state", None), request(1, "state", None)])
    assert [batch.observation(k) for k in range(n)] == [json_.observation(k) for k in range(n)]
    assert batch.observation(2) == {"episode_id": "ep-2", "step_count": 2}


@pytest.mark.parametrize("form", ["rows", "columns"])
def test_per_sub_env_errors_are_the_same_on_both_protocols(fleet, form):
    # An invalid action (Echo wants a non-empty message) fails its sub-env only.
    f = fleet(("batch", 4), ("json", 4))
    messages = ["ok-0", "", "ok-2", ""]
    args: Any = {"message": messages} if form == "columns" else [{"message": m} for m in messages]
    batch, json_ = f.dispatcher.run(
        [
            Request(0, "step", [0, 1, 2, 3], [0, 1, 2, 3], args),
            Request(1, "step", [0, 1, 2, 3], [4, 5, 6, 7], args),
        ]
    )
    for outcome in (batch, json_):
        assert set(outcome.errors) == {1, 3}
        assert all(isinstance(e, ServerValidationError) for e in outcome.errors.values())
        assert outcome.failure is None
        assert [outcome.reply(k) is None for k in range(4)] == [False, True, False, True]
        assert np.isnan(outcome.rewards[[1, 3]]).all()
        assert outcome.reply(2).observation["echoed_message"] == "ok-2"
    assert [type(e) for e in batch.errors.values()] == [type(e) for e in json_.errors.values()]
    # the sessions survive a validation error
    outcomes = f.dispatcher.run(f.requests("step", hello))
    for outcome in outcomes:
        assert_echoed(outcome, hello)


def test_replies_read_by_the_keepalive_thread_are_collected(fleet, monkeypatch):
    # Between submit and collect nobody holds the sockets: the keepalive thread may read
    # the replies first. collect must take them from there, not wait for more bytes.
    monkeypatch.setattr(keepalive, "INTERVAL", 0.02)
    keepalive._wake.set()
    f = fleet(("batch", 2), ("json", 3))
    f.dispatcher.run(f.requests("reset"))
    pending = f.dispatcher.submit(f.requests("step", hello))
    sockets = [ws for shard in f.shards for ws in shard.sockets]

    def all_read() -> bool:
        for ws in sockets:
            with ws.lock:
                if not ws.messages:
                    return False
        return True

    end = time.monotonic() + SOON
    while not all_read() and time.monotonic() < end:
        time.sleep(0.01)
    assert all_read()  # every reply was read by the keepalive thread
    done = f.dispatcher.collect(pending, timeout=HANG_BOUND)
    assert sorted(map(id, done)) == sorted(map(id, pending))
    for p in pending:
        assert_echoed(Dispatcher.take(p), hello)


def typed(mapping: dict[str, Any]) -> dict[str, tuple[type, Any]]:
    """Each value with its type (1 == 1.0 == True, but not on the wire)."""
    return {key: (type(value), value) for key, value in mapping.items()}


def test_a_busy_sub_env_fails_alone(fleet):
    # A second request for sub-envs whose reply is pending fails them at once; the first
    # request and the other sub-envs are untouched.
    f = fleet(("batch", 2), ("json", 2), slow={0, 1})
    first = f.dispatcher.submit(f.requests("step", lambda i: f"slow-{i}"))
    second = f.dispatcher.submit(
        [
            Request(0, "step", [0], [0], [{"message": "again"}]),
            Request(1, "step", [1], [3], [{"message": "again"}]),
        ]
    )
    assert f.dispatcher.collect(second, timeout=SOON) == second  # failed at once
    batch_again, json_again = (Dispatcher.take(p) for p in second)
    assert isinstance(batch_again.errors[0], LocalProtocolError)
    assert isinstance(json_again.errors[0], UsageError)
    SLEEP_RELEASE.set()
    f.dispatcher.collect(first)
    for p in first:
        assert_echoed(Dispatcher.take(p), lambda i: f"slow-{i}")


def test_a_busy_sub_env_does_not_hold_up_the_next_ones_of_its_request(fleet):
    # JSON: position 0 is still busy with a slow step when a request for 0 and 1 comes;
    # 0 fails at once, 1 is stepped and taken all the same
    f = fleet(("json", 2), slow={0})
    f.dispatcher.run(f.requests("reset"))
    first = f.dispatcher.submit([Request(0, "step", [0], [0], [{"message": "slow-0"}])])
    assert STEPPING.wait(SOON)
    second = f.dispatcher.submit(
        [Request(0, "step", [0, 1], [0, 1], [{"message": "again"}, {"message": "hi-1"}])]
    )
    SLEEP_RELEASE.set()
    f.dispatcher.collect(first + second, timeout=SOON)
    (outcome,) = (Dispatcher.take(p) for p in second)
    assert set(outcome.errors) == {0}
    reply = outcome.reply(1)
    assert reply is not None
    assert reply.observation["echoed_message"] == "hi-1"
    assert_echoed(Dispatcher.take(first[0]), lambda i: "slow-0")


class MarkedEcho(EchoEnvironment):
    """Echo whose step ends the episode on a message starting with ``done`` and reports
    metadata keyed by the message, so that slots differ (the per-slot metadata form)."""

    step_batch = None  # type: ignore[assignment]  # one step() per slot, on both protocols

    def step(self, action: EchoAction) -> EchoObservation:
        echoed = super().step(action)
        return EchoObservation(
            echoed_message=echoed.echoed_message,
            message_length=echoed.message_length,
            reward=echoed.reward,
            done=action.message.startswith("done"),
            metadata={action.message: len(action.message)},
        )


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_done_flags_and_each_sub_envs_metadata_come_through(env_server, protocol):
    shard = connect_shard(env_server(MarkedEcho).url, [0, 1, 2], protocol, TIMEOUTS, None)
    dispatcher = Dispatcher([shard])
    try:
        dispatcher.run([Request(0, "reset", [0, 1, 2], [0, 1, 2], None)])
        messages = ["done-a", "b", "done-cc"]
        args = [{"message": m} for m in messages]
        (outcome,) = dispatcher.run([Request(0, "step", [0, 1, 2], [0, 1, 2], args)])
        assert (outcome.dones.dtype, outcome.dones.tolist()) == (np.bool_, [True, False, True])
        for k, message in enumerate(messages):
            reply = outcome.reply(k)
            assert reply is not None
            assert reply.done is message.startswith("done")
            assert reply.metadata == {message: len(message)}
            assert outcome.meta(k) == {message: len(message)}
    finally:
        dispatcher.close()


# ------------------------------------------------------------------------ interrupting


def test_interrupt_ends_a_collect_with_usage_error(fleet):
    f = fleet(("batch", 2), ("json", 2), ("batch", 2), slow={2})
    pending = f.dispatcher.submit(f.requests("step", slow_or_hello({4, 5})))
    interrupted = threading.Event()
    caller = threading.current_thread()

    def interrupt_once_blocked() -> None:
        assert STEPPING.wait(SOON)
        wait_until_blocked(caller)  # waiting in collect: the path under test
        interrupted.set()
        f.dispatcher.interrupt()

    helper = in_thread(interrupt_once_blocked)
    with pytest.raises(UsageError, match="closed while the call was waiting"):
        f.dispatcher.collect(pending, timeout=2 * SOON)  # all: waits for the slow one
    assert interrupted.is_set()  # it ended because of the interrupt, not before it
    helper.result(SOON)


def test_interrupt_before_collect(fleet):
    f = fleet(("json", 1), ("batch", 1))
    pending = f.dispatcher.submit(f.requests("step", hello))
    f.dispatcher.interrupt()
    with pytest.raises(UsageError):
        f.dispatcher.collect(pending, timeout=SOON)


# ------------------------------------------------------------------------ servers dying


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_server_killed_mid_collect_fails_only_its_sub_envs(fleet, protocol):
    f = fleet(("batch", 3), ("json", 2), (protocol, 3), slow={2})
    f.dispatcher.run(f.requests("reset"))
    message = slow_or_hello({5, 6, 7})
    pending = f.dispatcher.submit(f.requests("step", message))
    port = f.servers[2].server.port

    def kill_once_stepping() -> int:
        assert STEPPING.wait(SOON)  # the dying server is inside step: no reply yet
        return cut_server_connections(port)

    killer = in_thread(kill_once_stepping)
    done = f.dispatcher.collect(pending, timeout=2 * SOON)
    assert killer.result(SOON) == len(f.shards[2].sockets)
    assert sorted(map(id, done)) == sorted(map(id, pending))
    fine_batch, fine_json, dead = (Dispatcher.take(p) for p in pending)
    assert_echoed(fine_batch, message)
    assert_echoed(fine_json, message)
    assert set(dead.errors) == {0, 1, 2}
    assert all(isinstance(e, TransportError) for e in dead.errors.values())
    assert all(isinstance(e, ConnectionLostError) for e in dead.errors.values())
    assert [dead.reply(k) for k in range(3)] == [None] * 3
    assert_failed_columns(dead, "step", 3)

    # the survivors keep working; the dead shard reports an error for each sub-env
    SLEEP_RELEASE.set()
    again = f.dispatcher.run(f.requests("step", hello))
    assert_echoed(again[0], hello)
    assert_echoed(again[1], hello)
    assert set(again[2].errors) == {0, 1, 2}
    assert_failed_columns(again[2], "step", 3)  # refused at once, the connection known gone


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_server_gone_between_steps_fails_only_its_sub_envs(fleet, protocol):
    f = fleet((protocol, 2), ("batch", 2), ("json", 1))
    f.dispatcher.run(f.requests("reset"))
    assert cut_server_connections(f.servers[0].server.port) == len(f.shards[0].sockets)
    outcomes = f.dispatcher.run(f.requests("step", hello))
    assert set(outcomes[0].errors) == {0, 1}
    assert all(isinstance(e, TransportError) for e in outcomes[0].errors.values())
    assert_failed_columns(outcomes[0], "step", 2)
    assert_echoed(outcomes[1], hello)
    assert_echoed(outcomes[2], hello)
    # the next requests are refused at once (nothing sent), and still say what they answer
    assert_failed_columns(f.dispatcher.run(f.requests("reset"))[0], "reset", 2)
    assert_failed_columns(f.dispatcher.run(f.requests("step", hello))[0], "step", 2)


def test_close_is_idempotent_after_interrupt(fleet):
    f = fleet(("batch", 2), ("json", 2))
    pending = f.dispatcher.submit(f.requests("step", hello))
    f.dispatcher.interrupt()
    with pytest.raises(UsageError):
        f.dispatcher.collect(pending)
    f.dispatcher.close()
    f.dispatcher.close()
    assert f.dispatcher.shards == []
