"""What the soak and fuzz suites share: their size, a real server, well-behaved clients.

Not a test module (no ``test_`` prefix); the test modules of tests/soak import it by name.

* :data:`SCALE` -- the suite's size: the CI size unless ``OPENENV_GYM_SOAK_SCALE=full``
  (``docs/reliability.md``, section Soak).
* :data:`FUZZ_SEED` -- this run's fuzz seed: a fresh one per run, printed in the run's
  header; ``OPENENV_GYM_SOAK_SEED=N`` replays run N (``docs/testing.md``).
* :func:`served` -- one real ``openenv-gym serve`` subprocess (through the local provider's
  :class:`~openenv_gym.providers.local.LocalServer`), stopped and reaped on exit.
* :class:`Steady` -- a thread of well-behaved clients (one JSON ``/ws`` session, one
  ``/batch`` connection of several slots) stepping the server while a test misbehaves
  on other connections; every reply is checked by our sans-I/O client protocols.
* :func:`receive`, :class:`Closed` -- one answer from a raw ``websockets`` connection: a
  frame, or how the server closed it.
* :class:`Figures` -- the figures a test measured, printed at the end of the run.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import ClientSession, ObservationReceived, StateReceived
from openenv_gym.providers.local import LocalServer

SCALE_VAR = "OPENENV_GYM_SOAK_SCALE"
MiB = 2**20
ANSWER_TIMEOUT = 60.0
"""Seconds any one answer may take before the test calls the server hung."""


@dataclass(frozen=True, slots=True)
class Scale:
    """How big the soak run is.

    Attributes:
        name: ``ci`` or ``full``.
        sessions: Sessions stepped at once (one server, one vector env).
        batch_steps: Vector steps over the batched protocol.
        json_steps: Vector steps over JSON ``/ws``.
        fuzz_batch: Fuzz cases against ``/batch`` (msgpack frames).
        fuzz_json: Fuzz cases against ``/ws`` (JSON text frames).
        fuzz_raw: Fuzz cases of raw bytes on TCP (HTTP heads, WebSocket frames).
        timeout: Seconds one test may take (pytest-timeout).
    """

    name: str
    sessions: int
    batch_steps: int
    json_steps: int
    fuzz_batch: int
    fuzz_json: int
    fuzz_raw: int
    timeout: float

    @property
    def fuzz_cases(self) -> int:
        """Fuzz cases over the three fuzz tests."""
        return self.fuzz_batch + self.fuzz_json + self.fuzz_raw


SCALES = {
    "ci": Scale("ci", 512, 400, 60, 2500, 2500, 1000, timeout=600.0),
    "full": Scale("full", 4096, 2000, 200, 50_000, 40_000, 10_000, timeout=7200.0),
}


def _scale() -> Scale:
    name = os.environ.get(SCALE_VAR, "ci").strip().lower() or "ci"
    if name not in SCALES:
        raise pytest.UsageError(f"{SCALE_VAR} must be one of {sorted(SCALES)}, got {name!r}")
    return SCALES[name]


SCALE = _scale()

SEED_VAR = "OPENENV_GYM_SOAK_SEED"


def _seed() -> int:
    text = os.environ.get(SEED_VAR, "").strip()
    if not text:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"{SEED_VAR} must be an integer, got {text!r}") from None


FUZZ_SEED = _seed()
"""The seed of this run's fuzz cases (each fuzz test draws from it)."""


def raise_fd_limit(needed: int) -> None:
    """Raise this process's soft limit of open files to ``needed`` (servers inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed or soft == resource.RLIM_INFINITY:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.fail(f"the soak run needs {needed} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


# ------------------------------------------------------------------------- the server


@dataclass
class Served:
    """A running ``openenv-gym serve`` subprocess.

    Attributes:
        url: Its ``http://`` base URL.
        process: The server process.
        args: The ``serve`` options it was started with.
    """

    url: str
    process: psutil.Process
    args: tuple[str, ...]

    @property
    def ws(self) -> str:
        """The ``ws://`` base URL."""
        return "ws" + self.url.removeprefix("http")

    def rss(self) -> int:
        """The server's resident memory, bytes."""
        return int(self.process.memory_info().rss)

    def fds(self) -> int:
        """The server's open file descriptors."""
        return int(self.process.num_fds())

    def assert_alive(self) -> None:
        """Fail unless the server process still runs."""
        assert self.process.is_running(), "the server process died"
        assert self.process.status() != psutil.STATUS_ZOMBIE, "the server process died"


