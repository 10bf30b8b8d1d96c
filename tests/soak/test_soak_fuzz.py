"""Fuzz: hostile frames on one connection never hurt the server or its other clients.

Hypothesis draws frames (:mod:`soak_frames`) and sends them, one at a time, on raw
``websockets`` connections to a real ``openenv-gym serve echo`` subprocess, while
:class:`~soak_support.Steady` keeps stepping well-behaved sessions on other connections.
For each frame the server must, as ``docs/protocol.md`` says (:mod:`soak_oracle` checks):

* ``/batch`` (section 3): answer with exactly one frame, read and checked by our own
  client protocol (``BatchClient``): a reply to the request (same ``op`` and ``id``, one
  entry per slot, 3.4) or an ``op: "error"`` frame (3.6.2) -- and never close the
  connection, except ``1009`` for a frame over ``max_frame`` (3.8); a text frame, UTF-8
  or not, is an ``INVALID_FRAME`` (3.1);
* ``/ws`` (section 2): answer with exactly one valid reply (2.3) of the right kind --
  an ``observation`` only to ``reset`` / ``step``, a ``state`` only to ``state`` -- or a
  typed ``error`` (2.4, 2.6); close only with ``1000`` after ``close`` or an error that ends
  the session (2.4), ``1009`` over ``max_frame``; text that is not UTF-8 gets
  ``INVALID_JSON`` (2.6), where RFC 6455 would close the connection with ``1007``;
* raw TCP (an HTTP head, or WebSocket frames of any shape after a valid upgrade): answer
  no request with a 5xx but 503, send no close for an internal error (``1011``), and
  close the connection once the peer's bytes end.

Echoed messages must be the ones sent. Afterwards the well-behaved sessions must have
stepped without one failure (every reply checked, step counts equal), the server must
be alive, and its resident memory back within :data:`RSS_BOUND` of where it started.

The oracle reads frames with ``msgpack`` and ``json`` (:mod:`soak_wire`), not with our
decoders. The cases come from a fresh seed each run (:data:`soak_support.FUZZ_SEED`,
printed in the run's header and in a failure), so runs explore different cases;
``OPENENV_GYM_SOAK_SEED=N`` replays run N.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from soak_frames import (
    OPEN_SLOTS,
    Frame,
    RawCase,
    batch_frames,
    hello_frames,
    json_frames,
    raw_cases,
    weighted,
)
from soak_oracle import (
    MAX_FRAME,
    MAX_REQUEST_SLOTS,
    check_batch_answer,
    check_json_answer,
    check_raw_answer,
)
from soak_support import (
    ANSWER_TIMEOUT,
    FUZZ_SEED,
    SCALE,
    SEED_VAR,
    Closed,
    Figures,
    Served,
    Steady,
    mib,
    percentile,
    raw_connect,
    receive,
    send,
    served,
    wait_until,
)
from websockets.sync.client import ClientConnection

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import ErrorCode

pytestmark = [
    pytest.mark.soak,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(SCALE.timeout),
]

RSS_BOUND = 64 * 2**20
"""How far above its starting point the server's resident memory may end (generous)."""
RECYCLE = 250
"""Cases after which a fuzzed connection is closed and opened afresh (frees its slots)."""
SAMPLE = 200
"""Cases between two samples of the server's resident memory."""
HISTORY = 6
"""Frames a fuzzed connection remembers (the failing one and those before it)."""


def fuzz_settings(cases: int) -> Any:
    """This run's seed (:data:`FUZZ_SEED`), no example database, no deadline, no shrinking.

    Cases share connections (:class:`Lane`): a failure is reported as it happened, in
    its context (and with the seed that replays the run), rather than shrunk out of it.
    """
    chosen = settings(
        max_examples=cases,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        report_multiple_bugs=False,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )

    def apply(test: Any) -> Any:
        return seed(FUZZ_SEED)(chosen(test))

    return apply


@pytest.fixture(scope="module")
def fuzz_server() -> Iterator[Served]:
    """One Echo server for the fuzz tests: small ``max_frame`` and slots per request."""
    limits = ("--max-frame", str(MAX_FRAME), "--max-request-slots", str(MAX_REQUEST_SLOTS))
    with served("echo", *limits) as server:
        yield server


