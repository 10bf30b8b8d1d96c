"""The token never follows a redirect to another origin (issue 22, finding 3).

Real servers on 127.0.0.1: an ``openenv-gym serve echo`` subprocess (no token), and in
front of it small HTTP hops that record the head of every request they get, then either
answer with a redirect or pass the connection on to the server unchanged. A redirect to
another port is another origin: the token and every ``headers=`` entry stay behind (the
env still works against a server that wants none); a redirect within the origin keeps
them. Covered: ``GET /schema`` and the WebSocket upgrades of ``gymnasium.make``, the
vector env, TRL's ``environment_factory`` and ``openenv-gym check``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import gymnasium
import pytest

import openenv_gym  # noqa: F401 - registers the openenv/* ids
from openenv_gym._http import get_json, redirect_headers
from openenv_gym.check import check_server
from openenv_gym.exceptions import AuthenticationError, ConnectError
from openenv_gym.integrations.trl import environment_factory
from openenv_gym.transport.wire import open_websocket

TOKEN = "redirect-test-secret-4a1f"
API_KEY = "x-api-key-value-9c3e"
SOON = 20.0
"""Seconds a read or a connect may take before the test calls it hung."""

Route = Callable[[str], tuple[str, str]]
"""path -> ("redirect", Location) or ("forward", path to send on)."""


@dataclass
class Hop:
    """An HTTP hop on 127.0.0.1 that records request heads and redirects or forwards.

    Args:
        route: What to do with a request for a path.
        target: ``(host, port)`` that "forward" connects to.
    """

    route: Route
    target: tuple[str, int] | None = None
    heads: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        accept = threading.Thread(target=self._accept, daemon=True)
        accept.start()
        self._threads.append(accept)

    def seen(self) -> str:
        """Every head received so far, joined."""
        with self._lock:
            return "\n".join(self.heads)

    def _accept(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(SOON)
            data = b""
            with contextlib.suppress(OSError):
                while b"\r\n\r\n" not in data and len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            text = head.decode("latin-1")
            with self._lock:
                self.heads.append(text)
            method, path, version = text.split("\r\n", 1)[0].split(" ", 2)
            action, where = self.route(path)
            if action == "redirect":
                with contextlib.suppress(OSError):
                    conn.sendall(
                        f"HTTP/1.1 307 Temporary Redirect\r\nLocation: {where}\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n".encode()
                    )
                return
            assert self.target is not None
            first = f"{method} {where} {version}".encode()
            lines = head.split(b"\r\n", 1)
            forwarded = first + (b"\r\n" + lines[1] if len(lines) > 1 else b"") + b"\r\n\r\n"
            self._pump(conn, forwarded + rest)

    def _pump(self, conn: socket.socket, first: bytes) -> None:
        assert self.target is not None
        with socket.create_connection(self.target, timeout=SOON) as upstream:
            upstream.sendall(first)
            with selectors.DefaultSelector() as selector:
                selector.register(conn, selectors.EVENT_READ, upstream)
                selector.register(upstream, selectors.EVENT_READ, conn)
                while not self._stopping:
                    for key, _ in selector.select(0.5):
                        try:
                            chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                            if not chunk:
                                return
                            key.data.sendall(chunk)
                        except OSError:
                            return

    def close(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        for thread in self._threads:
            thread.join(SOON)


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


@pytest.fixture
def hops(echo_server: tuple[str, int]) -> Iterator[Callable[[Route, bool], Hop]]:
    """Factory: ``hops(route, forward)`` -> a :class:`Hop` (forwarding to the echo server)."""
    made: list[Hop] = []

    def make(route: Route, forward: bool = True) -> Hop:
        hop = Hop(route, echo_server if forward else None)
        made.append(hop)
        return hop

    yield make
    for hop in made:
        hop.close()


@pytest.fixture
def cross_origin(hops: Callable[..., Hop]) -> tuple[Hop, Hop]:
    """``(first, elsewhere)``: every request to ``first`` is redirected to another port."""
    elsewhere = hops(lambda path: ("forward", path))
    first = hops(lambda path: ("redirect", elsewhere.url + path), False)
    return first, elsewhere


def _assert_kept_back(first: Hop, elsewhere: Hop, *paths: str) -> None:
    sent, received = first.seen(), elsewhere.seen()
    for path in paths:
        assert f" {path}" in sent, f"{path} never went to the first server"
        assert f" {path}" in received, f"{path} was not redirected"
    assert TOKEN in sent  # the token did go to the server it was meant for
    assert TOKEN not in received
    assert "authorization" not in received.lower()
    assert API_KEY not in received


# ------------------------------------------------------------------ the facades


def test_make_sends_no_token_across_origins(cross_origin: tuple[Hop, Hop]) -> None:
    first, elsewhere = cross_origin
    env = gymnasium.make(
        "openenv/Generic-v0", base_url=first.url, token=TOKEN, headers={"X-Api-Key": API_KEY}
    )
    try:
        env.reset(seed=1)
        env.step("hello")
    finally:
        env.close()
    _assert_kept_back(first, elsewhere, "/schema", "/batch")


def test_the_vector_env_sends_no_token_across_origins(cross_origin: tuple[Hop, Hop]) -> None:
    first, elsewhere = cross_origin
    envs = gymnasium.make_vec(
        "openenv/Generic-v0", num_envs=3, base_url=first.url, token=TOKEN, protocol="json"
    )
    try:
        envs.reset(seed=1)
        envs.step(["a", "b", "c"])
    finally:
        envs.close()
    _assert_kept_back(first, elsewhere, "/schema", "/ws")


def test_trl_factory_sends_no_token_across_origins(cross_origin: tuple[Hop, Hop]) -> None:
    first, elsewhere = cross_origin
    factory = environment_factory("openenv/Generic-v0", base_url=first.url, token=TOKEN)
    instance = factory()
    try:
        instance.reset(seed=1)
    finally:
        instance.env.close()
    _assert_kept_back(first, elsewhere, "/schema", "/ws")


def test_check_sends_no_token_across_origins(cross_origin: tuple[Hop, Hop]) -> None:
    first, elsewhere = cross_origin
    report = check_server(first.url, token=TOKEN, max_sessions=2, check_timeout=30.0)
    assert report.ok, report
    _assert_kept_back(first, elsewhere, "/health", "/schema", "/metadata", "/ws", "/batch")


# ------------------------------------------------------------------ the rules


def test_a_redirect_within_the_origin_keeps_the_token(hops: Callable[..., Hop]) -> None:
    def route(path: str) -> tuple[str, str]:
        if path.startswith("/v1/"):
            return "redirect", "/v2/" + path[len("/v1/") :]  # relative: same origin
        return "forward", path[len("/v2") :]

    hop = hops(route)
    env = gymnasium.make("openenv/Generic-v0", base_url=hop.url + "/v1", token=TOKEN)
    try:
        env.reset(seed=1)
    finally:
        env.close()
    moved = [head for head in hop.heads if " /v2/" in head.split("\r\n", 1)[0]]
    assert {head.split(" ", 2)[1] for head in moved} >= {"/v2/schema", "/v2/batch"}
    assert all(f"Bearer {TOKEN}" in head for head in moved)


def test_a_401_after_a_cross_origin_redirect_says_why(hops: Callable[..., Hop]) -> None:
    class Refuse(Hop):
        def _serve(self, conn: socket.socket) -> None:
            with conn:
                conn.settimeout(SOON)
                with contextlib.suppress(OSError):
                    conn.recv(65536)
                    conn.sendall(
                        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n"
                        b"Connection: close\r\n\r\n"
                    )

    refuse = Refuse(lambda path: ("forward", path))
    try:
        first = hops(lambda path: ("redirect", refuse.url + path), False)
        with pytest.raises(AuthenticationError, match="another origin"):
            get_json(first.url + "/schema", SOON, headers={"Authorization": f"Bearer {TOKEN}"})
        with pytest.raises(AuthenticationError, match="another origin"):
            open_websocket(first.url.replace("http", "ws") + "/ws", headers={"Authorization": "x"})
    finally:
        refuse.close()


@pytest.mark.parametrize(
    ("old", "new", "kept"),
    [
        ("http://a:8000/x", "http://a:8000/y", True),
        ("ws://a:8000/ws", "http://a:8000/ws", True),  # ws and http: one origin
        ("http://a/x", "http://a:80/y", True),  # the default port
        ("http://A/x", "http://a/y", True),  # host names are case-insensitive
        ("http://a:8000/x", "http://a:8001/x", False),  # another port
        ("http://a:8000/x", "http://b:8000/x", False),  # another host
        ("http://a/x", "https://a/x", False),  # another scheme
        ("ws://a/ws", "wss://a/ws", False),
    ],
)
def test_what_counts_as_one_origin(old: str, new: str, kept: bool) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert (redirect_headers(headers, old, new) == headers) is kept


@pytest.mark.parametrize(
    ("old", "new"),
    [("https://a/x", "http://a/x"), ("wss://a/ws", "ws://a/ws"), ("http://a/x", "ftp://a/x")],
)
def test_redirects_out_of_tls_or_http_are_refused(old: str, new: str) -> None:
    with pytest.raises(ConnectError, match="refused"):
        redirect_headers(None, old, new)


def test_a_redirect_to_ftp_is_refused_by_get_and_the_upgrade(hops: Callable[..., Hop]) -> None:
    first = hops(lambda path: ("redirect", "ftp://127.0.0.1/" + path), False)
    with pytest.raises(ConnectError, match="refused"):
        get_json(first.url + "/schema", SOON)
    with pytest.raises(ConnectError, match="refused"):
        open_websocket(first.url.replace("http", "ws") + "/ws")
