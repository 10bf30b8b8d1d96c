"""Opening a client WebSocket: TCP, an HTTP ``CONNECT`` proxy, TLS, the upgrade, redirects.

:func:`upgrade` runs the opening handshake of RFC 6455 on a new socket and hands back the
socket with websockets' sans-I/O protocol in the ``OPEN`` state (:class:`Upgraded`);
:func:`openenv_gym.transport.wire.open_websocket` wraps that in a
:class:`~openenv_gym.transport.wire.WebSocket`. Every failure is a
:class:`~openenv_gym.exceptions.ConnectError` (or a subclass: :class:`HandshakeRefused`,
:class:`~openenv_gym.exceptions.AuthenticationError`).
"""

from __future__ import annotations

import base64
import contextlib
import socket
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidStatus, InvalidURI
from websockets.http11 import Response
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from openenv_gym._http import origin, redirect_headers
from openenv_gym._version import __version__
from openenv_gym.exceptions import AuthenticationError, ConnectError
from openenv_gym.protocol.upgrade import (
    IDLE_TIMEOUT_HEADER,
    KEEPALIVE_HEADER,
    KEEPALIVE_PING,
    parse_idle_timeout,
)
from openenv_gym.transport.waiting import remaining

__all__ = ["USER_AGENT", "HandshakeRefused", "NoAnswer", "Upgraded", "upgrade", "ws_url"]

USER_AGENT = f"openenv-gym/{__version__}"
"""The ``User-Agent`` of every request the client sends."""

_READ_SIZE = 256 * 1024
_MAX_REDIRECTS = 3


class NoAnswer(ConnectError):
    """The connection failed or ended before the server answered the upgrade at all.

    Refused, unreachable, reset, or closed without an HTTP response: nothing says whether
    the server speaks the protocol asked for. (A timeout, a TLS failure or a bad URL is a
    plain :class:`~openenv_gym.exceptions.ConnectError`.)
    """


class HandshakeRefused(ConnectError):
    """The server answered the upgrade request with an HTTP status instead of ``101``.

    Attributes:
        status: The HTTP status code.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Upgraded:
    """A socket on which the upgrade succeeded, and what came with the response.

    Attributes:
        sock: The connected socket (blocking mode, as the handshake left it).
        protocol: websockets' client protocol, ``OPEN``.
        url: The ``ws(s)://`` URL finally opened (after redirects).
        events: Frames parsed from bytes that came with the response (an error, a close).
        more: Whether any bytes came after the response (websockets may hold the start of
            a frame: it must parse what follows).
        idle_timeout: The idle timeout the server announced, seconds, after which it
            closes a connection that sent nothing; our pings count (we asked:
            :data:`~openenv_gym.protocol.upgrade.KEEPALIVE_HEADER`). None: none, or not
            announced (a server that does not count pings).
    """

    sock: socket.socket
    protocol: ClientProtocol
    url: str
    events: list[Any]
    more: bool
    idle_timeout: float | None = None


def ws_url(base_url: str, path: str) -> str:
    """``http(s)://host[:port][/prefix]`` (or ws(s)://, or bare host) -> ``ws(s)://.../path``."""
    url = base_url.strip().rstrip("/")
    for http_scheme, ws_scheme in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(http_scheme):
            url = ws_scheme + url[len(http_scheme) :]
    if "://" not in url:
        url = "ws://" + url
    return url + path


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def upgrade(
    url: str,
    *,
    subprotocols: Sequence[str] | None,
    headers: Mapping[str, str] | None,
    deadline: float | None,
    max_size: int,
) -> Upgraded:
    """Connect to ``url`` (``ws://`` or ``wss://``) and complete the upgrade by ``deadline``.

    Follows up to three redirects; ``headers`` (the token among them) go with a redirect
    within the origin only, never to another scheme, host or port
    (:func:`~openenv_gym._http.redirect_headers`). For a non-loopback host, the proxy from
    the usual environment variables (``https_proxy``, ``http_proxy``, ``no_proxy``) is
    used when it is an HTTP proxy.

    Raises:
        HandshakeRefused: The server answered with an HTTP status (e.g. 403, 404).
        AuthenticationError: That status was 401.
        ConnectError: Unreachable, TLS failure, a bad URL, a malformed handshake, a
            redirect that leaves TLS or HTTP, or nothing by ``deadline``.
    """
    named = url
    for _ in range(_MAX_REDIRECTS + 1):
        try:
            return _open_once(url, subprotocols, headers, deadline, max_size, named)
        except _Redirect as redirect:
            headers = redirect_headers(headers, url, redirect.location)
            url = redirect.location
    raise ConnectError(f"too many redirects opening {url}")


