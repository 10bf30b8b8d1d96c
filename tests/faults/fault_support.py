"""Helpers of the client-side fault tests (not a test module).

* :func:`no_leftovers` -- fixture: no process this test started may outlive it.
* :func:`counter_servers` -- fixture: local servers import the counter env of tests/vector
  (its SLOW action blocks the server until a gate file exists) and the envs of
  :mod:`openenv_gym_fault_envs` (the same, and it says when it is inside the step).
* :class:`CutProxy` -- a TCP proxy on 127.0.0.1 whose connections can be dropped at once
  (RST), while the server behind it keeps running, or stalled (nothing more forwarded).
* :class:`Watched` -- a local provider that records every restart it is asked for.
* :class:`Proxied` -- a provider whose servers are reached through :class:`CutProxy` s.
* :func:`wait_for` -- wait for a condition with a deadline that only stops a hang.
* :func:`detected` -- how long after a fault an error surfaced, printed (``pytest -s``);
  never asserted: speed is measured in ``benchmarks/``, not gated here.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openenv_gym.providers import LocalProvider, Provider

VECTOR_TESTS = Path(__file__).resolve().parents[1] / "vector"
if str(VECTOR_TESTS) not in sys.path:
    sys.path.insert(0, str(VECTOR_TESTS))

from openenv_gym_vector_envs import subprocess_pythonpath  # noqa: E402
from vector_checks import descendants, wait_gone  # noqa: E402

__all__ = [
    "FAULTS",
    "HANG",
    "CutProxy",
    "Proxied",
    "Watched",
    "counter_servers",
    "detected",
    "no_leftovers",
    "wait_for",
    "wait_gone",
]

FAULTS = Path(__file__).resolve().parent

HANG = 30.0
"""Seconds a test waits for an event before it calls it a hang (never a speed check)."""


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
    """Local servers started by the test can serve ``openenv_gym_vector_envs:CounterEnv``
    and ``openenv_gym_fault_envs:EnteringCounterEnv``."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAULTS), subprocess_pythonpath()]))


def detected(what: str, since: float) -> float:
    """Seconds from ``since`` to now, printed with ``what`` (a measurement, not a check)."""
    elapsed = time.monotonic() - since
    print(f"\n[faults] {what}: detected after {elapsed * 1000:.0f} ms")
    return elapsed


def wait_for(condition: Callable[[], bool], what: str, within: float = HANG) -> None:
    """Poll ``condition`` until it holds; fail after ``within`` s (a hang, not slowness)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {within} s")
        time.sleep(0.01)


class Watched(LocalProvider):
    """A :class:`~openenv_gym.providers.LocalProvider` that records the restarts asked of it.

    ``restarts`` lists the server index of each :meth:`restart` call, in order.
    """

    def __init__(self, server: str, **kwargs: object) -> None:
        super().__init__(server, **kwargs)  # type: ignore[arg-type]
        self.restarts: list[int] = []

    def restart(self, index: int) -> str:
        """Record, then restart as the local provider does."""
        self.restarts.append(index)
        return super().restart(index)


class Proxied(Provider):
    """Local servers, each reached through a :class:`CutProxy` (what the env connects to).

    :meth:`cut` drops every connection to server ``k`` while its process lives on (or is
    stopped), so the client sees a lost connection; :meth:`restart` starts a fresh server
    behind a fresh proxy. ``restarts`` records the restarts, as :class:`Watched` does.
    """

    def __init__(self, server: str, num_servers: int = 1) -> None:
        self.local = LocalProvider(server, num_servers=num_servers)
        self.proxies: list[CutProxy] = []
        self.restarts: list[int] = []

    def start(self) -> list[str]:
        """Start the servers and a proxy in front of each; the proxies' URLs."""
        urls = self.local.start()
        if not self.proxies:
            self.proxies = [CutProxy(_address(url)) for url in urls]
        return [proxy.url for proxy in self.proxies]

    def token(self, index: int) -> str | None:
        """The token of server ``index``."""
        return self.local.token(index)

    def alive(self, index: int) -> bool:
        """Whether server ``index``'s process runs (a stopped one does)."""
        return self.local.alive(index)

    def restart(self, index: int) -> str:
        """A fresh server behind a fresh proxy; its URL."""
        self.restarts.append(index)
        url = self.local.restart(index)
        self.proxies[index].close()
        self.proxies[index] = CutProxy(_address(url))
        return self.proxies[index].url

    def cut(self, index: int, only: int | None = None) -> None:
        """Drop every connection to server ``index`` now (or its ``only`` oldest)."""
        self.proxies[index].cut(only)

    @property
    def pids(self) -> list[int]:
        """The servers' process ids."""
        return self.local.pids

    def close(self) -> None:
        """Close the proxies and stop the servers."""
        for proxy in self.proxies:
            proxy.close()
        self.local.close()


def _address(url: str) -> tuple[str, int]:
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    return host, int(port)


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
        self.accepted = 0
        """How many connections it has accepted in all."""
        self._only: int | None = None
        self._stop = False
        self._cut = threading.Event()
        self._stall = threading.Event()
        self._stalled: list[tuple[socket.socket, socket.socket]] = []
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
            if self._stall.is_set():
                self._stall_all()
                self._stall.clear()
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
            self.accepted += 1
            try:
                upstream = socket.create_connection(self.target)
            except OSError:  # the server is gone: the client sees its connection closed
                client.close()
                return
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
        self._pairs = [pair for pair in self._pairs if source not in pair]
        self._drop(source, sink)

    def _drop(self, *socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()

    def cut(self, only: int | None = None) -> None:
        """Reset every connection now (the client sees ECONNRESET); the server lives on.

        ``only``: reset just the ``only`` oldest connections (in the order accepted).
        """
        self._only = only
        self._cut_done.clear()
        self._cut.set()
        assert self._cut_done.wait(HANG), "the proxy did not cut its connections"

    def stall(self) -> None:
        """Stop forwarding on every connection it has now, and pass no close on: the client
        hears nothing more (as behind a network that drops everything), whatever the server
        does. New connections are forwarded as before."""
        self._cut_done.clear()
        self._stall.set()
        assert self._cut_done.wait(HANG), "the proxy did not stall its connections"

    def _stall_all(self) -> None:
        pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(sock)
        self._stalled += pairs

    @property
    def connections(self) -> int:
        """How many connections it forwards now."""
        return len(self._pairs)

    def _reset_all(self) -> None:
        only, self._only = self._only, None
        if only is None:
            pairs, self._pairs = self._pairs, []
        else:
            pairs, self._pairs = self._pairs[:only], self._pairs[only:]
        for client, upstream in pairs:
            with contextlib.suppress(OSError):
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._drop(client, upstream)

    def close(self) -> None:
        """Cut everything and stop listening."""
        self._stop = True
        self._thread.join(5)
        self._reset_all()
        for pair in self._stalled:
            self._drop(*pair)
        self._drop(self._listener)
        self._selector.close()
