"""Attacks on a server, as an attacker or a careless client would make them (issue 11).

Each test drives a real server on 127.0.0.1 over real sockets (raw frames where the
attack needs them) and asserts what ``docs/security.md`` promises: the typed answer, the
connection or session that survives, the limit that holds, and that other clients went
on stepping while it happened. The figures (time to refuse, other clients' step latency)
are printed (``pytest -s``), never asserted: speed is measured by ``benchmarks/attacks.py``.
Memory is asserted (a bound on what the server holds is a promise, not a speed).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import statistics
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any, ClassVar

import psutil
import pytest
from openenv_gym_test_envs import PingAction, PingEnv, PingObservation
from pydantic import field_serializer, field_validator
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

from openenv_gym.exceptions import OpenEnvGymError
from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame
from openenv_gym.runtime.environment import Action, Observation
from openenv_gym.transport.session import open_session

TOKEN = "s3cret-T0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MB = 2**20


def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """GET with the standard library: (status, JSON body), whatever the status."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", parts.path, headers=headers or {})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def ws(url: str, **kwargs: Any) -> ClientConnection:
    kwargs.setdefault("open_timeout", 5)
    return connect(url, proxy=None, close_timeout=5, max_size=None, **kwargs)


def ask(conn: ClientConnection, frame: str | bytes) -> Any:
    conn.send(frame)
    reply = conn.recv(timeout=10)
    return json.loads(reply) if isinstance(reply, str) else decode_frame(reply)


def hello(conn: ClientConnection) -> None:
    assert ask(conn, encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "t"}))


def drain(conn: ClientConnection) -> None:
    """Read until the connection closes (raises ConnectionClosed)."""
    while True:
        conn.recv(timeout=10)


def ws_url(http_url: str, path: str) -> str:
    return http_url.replace("http://", "ws://") + path


def refusal(url: str, **kwargs: Any) -> int:
    """The HTTP status of a refused upgrade."""
    with pytest.raises(InvalidStatus) as info:
        ws(url, **kwargs)
    return info.value.response.status_code


# --------------------------------------------------------------------------- token


@pytest.mark.parametrize("path", ["/ws", "/batch"])
def test_upgrade_without_the_token_is_401_and_with_it_is_served(env_server, path):
    server = env_server(token=TOKEN)
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ):
        with pytest.raises(InvalidStatus) as info:
            ws(server.ws(path), additional_headers=headers)
        assert info.value.response.status_code == 401
        assert info.value.response.headers["WWW-Authenticate"] == "Bearer"
    assert server.server.active == 0  # no instance was made for a refused upgrade
    with ws(server.ws(path), additional_headers={"authorization": f"bearer {TOKEN}"}) as conn:
        if path == "/ws":
            assert ask(conn, '{"type":"reset"}')["type"] == "observation"
        else:
            hello(conn)


@pytest.mark.parametrize("protocol", ["json", "batch"])
def test_our_client_passes_the_token_as_a_header(env_server, protocol):
    server = env_server(token=TOKEN)
    with pytest.raises(OpenEnvGymError):
        open_session(server.url, protocol=protocol)
    session = open_session(server.url, protocol=protocol, headers=AUTH)
    try:
        session.reset(seed=3)
        assert session.step({"message": "hi"}).observation["echoed"] == "hi"
    finally:
        session.close()


@pytest.mark.parametrize(
    "path", ["/health", "/schema", "/metadata", "/ws", "/batch", "/openapi.json", "/nope"]
)
def test_every_http_endpoint_needs_the_token(env_server, path):
    """401 before anything else: not even whether the path exists is told."""
    server = env_server(token=TOKEN)
    status, body = http_get(server.url + path)
    assert (status, body) == (401, {"detail": "missing or wrong token"})
    status, _ = http_get(server.url + path, AUTH)
    assert status != 401
    if path == "/health":
        assert status == 200


