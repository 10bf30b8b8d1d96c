"""Connection errors name the protocol actually tried (issue 25, item 4).

With ``protocol="auto"`` the client asks for the batched protocol first (``/batch``). A
server that speaks only OpenEnv's JSON protocol may refuse that upgrade (the client then
opens ``/ws``), or hang up on it without a word: that too now falls back to ``/ws``,
where the client used to stop with an error about ``/batch``. An error says which
protocol it comes from: both, when neither answered; the batched one, with how to skip
it, when the batched upgrade timed out.

Real servers on 127.0.0.1: ``openenv-gym serve echo`` behind a small TCP hop that hangs up
on the paths it is told to (as a JSON-only server may on ``/batch``), a port where nothing
listens, and a listener that never answers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from openenv_gym.config import Timeouts
from openenv_gym.exceptions import ConnectError
from openenv_gym.transport.session import open_session

SOON = 20.0
"""Seconds a wait may take before the test calls it hung."""

TIMEOUTS = Timeouts(connect=SOON, step=SOON, close=1.0)


@pytest.fixture(scope="module")
def echo_server() -> Iterator[tuple[str, int]]:
    """``openenv-gym serve echo`` with no token, for the whole module: ``(host, port)``."""
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_GYM_TOKEN"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv_gym", "serve", "echo", "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:"), line
        yield "127.0.0.1", int(line.rsplit(":", 1)[1])
    finally:
        proc.kill()
        proc.wait(SOON)


class HangUp:
    """A TCP hop to ``target`` that closes, unanswered, every request for ``paths``.

    Other requests are passed on to the server and its answers back, byte for byte.
    """

    def __init__(self, target: tuple[str, int], paths: set[str]) -> None:
        self.target, self.paths = target, paths
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ", 2)[1].decode()
            if path in self.paths:
                return  # hang up: no HTTP answer
            with socket.create_connection(self.target, timeout=SOON) as upstream:
                upstream.sendall(head)
                self._spawn(_pipe, upstream, conn)
                _pipe(conn, upstream)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for thread in self._threads:
            thread.join(SOON)


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def hang_up(echo_server: tuple[str, int]) -> Iterator[Callable[[set[str]], HangUp]]:
    """Factory of :class:`HangUp` hops in front of the echo server, closed at teardown."""
    made: list[HangUp] = []

    def make(paths: set[str]) -> HangUp:
        hop = HangUp(echo_server, paths)
        made.append(hop)
        return hop

    yield make
    for hop in made:
        hop.close()


def test_a_server_that_hangs_up_on_batch_is_used_through_ws(
    hang_up: Callable[[set[str]], HangUp],
) -> None:
    hop = hang_up({"/batch"})
    session = open_session(hop.url, protocol="auto", timeouts=TIMEOUTS)
    try:
        assert session.protocol == "json"
        session.reset(seed=1)
        assert session.step({"message": "[hi]"}).observation
    finally:
        session.close()


def test_no_answer_to_either_protocol_names_both(hang_up: Callable[[set[str]], HangUp]) -> None:
    hop = hang_up({"/batch", "/ws"})
    with pytest.raises(ConnectError) as caught:
        open_session(hop.url, protocol="auto", timeouts=TIMEOUTS)
    message = str(caught.value)
    assert "no answer to either protocol" in message
    assert "/batch" in message
    assert "/ws" in message


def test_an_unreachable_server_is_said_so_for_both_protocols() -> None:
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ConnectError, match="no answer to either protocol") as caught:
        open_session(f"http://127.0.0.1:{port}", protocol="auto", timeouts=TIMEOUTS)
    assert "/ws" in str(caught.value)


def test_json_only_names_ws_only(hang_up: Callable[[set[str]], HangUp]) -> None:
    hop = hang_up({"/ws"})
    with pytest.raises(ConnectError) as caught:
        open_session(hop.url, protocol="json", timeouts=TIMEOUTS)
    assert "/ws" in str(caught.value)
    assert "/batch" not in str(caught.value)


def test_a_batched_upgrade_that_times_out_says_how_to_skip_it() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ConnectError) as caught:
            open_session(url, protocol="auto", timeouts=Timeouts(connect=0.5))
    message = str(caught.value)
    assert "/batch" in message
    assert "timed out" in message
    assert "protocol='json'" in message
