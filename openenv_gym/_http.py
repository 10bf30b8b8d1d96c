"""Plain HTTP GET and POST of JSON (``/health``, ``/schema``, ``/mcp``), blocking, stdlib only.

Also how a bearer token becomes a header (:func:`with_token`), and what of a request's
headers survives a redirect (:func:`redirect_headers`), for these GETs and for the
WebSocket upgrades alike.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import IO, Any

from openenv_gym.config import resolve_token
from openenv_gym.exceptions import AuthenticationError, ConnectError, RemoteProtocolError

__all__ = ["get_json", "http_base", "origin", "post_json", "redirect_headers", "with_token"]

_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def with_token(
    headers: Mapping[str, str] | None, token: str | None, *, from_env: bool = True
) -> dict[str, str] | None:
    """``headers`` plus ``Authorization: Bearer <token>``.

    ``token`` None: ``OPENENV_GYM_TOKEN`` (when ``from_env``), unless ``headers`` already
    carry an ``Authorization`` (a token given here replaces it). No token at all:
    ``headers`` as they are.

    >>> with_token({"X-Trace": "1"}, "s3cret")
    {'X-Trace': '1', 'Authorization': 'Bearer s3cret'}
    >>> with_token(None, None, from_env=False) is None
    True
    """
    given = dict(headers or {})
    has_auth = any(name.lower() == "authorization" for name in given)
    if token is None and not has_auth and from_env:
        token = resolve_token()
    if token is None:
        return given or None
    for name in [name for name in given if name.lower() == "authorization"]:
        del given[name]
    given["Authorization"] = f"Bearer {token}"
    return given


def origin(url: str) -> tuple[str, str, int]:
    """The origin of ``url`` (RFC 6454): scheme, host and port; ``ws(s)`` count as ``http(s)``.

    >>> origin("ws://Example.org/ws") == origin("http://example.org:80/schema")
    True
    >>> origin("https://example.org") == origin("http://example.org")
    False

    Raises:
        ValueError: Not an ``http(s)://`` or ``ws(s)://`` URL, or a bad port.
    """
    parts = urllib.parse.urlsplit(url)
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        raise ValueError(f"not an http(s):// or ws(s):// URL: {url!r}")
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS[scheme]


def redirect_headers(
    headers: Mapping[str, str] | None, old_url: str, new_url: str
) -> Mapping[str, str] | None:
    """What of ``headers`` goes on to ``new_url`` when ``old_url`` redirects there.

    All of them within one origin (scheme, host, port); none to another origin: the
    headers a caller gives (the bearer token, ``headers=``, whatever carries credentials)
    are meant for the server it named, so they never follow a redirect elsewhere, as
    well-kept HTTP clients drop ``Authorization``.

    >>> redirect_headers({"Authorization": "Bearer s3cret"}, "ws://a:1/ws", "ws://a:1/v2/ws")
    {'Authorization': 'Bearer s3cret'}
    >>> redirect_headers({"Authorization": "Bearer s3cret"}, "ws://a:1/ws", "ws://a:2/ws")

    Raises:
        ConnectError: ``new_url`` is not http(s) or ws(s), or the redirect leaves TLS
            (``https`` / ``wss`` to plain ``http`` / ``ws``).
    """
    try:
        old, new = origin(old_url), origin(new_url)
    except ValueError as exc:
        raise ConnectError(f"{old_url} redirected to {new_url}: refused ({exc})") from None
    if old[0] == "https" and new[0] != "https":
        raise ConnectError(f"{old_url} redirected to {new_url}: refused (it leaves TLS)")
    return headers if old == new else None


def http_base(url: str) -> str:
    """Normalise a base URL to ``http(s)://host[:port][/prefix]`` without a trailing slash."""
    url = url.strip().rstrip("/")
    if url.startswith("ws://"):
        return "http://" + url[5:]
    if url.startswith("wss://"):
        return "https://" + url[6:]
    if "://" not in url:
        return "http://" + url
    return url


def get_json(
    url: str, timeout: float | None, *, headers: Mapping[str, str] | None = None
) -> tuple[int, Any]:
    """GET ``url`` and parse its JSON body; returns ``(status, body)``.

    Non-2xx statuses but 401 are returned, not raised (the body is None if it is not
    JSON). ``headers`` are sent along (e.g. ``Authorization``: :func:`with_token`).

    Raises:
        AuthenticationError: 401: the token is missing or wrong.
        ConnectError: The server could not be reached.
        RemoteProtocolError: A 2xx reply whose body is not JSON.
    """
    return _request("GET", url, None, timeout, headers)


def post_json(
    url: str, payload: Any, timeout: float | None, *, headers: Mapping[str, str] | None = None
) -> tuple[int, Any]:
    """POST ``payload`` as JSON to ``url`` (``POST /mcp``); as :func:`get_json` otherwise.

    Raises:
        AuthenticationError: 401: the token is missing or wrong.
        ConnectError: The server could not be reached.
        RemoteProtocolError: A 2xx reply whose body is not JSON.
    """
    return _request("POST", url, json.dumps(payload).encode(), timeout, headers)


def _request(
    method: str,
    url: str,
    body: bytes | None,
    timeout: float | None,
    headers: Mapping[str, str] | None,
) -> tuple[int, Any]:
    sent = {**(headers or {}), "Accept": "application/json"}
    if body is not None:
        sent["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=body, headers=sent, method=method)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise AuthenticationError(
                f"{method} {url} answered 401: missing or wrong token (pass token= or set "
                f"OPENENV_GYM_TOKEN){_after_redirect(url, exc.url)}"
            ) from None
        return exc.code, None
    except _RedirectRefused as exc:
        raise exc.error from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConnectError(f"{method} {url} failed: {exc}") from exc
    try:
        return status, json.loads(raw)
    except ValueError as exc:
        raise RemoteProtocolError(f"{method} {url}: body is not JSON") from exc


def _after_redirect(url: str, final: str | None) -> str:
    """Why a 401 may come from another server than ``url``: it redirected elsewhere."""
    if final is None or final == url:
        return ""
    try:
        same = origin(url) == origin(final)
    except ValueError:
        same = False
    if same:
        return ""
    return (
        f"; it redirected to {final}, another origin, where the token and headers are never "
        "sent: use that URL as base_url, with its token"
    )


class _RedirectRefused(urllib.error.URLError):
    """A redirect :func:`redirect_headers` refuses, carried through urllib to :func:`get_json`."""

    def __init__(self, error: ConnectError) -> None:
        super().__init__(str(error))
        self.error = error


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects (301, 302, 303, 307, 308), headers as :func:`redirect_headers` says."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        try:
            kept = redirect_headers(req.headers, req.full_url, newurl)
        except ConnectError as exc:
            raise _RedirectRefused(exc) from None
        follow = super().redirect_request(req, fp, code, msg, headers, newurl)
        if follow is None or kept is not None:
            return follow
        return urllib.request.Request(
            follow.full_url,
            headers={"Accept": "application/json"},
            origin_req_host=req.origin_req_host,
            unverifiable=True,
        )


_OPENER = urllib.request.build_opener(_Redirects)