def test_post_without_the_token_is_401_before_its_body_is_read(env_server):
    server = env_server(token=TOKEN)
    with socket.create_connection(("127.0.0.1", server.server.port), timeout=5) as sock:
        sock.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")


# -------------------------------------------------------------------------- origin


@pytest.mark.parametrize("path", ["/ws", "/batch"])
@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1"])
def test_browser_upgrades_are_refused_unless_their_origin_is_allowed(env_server, path, origin):
    """A web page in a local browser cannot drive a server on 127.0.0.1 (issue 11, 4)."""
    server = env_server(allowed_origins=("https://good.example",))
    assert refusal(server.ws(path), origin=origin) == 403
    assert server.server.active == 0
    with ws(server.ws(path), origin="https://good.example"):
        pass
    with ws(server.ws(path)):  # no Origin: not a browser, accepted
        pass


def test_default_server_refuses_every_origin_also_on_http(ping_server):
    assert refusal(ping_server.ws(), origin="http://evil.example") == 403
    status, body = http_get(ping_server.url + "/schema", {"Origin": "http://evil.example"})
    assert status == 403
    assert body == {"detail": "origin 'http://evil.example' is not allowed"}


# ------------------------------------------------- errors never kill a connection


class GrumpyEnv(PingEnv):
    """PingEnv whose errors and replies hold what no wire can carry."""

    def step(self, action: PingAction) -> PingObservation:  # type: ignore[override]
        """``grumpy``: raise with a lone surrogate; ``bytes-meta``: bytes in metadata."""
        if action.message == "grumpy":
            raise ValueError("no \udcff way")
        if action.message == "bytes-meta":
            return PingObservation(echoed="x", metadata={"raw": b"\xff\xfe"})
        return super().step(action)


@contextlib.contextmanager
def batch(url: str) -> Iterator[ClientConnection]:
    with ws(url, subprotocols=[SUBPROTOCOL]) as conn:
        hello(conn)
        yield conn


class Requests:
    """Request ids for one raw batched connection."""

    def __init__(self, conn: ClientConnection) -> None:
        self.conn, self.rid = conn, 0

    def __call__(self, op: str, slots: list[int], args: list[dict] | None = None) -> dict:
        self.rid += 1
        message: dict[str, Any] = {"op": op, "id": self.rid, "slots": slots}
        if args is not None:
            message["args"] = args
        reply = ask(self.conn, encode_frame(message))
        assert (reply["op"], reply["id"]) == (op, self.rid), reply
        return reply


@pytest.mark.parametrize("n", [4, 100])  # answered where it arrives / in chunks of 64
def test_batched_value_that_cannot_be_echoed_fails_its_slot_only(env_server, n):
    """Issue 11, 3: reset(options={"episode_id": b"\\xff"}) on a vector env closed the
    connection (1011) and lost every session; now the one slot fails (section 3.6.1)."""
    server = env_server(GrumpyEnv)
    with batch(server.ws("/batch")) as conn:
        request = Requests(conn)
        slots = list(range(n))
        assert "errors" not in request("open", slots)
        resets = [{"episode_id": b"\xff"}] + [{"seed": k} for k in range(1, n)]
        assert "errors" not in request("reset", slots, resets)  # PingEnv keeps the bytes
        state = request("state", slots)
        assert list(state["errors"]) == [0]  # its State model refuses them: that slot only
        code, message, details = state["errors"][0]
        assert (code, message) == ("VALIDATION_ERROR", "Invalid message")
        assert details["errors"][0]["input"] == "b'\\xff'"  # the repr: not UTF-8
        assert state["state"][1]["step_count"] == 0
        actions = [{"message": b"\xff"}, {"message": float("nan")}, {"message": "grumpy"}]
        actions += [{"message": f"m{k}"} for k in range(3, n)]
        step = request("step", slots, actions)
        assert sorted(step["errors"]) == [0, 1, 2]
        assert step["errors"][0][2]["errors"][0]["input"] == "b'\\xff'"
        assert step["errors"][1][2]["errors"][0]["input"] == "nan"
        assert step["errors"][2][:2] == ["EXECUTION_ERROR", "'no \\udcff way'"]
        assert step["obs"][n - 1]["echoed"] == f"m{n - 1}"
        again = request("step", slots, [{"message": "again"}] * n)  # every slot still open
        assert "errors" not in again
        assert [o["echoed"] for o in again["obs"]] == ["again"] * n
    assert server.server.wait_active(0)


