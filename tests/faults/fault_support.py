"""Helpers of the client-side fault tests (not a test module).

* :func:`no_leftovers` -- fixture: no process this test started may outlive it.
* :func:`counter_servers` -- fixture: local servers import the counter env of tests/vector
  (its SLOW action blocks the server until a gate file exists).
* :class:`CutProxy` -- a TCP proxy on 127.0.0.1 whose connections can be dropped at once
  (RST), while the server behind it keeps running.
* :func:`detected` -- how long after a fault an error surfaced; printed (``pytest -s``) and
  checked against a generous bound only: speed is measured, not gated.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

VECTOR_TESTS = Path(__file__).resolve().parents[1] / "vector"
if str(VECTOR_TESTS) not in sys.path:
    sys.path.insert(0, str(VECTOR_TESTS))

from openenv_gym_vector_envs import subprocess_pythonpath  # noqa: E402
from vector_checks import descendants, wait_gone  # noqa: E402

__all__ = ["CutProxy", "counter_servers", "detected", "no_leftovers", "wait_gone"]


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    """Fail the test if a process it started (a server, a client) is still running."""
    before = descendants()
    yield
    left = wait_gone(descendants() - before)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
    assert not left, f"processes left running: {sorted(left)}"


@pytest.fixture
def counter_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Local servers started by the test can serve ``openenv_gym_vector_envs:CounterEnv``."""
    monkeypatch.setenv("PYTHONPATH", subprocess_pythonpath())


def detected(what: str, since: float, bound: float) -> float:
    """Seconds from ``since`` to now; printed, and asserted below ``bound`` (generous)."""
    elapsed = time.monotonic() - since
    print(f"\n[faults] {what}: detected after {elapsed * 1000:.0f} ms")
    assert elapsed < bound, f"{what}: took {elapsed:.2f} s (bound {bound} s)"
    return elapsed


class CutProxy:
    """Forwards every connection to ``target``; :meth:`cut` drops them all with a RST.

    The listening socket stays open, so new connections work after a cut.

    Args:
        target: ``(host, port)`` of the server.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._stop = False
        self._cut = threading.Event()
        self._cut_done = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="cut-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        while not self._stop:
            if self._cut.is_set():
                self._reset_all()
                self._cut.clear()
                self._cut_done.set()
            for key, _ in self._selector.select(0.01):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                    continue
                self._pump(sock, key.data)

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            client, _ = self._listener.accept()
            upstream = socket.create_connection(self.target)
            for sock in (client, upstream):
                sock.setblocking(False)
            self._pairs.append((client, upstream))
            self._selector.register(client, selectors.EVENT_READ, upstream)
            self._selector.register(upstream, selectors.EVENT_READ, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            data = source.recv(65536)
            if data:
                sink.sendall(data)  # small frames: the peer's buffer has room
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._drop(source, sink)

    def _drop(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()

    def cut(self) -> None:
        """Reset every connection now (the client sees ECONNRESET); the server lives on."""
        self._cut_done.clear()
        self._cut.set()
        assert self._cut_done.wait(5), "the proxy did not cut its connections"

    def _reset_all(self) -> None:
        pairs, self._pairs = self._pairs, []
        for client, upstream in pairs:
            with contextlib.suppress(OSError):
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._drop(client, upstream)

    def close(self) -> None:
        """Cut everything and stop listening."""
        self._stop = True
        self._thread.join(5)
        self._reset_all()
        self._drop(self._listener)
        self._selector.close()