class _Redirect(Exception):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


def _open_once(
    url: str,
    subprotocols: Sequence[str] | None,
    headers: Mapping[str, str] | None,
    deadline: float | None,
    max_size: int,
    named: str,
) -> Upgraded:
    try:
        wsuri = parse_uri(url)
    except (InvalidURI, ValueError) as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc
    protocol = ClientProtocol(
        wsuri,
        subprotocols=[Subprotocol(s) for s in subprotocols] if subprotocols else None,
        max_size=max_size,
    )
    sock = _connect_socket(wsuri.host, wsuri.port, wsuri.secure, url, deadline)
    try:
        request = protocol.connect()
        request.headers["User-Agent"] = USER_AGENT
        request.headers[KEEPALIVE_HEADER] = KEEPALIVE_PING  # our pings are activity
        for name, value in (headers or {}).items():
            if name in request.headers:
                del request.headers[name]
            request.headers[name] = value
        protocol.send_request(request)
        _send_all(sock, b"".join(protocol.data_to_send()), deadline, url)
        response, leftover, more = _read_response(sock, protocol, deadline, url)
    except BaseException:
        with contextlib.suppress(OSError):
            sock.close()
        raise
    if protocol.handshake_exc is not None or response is None or response.status_code != 101:
        with contextlib.suppress(OSError):
            sock.close()
        status = response.status_code if response is not None else 0
        if status in (301, 302, 303, 307, 308) and response is not None:
            location = response.headers.get("Location")
            if location:
                http_url = "http" + url[2:]  # ws(s):// -> http(s)://, for urljoin
                raise _Redirect(ws_url(urllib.parse.urljoin(http_url, location), ""))
        problem = protocol.handshake_exc
        if status == 401:
            raise AuthenticationError(
                f"{url}: the server refused the WebSocket upgrade (HTTP 401: missing or wrong "
                f"token; pass token= or set OPENENV_GYM_TOKEN){_redirected(named, url)}"
            ) from problem
        if isinstance(problem, InvalidStatus) or (status and status != 101):
            raise HandshakeRefused(
                f"{url}: the server refused the WebSocket upgrade (HTTP {status})", status
            ) from problem
        raise ConnectError(f"cannot connect to {url}: {problem}") from problem
    idle = parse_idle_timeout(response.headers.get(IDLE_TIMEOUT_HEADER))
    return Upgraded(sock, protocol, url, leftover, more, idle)


def _redirected(named: str, url: str) -> str:
    """Why a 401 came from ``url``: ``named`` redirected to another origin (no token sent)."""
    if origin(named) == origin(url):
        return ""
    return (
        f"; {named} redirected there, another origin, where the token and headers are "
        "never sent: use that URL as base_url, with its token"
    )


def _connect_socket(
    host: str, port: int, secure: bool, url: str, deadline: float | None
) -> socket.socket:
    proxy = None if _is_loopback(host) else _proxy_for(url)
    try:
        if proxy is None:
            sock = socket.create_connection((host, port), timeout=remaining(deadline))
        else:
            sock = _tunnel(proxy, host, port, deadline, url)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if secure:
            context = ssl.create_default_context()
            sock.settimeout(remaining(deadline))
            sock = context.wrap_socket(sock, server_hostname=host)
    except TimeoutError as exc:
        raise ConnectError(f"connecting to {url} timed out") from exc
    except (ssl.SSLError, ValueError) as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc
    except OSError as exc:  # refused, unreachable, reset: nothing answered
        raise NoAnswer(f"cannot connect to {url}: {exc}") from exc
    return sock


