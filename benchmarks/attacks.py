"""Issue 11's two attacks against a real server, timed, while well-behaved clients step.

    python benchmarks/attacks.py                 # 20 attacks, 80 unread frames per protocol
    python benchmarks/attacks.py --smoke         # 1 attack, 8 unread frames: a few seconds
    python benchmarks/attacks.py --clients batch,batch,json --envs 16 --repeats 10

Starts ``openenv-gym serve echo`` (uvloop, ``--send-timeout 2``, ``--log-level DEBUG``)
in its own process, and one stepping process per ``--clients`` entry: each steps an
``OpenEnvVectorEnv`` of ``--envs`` Echo sub-envs over that protocol as fast as it can and
times every step. This process then attacks from a raw socket, every frame built and
masked before any timer starts:

* **state-3M**: a batched ``state`` request naming 3,000,000 unopened slots (a 14.9 MB
  frame, under the 16 MiB frame limit). Timed from the first byte sent to the error frame
  received (a reader thread stamps it, even while the frame is still being sent); the
  server's own time, from the frame's first byte arriving to the error frame written, is
  read from its DEBUG log.
* **never-reading**: on ``/batch`` and ``/ws``, up to ``--frames`` frames of 15 MB
  (steps echoing 15 MB), never reading a reply, until the server drops the connection.
  The server's RSS is sampled every 5 ms.

Then issue 22's attacks (``--frame-attacks``, each at ``--scale`` of its size), one after
another, while a **canary** steps: one batched slot and one ``/ws`` session, each stepping
every 20 ms in a process of its own (:func:`canary`). Each attack's row gives what the
attacker got (an error frame or a close code), the server's RSS growth, and the canary's
worst step during the attack:

* **empty-arrays**: a 15 MB batched ``step`` whose ``message`` is 15 M empty arrays;
* **extra-keys**: a batched ``step`` whose action has 1.6 M extra keys;
* **ws-extra-keys**: a ``/ws`` step of 1.3 M extra keys;
* **fragments-1M**: 1 M one-byte fragments (7 MB); **empty-fragments-3M**: 3 M empty
  fragments (18 MB).

The other clients' step latencies are reported before the attacks (``quiet``) and over
the steps that overlap an attack. One JSON row per measurement goes to stdout and to
``--out`` (default ``benchmarks/results/attacks-<UTC timestamp>.jsonl``); a summary to
stderr. Issue 11's targets: refused in < 50 ms, others' step p99 < 100 ms, server RSS
< 200 MB. Issue 22's: the canary's worst step <= 100 ms, RSS growth <= 200 MB, a typed
error or a documented close code for the attacker, no canary step lost.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import itertools
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import psutil

from openenv_gym.protocol.batch import SUBPROTOCOL, SUBPROTOCOL_V2, decode_frame, encode_frame

MB = 2**20
SLOTS = 3_000_000
HERE = Path(__file__).resolve().parent
REFUSAL_LOG = re.compile(
    r"message of (\d+) bytes answered from its first (\d+) bytes, ([\d.]+) ms after"
)


# ----------------------------------------------------------------------- frames


def masked(opcode: int, payload: bytes) -> bytes:
    """A final client frame (masked), built here so that its cost is known and untimed."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 2**16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    whole = int.from_bytes(mask * (n // 4 + 1), "big") >> (8 * (4 - n % 4))
    body = (int.from_bytes(payload, "big") ^ whole).to_bytes(n, "big") if n else b""
    return head + mask + body


def upgrade(port: int, path: str, *headers: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
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
        if not chunk:
            raise ConnectionError("closed during the upgrade")
        reply += chunk
    if not reply.startswith(b"HTTP/1.1 101 "):
        raise ConnectionError(reply.decode(errors="replace"))
    return sock


def read_frame(sock: socket.socket) -> bytes:
    """The payload of one unmasked frame from the server."""

    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return bytes(data)

    size = exactly(2)[1] & 0x7F
    if size >= 126:
        size = int.from_bytes(exactly(2 if size == 126 else 8), "big")
    return exactly(size)


# ----------------------------------------------------------------------- helpers


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1e3, 2)