class Run:
    """One fuzz test's bookkeeping: cases, outcomes, the server's memory, the steady clients.

    Args:
        server: The fuzzed server.
        figures: Where the test's figures go.
    """

    def __init__(self, server: Served, figures: Figures) -> None:
        self.server = server
        self.figures = figures
        self.cases = 0
        self.outcomes: dict[str, int] = {}
        self.steady = Steady(server.ws)
        self.rss0 = self.peak = self.fds0 = 0
        self.started = 0.0
        self.failure: str | None = None

    def __enter__(self) -> Run:
        self.fds0 = self.server.fds()
        self.steady.start_stepping()
        assert not self.steady.failures, self.steady.failures
        self.rss0 = self.peak = self.server.rss()
        self.started = time.perf_counter()
        return self

    def count(self, outcome: str) -> None:
        """One more case, answered by ``outcome``."""
        self.cases += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if self.cases % SAMPLE == 0:
            self.peak = max(self.peak, self.server.rss())

    def __exit__(self, *exc_info: object) -> None:
        failures, settled, growth = self._measure()
        if self.failure is not None:  # the first failure as it happened, not its replay
            replay = f"(fuzz seed {FUZZ_SEED}; replay with {SEED_VAR}={FUZZ_SEED})"
            raise AssertionError(f"{self.failure}\n{replay}") from exc_info[1]  # type: ignore[misc]
        if exc_info[0] is None:
            self._check(failures, settled, growth)

    def _measure(self) -> tuple[list[str], bool, int]:
        """Stop the steady clients and record the figures; their failures, fds, RSS growth."""
        elapsed = time.perf_counter() - self.started
        failures = self.steady.finish()
        # its connections are gone once the server has closed their descriptors
        settled = wait_until(lambda: self.server.fds() <= self.fds0 + 2, 30.0)
        rss1 = self.server.rss()
        latencies = self.steady.latencies
        self.figures.values.update(
            fuzz_seed=FUZZ_SEED,
            fuzz_cases=self.cases,
            cases_per_s=round(self.cases / elapsed) if elapsed else 0,
            steady_session_steps=self.steady.steps,
            steady_failures=len(failures),
            steady_round_p99_ms=round(1000 * percentile(latencies, 99), 1),
            steady_round_max_ms=round(1000 * max(latencies, default=0.0), 1),
            server_rss_mib=round(mib(self.rss0), 1),
            server_rss_peak_mib=round(mib(self.peak), 1),
            server_rss_end_growth_mib=round(mib(rss1 - self.rss0), 2),
            wall_s=round(elapsed, 1),
            outcomes=dict(sorted(self.outcomes.items(), key=lambda kv: -kv[1])),
        )
        return failures, settled, rss1 - self.rss0

    def _check(self, failures: list[str], settled: bool, growth: int) -> None:
        self.server.assert_alive()
        assert not failures, f"the well-behaved clients failed: {failures}"
        assert self.steady.rounds > 0, "the well-behaved clients never stepped"
        assert settled, f"server file descriptors: {self.fds0} before, {self.server.fds()} after"
        assert growth < RSS_BOUND, f"server RSS ended {mib(growth):.1f} MiB up"


# ------------------------------------------------------------------------------ lanes


class Lane:
    """One fuzzed connection, (re)opened on demand, that remembers its last frames.

    Cases on one connection are not independent (a case may open or close slots, or end
    the session), so a failure is reported with the frames sent before it on the same
    connection, and not shrunk (a shrunk case would replay out of that context).

    Args:
        server: The server.
        path: ``/ws`` or ``/batch``.
        version: ``/batch``: the protocol version to speak.
        opened: ``/batch``: send ``hello`` and open (and reset) :data:`OPEN_SLOTS` first.
    """

    def __init__(self, server: Served, path: str, version: int = 1, *, opened: bool = True):
        self.server = server
        self.path = path
        self.version = version
        self.opened = opened
        self.ws: ClientConnection | None = None
        self.uses = 0
        self.history: collections.deque[Frame] = collections.deque(maxlen=HISTORY)

    def connection(self) -> ClientConnection:
        """The connection, (re)opened and set up if needed."""
        if self.ws is not None and self.uses >= RECYCLE:
            self.close()
        if self.ws is None:
            offered = [bp.SUBPROTOCOLS[self.version]] if self.path == "/batch" else None
            self.ws = raw_connect(self.server.ws + self.path, offered)
            self.uses = 0
            self.history.clear()
            if self.path == "/batch" and self.opened:
                self._set_up(self.ws)
        self.uses += 1
        return self.ws

    def exchange(self, frame: Frame) -> tuple[ClientConnection, bytes | str | Closed]:
        """Send ``frame``; the connection and the server's answer."""
        ws = self.connection()
        self.history.append(frame)
        return ws, send(ws, frame.wire(), text=frame.text) or receive(ws)

    def context(self) -> str:
        """Where the last frame was sent, for a failure report."""
        before = list(self.history)[:-1]
        where = f"a fresh {self.path} connection"
        if self.path == "/batch":
            where += f" (version {self.version}{', after hello and open' if self.opened else ''})"
        return f"case {self.uses} on {where}; the frames before it there, oldest first: {before}"

    def _set_up(self, ws: ClientConnection) -> None:
        client = bp.BatchClient("soak-fuzz", version=self.version)
        client.send_hello()
        client.send_open(OPEN_SLOTS)
        self._ask(ws, client, 2)
        client.send_reset(OPEN_SLOTS, [{"seed": slot} for slot in OPEN_SLOTS])
        self._ask(ws, client, 1)

    @staticmethod
    def _ask(ws: ClientConnection, client: bp.BatchClient, replies: int) -> None:
        for frame in client.data_to_send():
            ws.send(frame)
        for _ in range(replies):
            answer = receive(ws)
            assert not isinstance(answer, Closed), f"set-up: {answer}"
            client.receive_data(answer)
        events = client.events_received()
        assert all(not getattr(e, "errors", None) for e in events), events

    def close(self) -> None:
        """Close the connection (its slots or session go with it)."""
        if self.ws is not None:
            self.ws.close()
            self.ws = None