class TouchyAction(PingAction):
    """Its validator raises what Pydantic does not turn into a validation error."""

    @field_validator("message")
    @classmethod
    def _explode(cls, value: str) -> str:
        if value == "explode":
            raise RuntimeError("validator exploded")
        return value


class TouchyObservation(PingObservation):
    """Its serializer fails for one value."""

    @field_serializer("echoed")
    def _fussy(self, value: str) -> str:
        if value == "unwritable":
            raise RuntimeError("cannot write this one")
        return value


class TouchyEnv(PingEnv):
    """PingEnv with :class:`TouchyAction` and :class:`TouchyObservation`."""

    action_type: ClassVar[type[Action]] = TouchyAction
    observation_type: ClassVar[type[Observation]] = TouchyObservation

    def step(self, action: PingAction) -> PingObservation:  # type: ignore[override]
        """Echo in a :class:`TouchyObservation`."""
        return TouchyObservation(echoed=action.message)


@pytest.mark.parametrize("n", [4, 100])
def test_batched_validator_or_serializer_that_raises_fails_its_slot_only(env_server, n):
    server = env_server(TouchyEnv)
    with batch(server.ws("/batch")) as conn:
        request = Requests(conn)
        slots = list(range(n))
        request("open", slots)
        actions = [{"message": "explode"}, {"message": "unwritable"}]
        actions += [{"message": f"m{k}"} for k in range(2, n)]
        step = request("step", slots, actions)
        assert sorted(step["errors"]) == [0, 1]
        assert step["errors"][0][:2] == ["EXECUTION_ERROR", "validator exploded"]
        assert step["errors"][1][0] == "EXECUTION_ERROR"
        assert "cannot write this one" in step["errors"][1][1]
        assert step["obs"][n - 1]["echoed"] == f"m{n - 1}"
        assert "errors" not in request("step", slots, [{"message": "ok"}] * n)


@pytest.mark.parametrize("message", ["explode", "unwritable"])
def test_json_validator_or_serializer_that_raises_is_an_execution_error(env_server, message):
    server = env_server(TouchyEnv)
    with ws(server.ws()) as conn:
        reply = ask(conn, json.dumps({"type": "step", "data": {"message": message}}))
        assert reply["data"]["code"] == "EXECUTION_ERROR"
        step = ask(conn, '{"type":"step","data":{"message":"fine"}}')
        assert step["data"]["observation"]["echoed"] == "fine"