class Rss:
    """Peak RSS of a process, sampled every 5 ms on a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.start = self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.process.memory_info().rss)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return int(self.process.memory_info().rss)


@contextlib.contextmanager
def server(log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    cmd = [
        sys.executable, "-m", "openenv_gym.cli", "serve", "echo", "--port", "0",
        "--send-timeout", "2", "--log-level", "DEBUG", "--exit-with-stdin",
    ]  # fmt: skip
    with log.open("wb") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------- steppers


def stepper(url: str, protocol: str, n: int, ready: Path, out: Path) -> None:
    """A child: step until standard input closes, then write ``[[start, seconds], ...]``."""
    import gymnasium

    import openenv_gym

    gymnasium.register_envs(openenv_gym)
    envs = gymnasium.make_vec("openenv/Echo-v0", num_envs=n, base_url=url, protocol=protocol)
    actions = ("tick",) * n
    envs.reset(seed=0)
    for _ in range(20):
        envs.step(actions)
    stop = threading.Event()

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):
            while sys.stdin.buffer.read(4096):
                pass
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    ready.write_text("ready")
    steps: list[tuple[float, float]] = []
    error = None
    try:
        while not stop.is_set():
            start = time.monotonic()
            obs, *_ = envs.step(actions)
            steps.append((start, time.monotonic() - start))
            if tuple(obs) != actions:
                error = f"wrong observation {obs!r:.200}"
                break
    except Exception as exc:  # reported by the parent
        error = repr(exc)
    out.write_text(json.dumps({"steps": steps, "error": error}))
    envs.close()


class Steppers:
    def __init__(self, url: str, protocols: list[str], n: int, tmp: Path) -> None:
        self.children: list[tuple[subprocess.Popen[bytes], Path, str]] = []
        for k, protocol in enumerate(protocols):
            ready, out = tmp / f"ready{k}", tmp / f"out{k}"
            child = subprocess.Popen(
                [sys.executable, __file__, "--role", "stepper", url, protocol, str(n),
                 str(ready), str(out)],
                stdin=subprocess.PIPE,
            )  # fmt: skip
            self.children.append((child, out, protocol))
            while not ready.exists():
                if child.poll() is not None:
                    raise RuntimeError(f"stepper {protocol} failed")
                time.sleep(0.05)
        self.steps: dict[str, list[tuple[float, float]]] = {}
        self.errors: list[str] = []

    def stop(self) -> None:
        for child, _, _ in self.children:
            assert child.stdin is not None
            child.stdin.close()
        for child, out, protocol in self.children:
            child.wait(60)
            result = json.loads(out.read_text())
            self.steps.setdefault(protocol, []).extend(map(tuple, result["steps"]))
            if result["error"]:
                self.errors.append(f"{protocol}: {result['error']}")

    def kill(self) -> None:
        for child, _, _ in self.children:
            if child.poll() is None:
                child.kill()
                child.wait()

    def during(self, windows: list[tuple[float, float]]) -> list[float]:
        return [
            s
            for steps in self.steps.values()
            for t, s in steps
            if any(t + s >= a and t <= b for a, b in windows)
        ]


# ----------------------------------------------------------------------- attacks


def attack_state(port: int, repeats: int) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
    """The 3,000,000-slot ``state`` request, ``repeats`` times on one connection."""
    built = time.perf_counter()
    slots = msgpack.packb(list(range(SLOTS)))  # the frame is these after its first keys
    encoded = time.perf_counter() - built
    rows, windows = [], []
    with upgrade(port, "/batch", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}") as sock:
        sock.sendall(masked(0x2, encode_frame({"op": "hello", "id": 0, "versions": [1]})))
        read_frame(sock)
        for rid in range(1, repeats + 1):
            built = time.perf_counter()  # untimed: while the others step, between attacks
            keys = b"\x83" + b"".join(map(msgpack.packb, ["op", "state", "id", rid, "slots"]))
            frame = masked(0x2, keys + slots)
            mask_s = time.perf_counter() - built
            got: dict[str, Any] = {}

            def reader(into: dict[str, Any] = got) -> None:
                try:
                    into["reply"] = decode_frame(read_frame(sock))
                except Exception as exc:
                    into["reply"] = {"error": repr(exc)}
                into["at"] = time.monotonic()

            thread = threading.Thread(target=reader)
            start = time.monotonic()
            thread.start()
            sock.sendall(frame)
            sent = time.monotonic()
            thread.join(60)
            reply, at = got.get("reply", {}), got.get("at", float("nan"))
            windows.append((start, max(sent, at)))
            rows.append(
                {
                    "phase": "state-3M",
                    "repeat": rid - 1,
                    "frame_bytes": len(frame),
                    "refused_ms": ms(at - start),
                    "sent_ms": ms(sent - start),
                    "round_trip_ms": ms(max(sent, at) - start),
                    "code": reply.get("code"),
                    "message": reply.get("message"),
                    "attacker_encode_ms": ms(encoded),
                    "attacker_mask_ms": ms(mask_s),
                }
            )
            time.sleep(0.3)
    return rows, windows


def never_reading(port: int, path: str, frames: int, pid: int) -> dict[str, Any]:
    """Up to ``frames`` frames of 15 MB, no reply ever read, until the server drops us."""
    big = "x" * (15 * 10**6)
    if path == "/ws":
        sock = upgrade(port, "/ws")
        one = masked(0x1, json.dumps({"type": "step", "data": {"message": big}}).encode())
        make = lambda k: one  # noqa: E731
    else:
        sock = upgrade(port, "/batch", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}")
        sock.sendall(masked(0x2, encode_frame({"op": "hello", "id": 0, "versions": [1]})))
        read_frame(sock)
        # the slot is in flight until open is answered (its instance is built off the loop)
        sock.sendall(masked(0x2, encode_frame({"op": "open", "id": 1, "slots": [0]})))
        read_frame(sock)
        step = {"op": "step", "slots": [0], "args": [{"message": big}]}
        make = lambda k: masked(0x2, encode_frame({**step, "id": 2 + k}))  # noqa: E731
    rss = Rss(pid)
    sent, start, last, dropped = 0, time.monotonic(), time.monotonic(), None
    with sock:
        for k in range(frames):
            frame = make(k)
            try:
                sock.sendall(frame)
            except OSError as exc:
                dropped = exc
                break
            sent, last = sent + 1, time.monotonic()
        if dropped is None:  # all taken (--smoke): wait for the drop
            with contextlib.suppress(OSError):
                sock.settimeout(30)
                while sock.recv(1 << 20):
                    pass
    end = time.monotonic()
    after = rss.stop()
    return {
        "phase": "never-reading",
        "path": path,
        "frames_offered": frames,
        "frames_taken": sent,
        "dropped": repr(dropped) if dropped else "closed by the server",
        "dropped_after_s": round(end - last, 2),
        "window": (start, end),
        "rss_start_mb": round(rss.start / MB, 1),
        "rss_peak_mb": round(rss.peak / MB, 1),
        "rss_after_mb": round(after / MB, 1),
    }


def frame_attacks(
    url: str, pid: int, names: list[str], scale: float, tmp: Path
) -> list[dict[str, Any]]:
    """Issue 22's attacks, one after another, while the canary steps; one row each, then
    the canary's own row (its quiet worst step, and any step it lost)."""
    if not names:
        return []
    port = int(url.rsplit(":", 1)[1])
    rows = []
    with Canary(url, tmp) as bird:
        quiet_start = time.monotonic()
        time.sleep(1.0)
        quiet = (quiet_start, time.monotonic())
        for name in names:
            rows.append(frame_attack(port, name, pid, scale))
            time.sleep(0.5)
        bird.stop()
    for row in rows:
        row["canary_worst_ms"] = ms(bird.worst(row.pop("window")))
    steps = [s for _, s, _ in bird.steps]
    rows.append(
        {
            "phase": "canary",
            "steps": len(steps),
            "quiet_worst_ms": ms(bird.worst(quiet)),
            "p50_ms": ms(percentile(steps, 0.5)),
            "worst_ms": ms(max(steps, default=None)),
            "error": bird.error,
        }
    )
    return rows