@contextlib.contextmanager
def served(server: str = "echo", *args: str) -> Iterator[Served]:
    """``openenv-gym serve SERVER --port 0 ARGS`` (the local provider's command line).

    On exit: stops it (closes its stdin, then terminate / kill) and checks it is gone.
    """
    local = LocalServer(server, extra_args=list(args))
    local.launch()
    try:
        url = local.wait_ready(30.0)
        assert local.pid is not None
        yield Served(url, psutil.Process(local.pid), args)
    finally:
        pid = local.pid
        local.stop()
        assert pid is None or not psutil.pid_exists(pid), f"server {pid} outlived its test"


def descendants() -> set[int]:
    """Process ids of this process's live descendants (zombies and resource trackers aside)."""
    alive = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if any("resource_tracker" in part for part in child.cmdline()):
                continue
            alive.add(child.pid)
    return alive


def wait_until(predicate: Any, within: float = 30.0) -> bool:
    """Wait until ``predicate()`` holds (a bound on waiting, not a speed check)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ----------------------------------------------------------------------- raw answers


@dataclass(frozen=True, slots=True)
class Closed:
    """The server closed the connection instead of answering.

    Attributes:
        code: The code of its close frame; None when it sent none (the TCP connection
            was dropped: 1006 to a WebSocket client).
        reason: The reason of its close frame.
    """

    code: int | None
    reason: str = ""


def raw_connect(url: str, subprotocols: list[str] | None = None) -> ClientConnection:
    """A plain ``websockets`` sync connection: no compression, no proxy, any reply size.

    Entered already (``with`` works on it too, and closes it).
    """
    return connect(
        url,
        subprotocols=subprotocols,  # type: ignore[arg-type]
        compression=None,
        proxy=None,
        max_size=None,
        ping_interval=None,  # no keepalive pings: they would draw from `random` meanwhile
        open_timeout=ANSWER_TIMEOUT,
        close_timeout=5.0,
    ).__enter__()


def _closed(exc: ConnectionClosed) -> Closed:
    if exc.rcvd is None:
        return Closed(None)
    return Closed(exc.rcvd.code, exc.rcvd.reason)


def send(ws: ClientConnection, data: bytes | str, *, text: bool) -> Closed | None:
    """Send one frame; the closure if the server had closed the connection meanwhile."""
    try:
        ws.send(data, text=text)
    except ConnectionClosed as exc:
        return _closed(exc)
    return None


def receive(ws: ClientConnection, timeout: float = ANSWER_TIMEOUT) -> bytes | str | Closed:
    """The next frame from the server, or how it closed the connection.

    Raises:
        AssertionError: Nothing came within ``timeout`` seconds.
    """
    try:
        return ws.recv(timeout)
    except ConnectionClosed as exc:
        return _closed(exc)
    except TimeoutError:
        raise AssertionError(f"the server answered nothing within {timeout} s") from None


# ------------------------------------------------------------------ well-behaved clients


class Steady(threading.Thread):
    """Well-behaved clients that keep stepping while a test misbehaves elsewhere.

    One JSON ``/ws`` session and one ``/batch`` (version 2) connection with ``slots``
    slots; each round steps all of them once with messages never sent before and checks
    each reply with our client protocols (``ClientSession``, ``BatchClient``: any
    malformed or unsolicited frame raises), its echoed message, and the server's own
    step count (``metadata["step"]``); at the end, every instance's ``state``. Failures
    are collected in :attr:`failures`; :meth:`finish` stops the thread and returns them.

    Args:
        ws_base: The server's ``ws://`` base URL.
        slots: Slots of the batched connection.
        pause: Seconds between two rounds (leaves the CPU to the test).
    """

    def __init__(self, ws_base: str, *, slots: int = 16, pause: float = 0.002) -> None:
        super().__init__(name="soak-steady", daemon=True)
        self.ws_base = ws_base
        self.slots = list(range(slots))
        self.pause = pause
        self.rounds = 0
        self.failures: list[str] = []
        self.latencies: list[float] = []
        self._stop_event = threading.Event()
        self._ready = threading.Event()

    @property
    def steps(self) -> int:
        """Session-steps done and checked (the JSON session's and every slot's)."""
        return self.rounds * (1 + len(self.slots))

    def start_stepping(self) -> Steady:
        """Start, and wait until both connections are set up and have stepped once."""
        self.start()
        if not self._ready.wait(ANSWER_TIMEOUT) and not self.failures:
            self.failures.append("the well-behaved clients could not start")
        return self

    def finish(self) -> list[str]:
        """Stop stepping, check every instance's state, join; the failures."""
        self._stop_event.set()
        self.join(ANSWER_TIMEOUT * 2)
        if self.is_alive():
            self.failures.append("the well-behaved clients did not stop")
        return self.failures

    def run(self) -> None:
        try:
            with (
                raw_connect(self.ws_base + "/ws") as json_ws,
                raw_connect(self.ws_base + "/batch", [bp.SUBPROTOCOL_V2]) as batch_ws,
            ):
                session = ClientSession()
                client = bp.BatchClient("soak-steady", version=2)
                self._setup(json_ws, session, batch_ws, client)
                while not self._stop_event.is_set():
                    started = time.perf_counter()
                    self._round(json_ws, session, batch_ws, client, self.rounds + 1)
                    self.latencies.append(time.perf_counter() - started)
                    self.rounds += 1
                    self._ready.set()
                    self._stop_event.wait(self.pause)
                self._check_states(json_ws, session, batch_ws, client)
        except Exception as exc:  # every failure is reported by finish()
            self.failures.append(f"after {self.rounds} rounds: {type(exc).__name__}: {exc}")
        finally:
            self._ready.set()

    # -- JSON /ws
    @staticmethod
    def _json_ask(ws: ClientConnection, session: ClientSession) -> Any:
        for frame in session.data_to_send():
            ws.send(frame)
        answer = receive(ws)
        if isinstance(answer, Closed):
            raise AssertionError(f"/ws session closed: {answer}")
        session.receive_data(answer)
        [event] = session.events_received()
        return event

    # -- /batch
    @staticmethod
    def _batch_ask(ws: ClientConnection, client: bp.BatchClient) -> Any:
        for frame in client.data_to_send():
            ws.send(frame)
        answer = receive(ws)
        if isinstance(answer, Closed):
            raise AssertionError(f"/batch connection closed: {answer}")
        client.receive_data(answer)
        [event] = client.events_received()
        if isinstance(event, bp.BatchReplyReceived) and event.errors:
            raise AssertionError(f"{event.op} failed: {event.errors}")
        return event

    def _setup(
        self,
        json_ws: ClientConnection,
        session: ClientSession,
        batch_ws: ClientConnection,
        client: bp.BatchClient,
    ) -> None:
        session.send_reset(seed=0)
        assert isinstance(self._json_ask(json_ws, session), ObservationReceived)
        client.send_hello()
        assert isinstance(self._batch_ask(batch_ws, client), bp.HelloReceived)
        client.send_open(self.slots)
        self._batch_ask(batch_ws, client)
        client.send_reset(self.slots, [{"seed": slot} for slot in self.slots])
        self._batch_ask(batch_ws, client)

    def _round(
        self,
        json_ws: ClientConnection,
        session: ClientSession,
        batch_ws: ClientConnection,
        client: bp.BatchClient,
        n: int,
    ) -> None:
        message = f"json-{n}"
        session.send_step({"message": message})
        reply = self._json_ask(json_ws, session)
        if not isinstance(reply, ObservationReceived):
            raise AssertionError(f"/ws step {n} answered {reply!r}")
        if reply.observation.get("echoed_message") != message:
            raise AssertionError(f"/ws step {n} echoed {reply.observation!r}")
        if (reply.metadata or {}).get("step") != n:
            raise AssertionError(f"/ws step {n}: the server counts {reply.metadata!r}")
        messages = [f"batch-{n}-{slot}" for slot in self.slots]
        if n % 2:  # both forms of arguments: by column (version 2) and one map per slot
            client.send_step(self.slots, {"message": messages})
        else:
            client.send_step(self.slots, [{"message": m} for m in messages])
        event = self._batch_ask(batch_ws, client)
        for k, message in enumerate(messages):
            observation, meta = event.observation(k), event.meta(k) or {}
            if observation is None or observation.get("echoed_message") != message:
                raise AssertionError(f"/batch step {n}, slot {k} echoed {observation!r}")
            if meta.get("step") != n:
                raise AssertionError(f"/batch step {n}, slot {k}: the server counts {meta!r}")

    def _check_states(
        self,
        json_ws: ClientConnection,
        session: ClientSession,
        batch_ws: ClientConnection,
        client: bp.BatchClient,
    ) -> None:
        session.send_state()
        state = self._json_ask(json_ws, session)
        assert isinstance(state, StateReceived)
        if state.state.get("step_count") != self.rounds:
            raise AssertionError(f"/ws: {self.rounds} steps sent, state says {state.state!r}")
        client.send_state(self.slots)
        event = self._batch_ask(batch_ws, client)
        counts = [(event.observation(k) or {}).get("step_count") for k in range(len(self.slots))]
        if counts != [self.rounds] * len(self.slots):
            raise AssertionError(f"/batch: {self.rounds} steps sent, states say {counts}")


# ----------------------------------------------------------------------------- figures


@dataclass
class Figures:
    """What one soak test measured (printed in the run's terminal summary).

    Attributes:
        test: The test's name.
        values: Figure name -> value, in insertion order.
    """

    test: str
    values: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One line: ``test: name=value, ...``."""
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in self.values.items())
        return f"{self.test}: {shown}"


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def mib(n_bytes: float) -> float:
    """Bytes -> MiB."""
    return n_bytes / MiB


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank; 0.0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]
