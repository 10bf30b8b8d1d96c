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

The other clients' step latencies are reported before the attacks (``quiet``) and over
the steps that overlap an attack. One JSON row per measurement goes to stdout and to
``--out`` (default ``benchmarks/results/attacks-<UTC timestamp>.jsonl``); a summary to
stderr. Issue 11's targets: refused in < 50 ms, others' step p99 < 100 ms, server RSS
< 200 MB.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
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

from openenv_gym.protocol.batch import SUBPROTOCOL, decode_frame, encode_frame

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
        sock.sendall(masked(0x2, encode_frame({"op": "open", "id": 1, "slots": [0]})))
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


def server_refusals(log: Path) -> list[dict[str, Any]]:
    """The server's refusals from the first bytes, in order (its DEBUG log)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        match = REFUSAL_LOG.search(line)
        if match:
            size, read, elapsed = match.groups()
            found.append({"ms": float(elapsed), "read": int(read), "size": int(size)})
    return found


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
    parser.add_argument("--role", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        _, url, protocol, n, ready, out = args.role
        stepper(url, protocol, int(n), Path(ready), Path(out))
        return
    if args.smoke:
        args.repeats, args.frames, args.envs, args.quiet = 1, 8, 4, 0.5
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
        + f"stepper errors: {steppers.errors or 'none'}; rows in {out}",
        file=sys.stderr,
    )
    if steppers.errors or not summary["all_invalid_request"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