def send_text_bytes(conn: ClientConnection, data: bytes) -> Any:
    conn.send(data, text=True)  # a text frame whose bytes need not be UTF-8
    return json.loads(conn.recv(timeout=5))


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (b'{"type":"step","data":{"message":NaN}}', "VALIDATION_ERROR"),
        (b'{"type":"step","data":{"message":Infinity}}', "VALIDATION_ERROR"),
        (b'{"type":"step","data":{"message":-Infinity}}', "VALIDATION_ERROR"),
        (b'{"type":"step","data":{"message":"\\ud800"}}', "VALIDATION_ERROR"),
        (b'{"type":"step","data":{"message":"a","x\\udfff":1}}', "VALIDATION_ERROR"),
        (b'{"type":"reset","extra":NaN}', "VALIDATION_ERROR"),
        (b'{"type":"reset","\\ud800":1}', "VALIDATION_ERROR"),
        (b'{"type":"step","data":{"message":"grumpy"}}', "EXECUTION_ERROR"),
        (b'{"type":"step","data":{"message":"bytes-meta"}}', "EXECUTION_ERROR"),
        (b'{"type":"step","data":{"message":"\xff"}}', "INVALID_JSON"),
        (b'{"type":"reset","data":{"seed":1}}\xc3', "INVALID_JSON"),
    ],
    ids=[
        "nan",
        "inf",
        "-inf",
        "surrogate",
        "surrogate-key",
        "nan-extra",
        "surrogate-extra",
        "raise-surrogate",
        "bytes-metadata",
        "not-utf8",
        "truncated-utf8",
    ],
)
def test_json_ws_answers_what_json_cannot_carry_and_keeps_the_session(env_server, frame, code):
    """Issue 11, 3: NaN or a lone surrogate closed /ws with no error frame."""
    server = env_server(GrumpyEnv)
    with ws(server.ws()) as conn:
        assert ask(conn, '{"type":"reset","data":{"seed":1}}')["type"] == "observation"
        reply = send_text_bytes(conn, frame)
        assert reply["type"] == "error"
        assert reply["data"]["code"] == code
        assert isinstance(reply["data"]["message"], str)
        step = ask(conn, '{"type":"step","data":{"message":"still here"}}')
        assert step["data"]["observation"]["echoed"] == "still here"
        assert ask(conn, '{"type":"reset","data":{"seed":2}}')["type"] == "observation"
    assert server.server.wait_active(0)


def test_json_ws_state_that_utf8_cannot_carry_is_an_execution_error(ping_server):
    with ws(ping_server.ws()) as conn:
        ask(conn, '{"type":"reset","data":{"episode_id":"\\ud800"}}')
        reply = ask(conn, '{"type":"state"}')
        assert reply["data"]["code"] == "EXECUTION_ERROR"
        assert "cannot encode as JSON" in reply["data"]["message"]
        ask(conn, '{"type":"reset","data":{"episode_id":"ep"}}')
        assert ask(conn, '{"type":"state"}')["data"]["episode_id"] == "ep"


def test_batched_text_frame_that_is_not_utf8_is_an_invalid_frame(ping_server):
    with batch(ping_server.ws("/batch")) as conn:
        conn.send(b"\xff\xfe", text=True)
        reply = decode_frame(conn.recv(timeout=5))
        assert (reply["op"], reply["code"], reply["id"]) == ("error", "INVALID_FRAME", None)
        assert "errors" not in Requests(conn)("open", [0])


# ---------------------------------------------- acceptance: bounded work per request


def raw_upgrade(port: int, path: str, *headers: str) -> socket.socket:
    """A WebSocket opened by hand, so that nothing ever reads what the server sends."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    head = [
        f"GET {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(1)
        assert chunk, f"the server closed during the upgrade: {reply!r}"
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 101 "), reply
    return sock


def masked(opcode: Opcode, payload: bytes) -> bytes:
    return Frame(opcode, payload).serialize(mask=True, extensions=[])


def read_frame(sock: socket.socket) -> bytes:
    """The payload of one unfragmented, unmasked frame from the server."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    size = exactly(2)[1] & 0x7F
    if size >= 126:
        size = int.from_bytes(exactly(2 if size == 126 else 8), "big")
    return exactly(size)