def server_refusals(log: Path) -> list[dict[str, Any]]:
    """The server's refusals from the first bytes, in order (its DEBUG log)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = REFUSAL_LOG.search(line)
        if match:
            size, read, elapsed = match.groups()
            found.append({"ms": float(elapsed), "read": int(read), "size": int(size)})
    return found


# ----------------------------------------------------------------------- canary


def canary(url: str, ready: Path, out: Path, period: float = 0.02) -> None:
    """A child: one batched slot and one /ws session, each stepping every ``period`` s.

    Writes ``{"steps": [[start, seconds, kind], ...], "error": ...}`` when standard input
    closes. A step whose reply is not the echo of what it sent, or any failure, is the
    error: an honest client lost something.
    """
    from websockets.sync.client import connect

    base = url.replace("http://", "ws://")
    steps: list[tuple[float, float, str]] = []
    error = None
    stop = threading.Event()

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):
            while sys.stdin.buffer.read(4096):
                pass
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        with (
            connect(base + "/batch", subprotocols=[SUBPROTOCOL_V2], proxy=None) as batch,
            connect(base + "/ws", proxy=None, max_size=None) as json_ws,
        ):
            batch.send(encode_frame({"op": "hello", "id": 0, "versions": [2]}))
            batch.recv(timeout=30)
            batch.send(encode_frame({"op": "open", "id": 1, "slots": [0]}))
            batch.recv(timeout=30)
            json_ws.send(json.dumps({"type": "reset", "data": {}}))
            json_ws.recv(timeout=30)
            ready.write_text("ready")
            k = 0
            while not stop.is_set():
                k += 1
                word = f"canary-{k}"
                start = time.monotonic()
                batch.send(encode_frame({"op": "step", "id": 2 + k % 1000, "slots": [0],
                                         "cols": {"message": [word]}}))  # fmt: skip
                reply = decode_frame(batch.recv(timeout=120))
                steps.append((start, time.monotonic() - start, "batch"))
                if list(reply.get("cols", {}).get("echoed_message", ())) != [word]:
                    error = f"batched step answered {reply!r:.300}"
                    break
                start = time.monotonic()
                json_ws.send(json.dumps({"type": "step", "data": {"message": word}}))
                answer = json.loads(json_ws.recv(timeout=120))
                steps.append((start, time.monotonic() - start, "json"))
                if answer.get("data", {}).get("observation", {}).get("echoed_message") != word:
                    error = f"/ws step answered {answer!r:.300}"
                    break
                stop.wait(period)
    except Exception as exc:  # reported by the parent
        error = repr(exc)
    out.write_text(json.dumps({"steps": steps, "error": error}))


_CANARIES = itertools.count()


class Canary:
    """The canary child process (:func:`canary`), started and stopped from here."""

    def __init__(self, url: str, tmp: Path) -> None:
        name = f"canary-{os.getpid()}-{next(_CANARIES)}"
        self.ready, self.out = tmp / f"{name}-ready", tmp / f"{name}-out"
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--role", "canary", url, str(self.ready), str(self.out)],
            stdin=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while not self.ready.exists():
            if self.child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the canary did not start")
            time.sleep(0.05)
        self.steps: list[tuple[float, float, str]] = []
        self.error: str | None = None

    def stop(self) -> None:
        """End the child and read its steps."""
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait(120)
        result = json.loads(self.out.read_text())
        self.steps = [tuple(step) for step in result["steps"]]  # type: ignore[misc]
        self.error = result["error"]

    def kill(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()

    def worst(self, window: tuple[float, float]) -> float | None:
        """The longest step that overlapped ``window``, seconds (None: no step did)."""
        a, b = window
        return max((s for t, s, _ in self.steps if t + s >= a and t <= b), default=None)

    def __enter__(self) -> Canary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


# ------------------------------------------------------------ frame attacks (issue 22)


def read_message(sock: socket.socket) -> tuple[int, bytes]:
    """(opcode, payload) of the next frame from the server."""

    def exactly(n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return bytes(data)

    first, second = exactly(2)
    size = second & 0x7F
    if size >= 126:
        size = int.from_bytes(exactly(2 if size == 126 else 8), "big")
    return first & 0x0F, exactly(size)


def masked_fragments(count: int, payload: bytes, filler: bytes = b"") -> bytes:
    """One text message of ``count`` frames: one byte of ``payload`` per frame while it
    lasts, then frames of ``filler`` (one byte or none); all masked with a zero key (so the
    bytes on the wire are the payload). Built by repetition: 3 M frames in well under a second.
    """
    zero = b"\x00\x00\x00\x00"

    def frame(first: int, piece: bytes) -> bytes:
        return bytes((first, 0x80 | len(piece))) + zero + piece

    head = [frame(0x1 if k == 0 else 0x0, payload[k : k + 1]) for k in range(len(payload))]
    rest = count - len(head) - 1
    middle = frame(0x0, filler) * rest if rest > 0 else b""
    return b"".join(head) + middle + frame(0x80, filler)


ATTACKS = ("empty-arrays", "extra-keys", "ws-extra-keys", "fragments-1M", "empty-fragments-3M")
"""The attacks of issue 22, items 1 and 2, by name."""


def build_attack(name: str, scale: float = 1.0) -> tuple[str, bytes, list[bytes]]:
    """(path, the frame(s) to send after the upgrade, frames sent before it).

    ``scale`` shrinks them (``--smoke``, tests); 1.0 is issue 22's size.
    """
    hello = masked(0x2, encode_frame({"op": "hello", "id": 0, "versions": [2]}))
    open_slot = masked(0x2, encode_frame({"op": "open", "id": 1, "slots": [0]}))
    if name == "empty-arrays":  # a 15 MB batched step whose message is 15 M empty arrays
        n = int(15_000_000 * scale)
        head = b"\x84" + b"".join(msgpack.packb(x) for x in ("op", "step", "id", 2, "slots", [0]))
        body = msgpack.packb("args") + b"\x91\x81" + msgpack.packb("message")
        body += b"\xdd" + n.to_bytes(4, "big") + b"\x90" * n
        return "/batch", masked(0x2, head + body), [hello, open_slot]
    if name == "extra-keys":  # a batched step whose action has 1.6 M extra keys
        n = int(1_600_000 * scale)
        action = {"message": "x", **{format(k, "x"): 0 for k in range(n)}}
        frame = encode_frame({"op": "step", "id": 2, "slots": [0], "args": [action]})
        return "/batch", masked(0x2, frame), [hello, open_slot]
    if name == "ws-extra-keys":  # a /ws step of 1.3 M extra keys
        n = int(1_300_000 * scale)
        data = {"message": "x", **{format(k, "x"): 0 for k in range(n)}}
        text = json.dumps({"type": "step", "data": data}, separators=(",", ":"))
        return "/ws", masked(0x1, text.encode()), [masked(0x1, b'{"type":"reset"}')]
    if name == "fragments-1M":  # 1 M one-byte fragments (7 MB)
        n = int(1_000_000 * scale)
        return "/ws", masked_fragments(n, b'{"type":"step","data":{"message":"', b"x"), []
    if name == "empty-fragments-3M":  # 3 M empty fragments (18 MB)
        n = int(3_000_000 * scale)
        return "/ws", masked_fragments(n, b"{"), []
    raise ValueError(f"unknown attack {name!r}")


def frame_attack(port: int, name: str, pid: int, scale: float = 1.0) -> dict[str, Any]:
    """One attack of issue 22 from a raw socket: what the attacker got, the server's RSS.

    The frames are built first (untimed); the window is from the first byte of the attack
    sent to the attacker's answer (an error frame, a close frame, or the connection gone).
    """
    path, frame, before = build_attack(name, scale)
    headers = [f"Sec-WebSocket-Protocol: {SUBPROTOCOL_V2}"] if path == "/batch" else []
    sock = upgrade(port, path, *headers)
    with sock:
        for early in before:
            sock.sendall(early)
            read_message(sock)
        got: dict[str, Any] = {}

        def reader() -> None:
            try:
                while True:
                    opcode, payload = read_message(sock)
                    if opcode == 0x8:
                        code = int.from_bytes(payload[:2], "big")
                        got["answer"] = {"close": code, "reason": payload[2:].decode()}
                        break
                    if opcode in (0x1, 0x2):
                        got["answer"] = _answer(opcode, payload)
                        got["reply_bytes"] = len(payload)
                        break
            except Exception as exc:
                got.setdefault("answer", {"lost": repr(exc)})
            got["at"] = time.monotonic()

        rss = Rss(pid)
        thread = threading.Thread(target=reader, daemon=True)
        start = time.monotonic()
        thread.start()
        with contextlib.suppress(OSError):
            sock.sendall(frame)
        sent = time.monotonic()
        thread.join(300)
        end = got.get("at", time.monotonic())
    after = rss.stop()
    return {
        "phase": f"attack {name}",
        "attack": name,
        "path": path,
        "frame_bytes": len(frame),
        "answer": got.get("answer"),
        "reply_bytes": got.get("reply_bytes"),
        "answered_ms": ms(end - start),
        "sent_ms": ms(sent - start),
        "window": (start, max(end, sent)),
        "rss_start_mb": round(rss.start / MB, 1),
        "rss_peak_mb": round(rss.peak / MB, 1),
        "rss_growth_mb": round((rss.peak - rss.start) / MB, 1),
        "rss_after_mb": round(after / MB, 1),
    }


def _answer(opcode: int, payload: bytes) -> dict[str, Any]:
    """The gist of an error the server answered with (code, message, per-slot codes)."""
    if opcode == 0x1:
        data = json.loads(payload).get("data", {})
        return {"code": data.get("code"), "message": str(data.get("message"))[:200]}
    reply = decode_frame(payload)
    if reply.get("op") == "error":
        return {"code": reply.get("code"), "message": str(reply.get("message"))[:200]}
    errors = reply.get("errors", {})
    return {"slot_codes": sorted({err[0] for err in errors.values()})}


# ----------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1 attack, 8 frames, 4 envs")
    parser.add_argument("--clients", default="batch,json", help="one stepping process each")
    parser.add_argument("--envs", type=int, default=16, help="sub-envs per stepping client")
    parser.add_argument("--repeats", type=int, default=20, help="3M-slot requests")
    parser.add_argument("--frames", type=int, default=80, help="unread frames per protocol")
    parser.add_argument("--quiet", type=float, default=2.0, help="seconds stepped before")
    parser.add_argument("--out", type=Path, help="JSONL file (default benchmarks/results/)")
    parser.add_argument(
        "--frame-attacks", default=",".join(ATTACKS), help="issue 22's attacks to make (none: '')"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="their size (1: issue 22's)")
    parser.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role and args.role[0] == "canary":
        _, url, ready, out = args.role
        canary(url, Path(ready), Path(out))
        return
    if args.role:
        _, url, protocol, n, ready, out = args.role
        stepper(url, protocol, int(n), Path(ready), Path(out))
        return
    if args.smoke:
        args.repeats, args.frames, args.envs, args.quiet, args.scale = 1, 8, 4, 0.5, 0.01
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or HERE / "results" / f"attacks-{stamp}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, server(Path(tmp) / "server.log") as (url, proc):
        port = int(url.rsplit(":", 1)[1])
        steppers = Steppers(url, args.clients.split(","), args.envs, Path(tmp))
        try:
            quiet_start = time.monotonic()
            time.sleep(args.quiet)
            quiet = (quiet_start, time.monotonic())
            state_rows, windows = attack_state(port, args.repeats)
            time.sleep(0.3)
            unread = [never_reading(port, p, args.frames, proc.pid) for p in ("/batch", "/ws")]
            time.sleep(0.3)
        finally:
            steppers.stop() if proc.poll() is None else None
            steppers.kill()
        attacks = [name for name in args.frame_attacks.split(",") if name]
        frame_rows = frame_attacks(url, proc.pid, attacks, args.scale, Path(tmp))
        log = server_refusals(Path(tmp) / "server.log")
    for k, row in enumerate(state_rows):  # the attacks are the only messages it refuses so
        seen = log[k] if len(log) == len(state_rows) else None
        row["server_ms"] = seen["ms"] if seen else None
        row["server_read_bytes"] = seen["read"] if seen else None
    context = {
        "run": stamp,
        "clients": args.clients,
        "envs": args.envs,
        "load_avg": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    quiet_steps = steppers.during([quiet])
    rows.append(
        {
            "phase": "quiet",
            "steps": len(quiet_steps),
            "p50_ms": ms(percentile(quiet_steps, 0.5)),
            "p99_ms": ms(percentile(quiet_steps, 0.99)),
        }
    )
    rows += state_rows
    during = steppers.during(windows)
    refused = [r["refused_ms"] for r in state_rows]
    server_ms = [r["server_ms"] for r in state_rows if r["server_ms"] is not None]
    rows.append(
        {
            "phase": "state-3M summary",
            "refused_ms_median": round(statistics.median(refused), 2),
            "refused_ms_max": max(refused),
            "round_trip_ms_max": max(r["round_trip_ms"] for r in state_rows),
            "server_ms_median": round(statistics.median(server_ms), 3) if server_ms else None,
            "server_ms_max": max(server_ms) if server_ms else None,
            "all_invalid_request": all(r["code"] == "INVALID_REQUEST" for r in state_rows),
            "others_steps": len(during),
            "others_p50_ms": ms(percentile(during, 0.5)),
            "others_p99_ms": ms(percentile(during, 0.99)),
            "others_max_ms": ms(max(during, default=None)),
        }
    )
    for row in unread:
        steps = steppers.during([row.pop("window")])
        row["others_steps"] = len(steps)
        row["others_p99_ms"] = ms(percentile(steps, 0.99))
        rows.append(row)
    rows.append({"phase": "stepper errors", "errors": steppers.errors})
    rows += frame_rows
    with out.open("w") as f:
        for row in rows:
            line = json.dumps({**context, **row})
            f.write(line + "\n")
            print(line)
    summary = rows[len(state_rows) + 1]
    print(
        f"\nstate-3M x{args.repeats}: error received {summary['refused_ms_median']} ms "
        f"(median; max {summary['refused_ms_max']}) after the first byte sent; server "
        f"{summary['server_ms_median']} ms (median; max {summary['server_ms_max']}); others' "
        f"step p99 {summary['others_p99_ms']} ms during ({rows[0]['p99_ms']} ms before)\n"
        + "".join(
            f"never-reading {r['path']}: {r['frames_taken']}/{r['frames_offered']} frames "
            f"taken, server RSS peak {r['rss_peak_mb']} MB (start {r['rss_start_mb']}), "
            f"others' p99 {r['others_p99_ms']} ms\n"
            for r in unread
        )
        + "".join(
            f"{r['phase']}: {r['answer']} after {r['answered_ms']} ms, canary's worst step "
            f"{r['canary_worst_ms']} ms, server RSS +{r['rss_growth_mb']} MB\n"
            for r in frame_rows
            if r["phase"].startswith("attack ")
        )
        + f"stepper errors: {steppers.errors or 'none'}; rows in {out}",
        file=sys.stderr,
    )
    canary_errors = [r["error"] for r in frame_rows if r["phase"] == "canary" and r["error"]]
    if steppers.errors or canary_errors or not summary["all_invalid_request"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