@contextlib.contextmanager
def reported(run: Run, lane: Lane) -> Iterator[None]:
    """Keep the first failed check, with the lane's context, for :meth:`Run.__exit__`.

    (Hypothesis replays a failing case at the end: on a connection that has moved on.)
    """
    try:
        yield
    except AssertionError as exc:
        if run.failure is None:
            run.failure = f"{exc}\n{lane.context()}"
        raise


# ------------------------------------------------------------------------------ /batch


def test_fuzz_batch_frames(fuzz_server: Served, figures: Figures) -> None:
    lanes = {
        "v1": Lane(fuzz_server, "/batch", 1),
        "v2": Lane(fuzz_server, "/batch", 2),
        "new": Lane(fuzz_server, "/batch", 2, opened=False),
    }
    cases = weighted(
        (9, st.tuples(st.sampled_from(["v1", "v2", "v2"]), batch_frames(MAX_FRAME))),
        (1, st.tuples(st.just("new"), hello_frames())),
    )
    with Run(fuzz_server, figures) as run:

        @fuzz_settings(SCALE.fuzz_batch)
        @given(cases)
        def case(drawn: tuple[str, Frame]) -> None:
            name, frame = drawn
            lane = lanes[name]
            _, answer = lane.exchange(frame)
            with reported(run, lane):
                outcome = check_batch_answer(frame, answer, lane.version)
            if isinstance(answer, Closed) or (name == "new" and outcome == "HelloReceived"):
                lane.close()  # a fresh connection for the next case
            run.count(outcome)

        try:
            case()
        finally:
            for lane in lanes.values():
                lane.close()


# -------------------------------------------------------------------------------- /ws

_ENDS_SESSION = frozenset(code.value for code in ErrorCode if code.ends_session)


def test_fuzz_json_frames(fuzz_server: Served, figures: Figures) -> None:
    lane = Lane(fuzz_server, "/ws")
    with Run(fuzz_server, figures) as run:

        @fuzz_settings(SCALE.fuzz_json)
        @given(json_frames(MAX_FRAME))
        def case(frame: Frame) -> None:
            ws, answer = lane.exchange(frame)
            with reported(run, lane):
                outcome = check_json_answer(frame, answer, ws)
            if isinstance(answer, Closed) or outcome in _ENDS_SESSION:
                lane.close()
            run.count(outcome)

        try:
            case()
        finally:
            lane.close()


# ---------------------------------------------------------------------------- raw TCP

_UPGRADE = (
    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{more}\r\n"
)


def _exchange(server: Served, case: RawCase) -> bytes:
    """Write the case on a fresh TCP connection, shut the write side, read until EOF.

    With a path, the upgrade goes first and its answer is read before the case's bytes
    (a client must wait for it, RFC 6455 section 4.1).
    """
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    received = bytearray()
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT) as sock:
        if case.path is not None:
            more = (
                f"Sec-WebSocket-Protocol: {bp.SUBPROTOCOL_V2}\r\n" if case.path == "/batch" else ""
            )
            sock.sendall(_UPGRADE.format(path=case.path, more=more).encode())
            while b"\r\n\r\n" not in received:
                chunk = sock.recv(65536)
                assert chunk, f"{case!r}: the server closed the connection during the upgrade"
                received += chunk
        try:
            sock.sendall(case.data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server closed first: what it sent is still readable
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise AssertionError(f"{case!r}: the server kept the connection open") from None
            if not chunk:
                break
            received += chunk
            assert time.monotonic() < deadline, f"{case!r}: the server kept talking"
    return bytes(received)


def test_fuzz_raw_bytes(fuzz_server: Served, figures: Figures) -> None:
    with Run(fuzz_server, figures) as run:

        @fuzz_settings(SCALE.fuzz_raw)
        @given(raw_cases)
        def case(drawn: RawCase) -> None:
            run.count(check_raw_answer(drawn, _exchange(fuzz_server, drawn)))

        case()