class PeakRss:
    """The largest RSS of a process, sampled every 10 ms on a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.start = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.process.memory_info().rss


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Steppers:
    """Clients stepping /ws sessions in a loop, each step timed."""

    def __init__(self, url: str, n: int) -> None:
        self._stack = contextlib.ExitStack()
        self.conns = [self._stack.enter_context(ws(url)) for _ in range(n)]
        self.steps: list[tuple[float, float]] = []  # (start, seconds)
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(conn,), daemon=True) for conn in self.conns
        ]

    def _run(self, conn: ClientConnection) -> None:
        try:
            ask(conn, '{"type":"reset"}')
            while not self._stop.is_set():
                start = time.perf_counter()
                reply = ask(conn, '{"type":"step","data":{"message":"tick"}}')
                self.steps.append((start, time.perf_counter() - start))
                assert reply["data"]["observation"]["echoed"] == "tick"
        except BaseException as exc:
            self.errors.append(exc)

    def __enter__(self) -> Steppers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)
        self._stack.close()

    def wait_for_steps(self, count: int) -> None:
        """Wait until ``count`` more steps are done (others step: an event, not a delay)."""
        target = len(self.steps) + count
        deadline = time.monotonic() + 60
        while len(self.steps) < target:
            assert not self.errors, self.errors
            assert time.monotonic() < deadline, "the other clients stopped stepping"
            time.sleep(0.01)

    def between(self, start: float, end: float) -> list[float]:
        """The times of the steps that overlap ``[start, end]``."""
        return self.during([(start, end)])

    def during(self, windows: list[tuple[float, float]]) -> list[float]:
        """The times of the steps that overlap any of the windows."""
        return [
            s
            for t, s in list(self.steps)
            if any(t + s >= start and t <= end for start, end in windows)
        ]


def test_request_naming_too_many_slots_is_refused_from_its_first_bytes(env_server):
    """Issue 11, 1 (3.8): the refusal arrives while the frame is still being sent (the
    server answered from its first 64 KiB, before the rest was read); the rest is dropped
    as it arrives, the connection goes on, and other sessions step correctly meanwhile."""
    server = env_server(max_request_slots=64)
    port = server.server.port
    frame = masked(
        Opcode.BINARY, encode_frame({"op": "state", "id": 7, "slots": list(range(300_000))})
    )
    assert len(frame) > 16 * 64 * 1024
    with contextlib.ExitStack() as stack:
        attacker = stack.enter_context(
            raw_upgrade(port, "/batch", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
        )
        other = stack.enter_context(batch(server.ws("/batch")))
        steps = Requests(other)
        steps("open", [0, 1])
        json_session = stack.enter_context(ws(server.ws()))
        attacker.sendall(masked(Opcode.BINARY, encode_frame({"op": "hello", "id": 0})))
        attacker.sendall(masked(Opcode.BINARY, encode_frame({"op": "open", "id": 1, "slots": [0]})))
        assert decode_frame(read_frame(attacker))["op"] == "error"  # hello without versions
        assert decode_frame(read_frame(attacker))["code"] == "INVALID_REQUEST"  # before hello
        attacker.sendall(
            masked(Opcode.BINARY, encode_frame({"op": "hello", "id": 0, "versions": [1]}))
        )
        assert decode_frame(read_frame(attacker))["op"] == "hello"
        attacker.sendall(frame[: 2 * 64 * 1024])  # an eighth of it
        reply = decode_frame(read_frame(attacker))
        assert reply == {
            "op": "error",
            "id": 7,
            "code": "INVALID_REQUEST",
            "message": "state names 300000 slots; this server takes at most 64 per request",
        }
        sent = 2 * 64 * 1024
        for k in range(8):  # the rest, while the others step
            message = f"m{k}"
            got = steps("step", [0, 1], [{"message": message}, {"message": message * 2}])
            assert [o["echoed"] for o in got["obs"]] == [message, message * 2]
            answer = ask(json_session, json.dumps({"type": "step", "data": {"message": message}}))
            assert answer["data"]["observation"]["echoed"] == message
            end = sent + (len(frame) - sent) // (8 - k)
            attacker.sendall(frame[sent:end])
            sent = end
        assert sent == len(frame)
        attacker.sendall(masked(Opcode.BINARY, encode_frame({"op": "open", "id": 8, "slots": [5]})))
        assert decode_frame(read_frame(attacker)) == {"op": "open", "id": 8}  # still in step
        attacker.sendall(
            masked(Opcode.BINARY, encode_frame({"op": "state", "id": 7, "slots": [5]}))
        )
        assert decode_frame(read_frame(attacker))["state"][0]["step_count"] == 0
    assert server.server.wait_active(0)


@pytest.mark.integration
@pytest.mark.slow
def test_three_million_slot_request_is_refused_at_once_and_others_keep_stepping(cli_server):
    """Issue 11, 1: a 15 MB ``state`` request naming 3,000,000 unopened slots froze every
    other client for 22 s and took the server from 57 MB to 1.97 GB of RSS."""
    server = cli_server("openenv_gym_test_envs:PingEnv")
    rss = psutil.Process(server.proc.pid)
    port = int(server.url.rsplit(":", 1)[1])
    slots = list(range(3_000_000))
    frames = [encode_frame({"op": "state", "id": rid, "slots": slots}) for rid in range(1, 6)]
    assert 14 * MB < len(frames[0]) < 16 * MB  # under max_frame: only the slot limit stops it
    frames = [masked(Opcode.BINARY, frame) for frame in frames]  # before anyone is timed
    with raw_upgrade(port, "/batch", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}") as attacker:
        attacker.sendall(
            masked(Opcode.BINARY, encode_frame({"op": "hello", "id": 0, "versions": [1]}))
        )
        read_frame(attacker)
        with Steppers(ws_url(server.url, "/ws"), 4) as steppers:
            steppers.wait_for_steps(40)  # a baseline before the attack
            quiet = steppers.between(0, time.perf_counter())
            attacks = []
            for rid, frame in enumerate(frames, 1):
                start = time.perf_counter()
                attacker.sendall(frame)
                reply = decode_frame(read_frame(attacker))
                attacks.append((start, time.perf_counter()))
                assert (reply["op"], reply["id"]) == ("error", rid)
                assert reply["code"] == "INVALID_REQUEST"
                assert "names 3000000 slots" in reply["message"]
                steppers.wait_for_steps(8)  # the others step in between: each attack its own
            during = steppers.during(attacks)
            overlapping = len(during)  # steps in flight while an attack was handled
            peak_rss = rss.memory_info().rss
    assert steppers.errors == []
    assert overlapping > 0, "nobody stepped during the attack"
    refusals = [end - start for start, end in attacks]
    print(
        f"\n3M-slot state x5: refused in median {statistics.median(refusals) * 1e3:.0f} ms, "
        f"max {max(refusals) * 1e3:.0f} ms (send of 14.9 MB included); other clients' step "
        f"p99 {percentile(during, 0.99) * 1e3:.1f} ms during the attack "
        f"({len(during)} steps), {percentile(quiet, 0.99) * 1e3:.1f} ms before; "
        f"server RSS {peak_rss / MB:.0f} MB"
    )
    assert peak_rss < 300 * MB


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["json", "batch"])
def test_client_that_never_reads_is_paused_then_dropped_and_rss_stays_bounded(cli_server, protocol):
    """Issue 11, 2: 80 frames of 15 MB, never reading the (15 MB) replies, pinned
    ~1.1 GB of server memory per connection."""
    server = cli_server("openenv_gym_test_envs:PingEnv", "--send-timeout", "2")
    port = int(server.url.rsplit(":", 1)[1])
    big = "x" * (15 * 10**6)
    if protocol == "json":
        sock = raw_upgrade(port, "/ws")
        one = masked(Opcode.TEXT, json.dumps({"type": "step", "data": {"message": big}}).encode())
        frames: Iterator[bytes] = (one for _ in range(80))
    else:
        sock = raw_upgrade(port, "/batch", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
        sock.sendall(masked(Opcode.BINARY, encode_frame({"op": "hello", "id": 0, "versions": [1]})))
        assert decode_frame(read_frame(sock))["op"] == "hello"
        # the slot is in flight until open is answered (its instance is built off the loop);
        # only what comes after is never read
        sock.sendall(masked(Opcode.BINARY, encode_frame({"op": "open", "id": 1, "slots": [0]})))
        assert decode_frame(read_frame(sock)) == {"op": "open", "id": 1}
        frames = (
            masked(
                Opcode.BINARY,
                encode_frame({"op": "step", "id": 2 + k, "slots": [0], "args": [{"message": big}]}),
            )
            for k in range(80)
        )
    rss = PeakRss(server.proc.pid)
    sent, paused_at, dropped = 0, time.monotonic(), None
    with sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError as exc:  # reset by the server
                dropped = exc
                break
            sent, paused_at = sent + 1, time.monotonic()
    drop_after = time.monotonic() - paused_at
    after = rss.stop()
    print(
        f"\nnever-reading {protocol} client: {sent} of 80 frames of 15 MB taken before "
        f"reading paused, dropped {drop_after:.1f} s later (--send-timeout 2); server RSS "
        f"{rss.start / MB:.0f} MB at start, peak {rss.peak / MB:.0f} MB, "
        f"{after / MB:.0f} MB after"
    )
    assert isinstance(dropped, ConnectionResetError | BrokenPipeError)  # dropped, not waited on
    assert sent < 80
    assert rss.peak < 200 * MB
    with ws(ws_url(server.url, "/ws")) as conn:  # and the server serves the next client
        assert ask(conn, '{"type":"step","data":{"message":"hi"}}')["type"] == "observation"


@pytest.mark.integration
@pytest.mark.slow
def test_connections_beyond_max_connections_are_refused_at_once(cli_server):
    """Issue 11, 4: ~20,000 idle batched sockets exhausted the server's file descriptors."""
    server = cli_server("openenv_gym_test_envs:PingEnv", "--max-connections", "64")
    process = psutil.Process(server.proc.pid)
    port = int(server.url.rsplit(":", 1)[1])
    with contextlib.ExitStack() as stack:
        held = [stack.enter_context(ws(ws_url(server.url, "/batch"))) for _ in range(64)]
        fds_held = process.num_fds()
        start, refused = time.perf_counter(), 0
        for _ in range(4096):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                reply = sock.recv(4096)
                refused += reply.startswith(b"HTTP/1.1 503 ")
        elapsed = time.perf_counter() - start
        fds_after = process.num_fds()
        for conn in held[:4]:  # the 64 held are served all along
            hello(conn)
    print(
        f"\n4,096 connections beyond --max-connections 64: {refused} refused with 503 in "
        f"{elapsed:.1f} s ({elapsed / 4096 * 1e3:.2f} ms each); server fds {fds_held} while "
        f"holding 64, {fds_after} after"
    )
    assert refused == 4096
    assert fds_after <= fds_held + 8