def _proxy_for(url: str) -> str | None:
    """The HTTP proxy the environment asks for ``url``, if any (SOCKS is refused)."""
    http_url = "https" + url[3:] if url.startswith("wss") else "http" + url[2:]
    host = urllib.parse.urlsplit(http_url).hostname or ""
    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    scheme = "https" if url.startswith("wss") else "http"
    proxy = proxies.get(scheme) or proxies.get("all")
    if proxy is None:
        return None
    if "://" not in proxy:  # host:port, as curl and requests read it
        proxy = "http://" + proxy
    if not proxy.startswith("http://"):
        raise ConnectError(
            f"the proxy {proxy!r} for {url} is not an http:// proxy; openenv-gym tunnels "
            "through HTTP CONNECT proxies only (set no_proxy for this host to go direct)"
        )
    return proxy


def _tunnel(proxy: str, host: str, port: int, deadline: float | None, url: str) -> socket.socket:
    parts = urllib.parse.urlsplit(proxy)
    sock = socket.create_connection(
        (parts.hostname or "", parts.port or 80), timeout=remaining(deadline)
    )
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}", f"User-Agent: {USER_AGENT}"]
    if parts.username is not None:
        credentials = f"{urllib.parse.unquote(parts.username)}:"
        credentials += urllib.parse.unquote(parts.password or "")
        lines.append(
            f"Proxy-Authorization: Basic {base64.b64encode(credentials.encode()).decode()}"
        )
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        sock.settimeout(remaining(deadline))
        chunk = sock.recv(4096)
        if not chunk or len(head) > 65536:
            sock.close()
            raise ConnectError(f"proxy {proxy} closed the tunnel to {url}")
        head += chunk
    status_line = head.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or status_line[1] != b"200":
        sock.close()
        raise ConnectError(f"proxy {proxy} refused the tunnel to {url}: {head[:80]!r}")
    return sock


def _send_all(sock: socket.socket, data: bytes, deadline: float | None, url: str) -> None:
    try:
        sock.settimeout(remaining(deadline))
        sock.sendall(data)
    except TimeoutError as exc:
        raise ConnectError(f"connecting to {url} timed out") from exc
    except OSError as exc:
        raise NoAnswer(f"cannot connect to {url}: {exc}") from exc


def _read_response(
    sock: socket.socket, protocol: ClientProtocol, deadline: float | None, url: str
) -> tuple[Response | None, list[Any], bool]:
    """The response, the frames that came with it, and whether any bytes did."""
    received = bytearray()
    while True:
        try:
            sock.settimeout(remaining(deadline))
            data = sock.recv(_READ_SIZE)
        except TimeoutError as exc:
            raise ConnectError(f"connecting to {url} timed out") from exc
        except OSError as exc:
            raise NoAnswer(f"cannot connect to {url}: {exc}") from exc
        if data:
            protocol.receive_data(data)
            received += data
        else:
            protocol.receive_eof()
        events = protocol.events_received()
        for k, event in enumerate(events):
            if isinstance(event, Response):
                more = len(received) > received.find(b"\r\n\r\n") + 4  # no body after a 101
                return event, events[k + 1 :], more
        if not received:  # closed before a single byte of an answer
            raise NoAnswer(f"{url} closed the connection during the handshake")
        failed = protocol.handshake_exc
        if failed is not None:  # not an HTTP response at all
            raise ConnectError(f"{url} did not answer with HTTP: {failed}") from failed
        if not data:
            raise NoAnswer(f"{url} closed the connection during the handshake")