@pytest.mark.integration
def test_idle_sessions_are_closed_and_freed_though_both_sides_ping(cli_server):
    """Issue 11, 4: 4,096 idle /ws sockets held every session (pings kept them alive)."""
    server = cli_server(
        "openenv_gym_test_envs:PingEnv",
        "--max-sessions",
        "32",
        "--idle-timeout",
        "1",
        "--ping-interval",
        "0.2",
    )
    url = ws_url(server.url, "/ws")
    with contextlib.ExitStack() as stack:
        idle = [stack.enter_context(ws(url, ping_interval=0.2)) for _ in range(32)]
        for conn in idle:
            assert ask(conn, '{"type":"reset"}')["type"] == "observation"
        start = time.monotonic()  # the last request of the last session was answered
        with ws(url) as extra:  # every session is taken
            assert json.loads(extra.recv(timeout=5))["data"]["code"] == "CAPACITY_REACHED"
        codes = []
        for conn in idle:
            with pytest.raises(ConnectionClosed) as info:
                drain(conn)
            assert info.value.rcvd is not None
            codes.append((info.value.rcvd.code, info.value.rcvd.reason))
        closed_after = time.monotonic() - start
    print(
        f"\n32 idle /ws sessions pinging every 0.2 s, --idle-timeout 1: all closed "
        f"{closed_after:.2f} s after the last request was answered"
    )
    assert codes == [(1001, "idle timeout")] * 32
    with contextlib.ExitStack() as stack:  # the sessions were freed
        for _ in range(32):
            conn = stack.enter_context(ws(url))
            assert ask(conn, '{"type":"reset"}')["type"] == "observation"
