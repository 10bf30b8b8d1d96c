"""Plain HTTP GET of JSON (``/health``, ``/schema``, ``/metadata``), blocking, stdlib only.

Also how a bearer token becomes a header (:func:`with_token`), for these GETs and for the
WebSocket upgrades alike.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from openenv_gym.config import resolve_token
from openenv_gym.exceptions import AuthenticationError, ConnectError, RemoteProtocolError

__all__ = ["get_json", "http_base", "with_token"]


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
    request = urllib.request.Request(url, headers={**(headers or {}), "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            raise AuthenticationError(
                f"GET {url} answered 401: missing or wrong token (pass token= or set "
                "OPENENV_GYM_TOKEN)"
            ) from None
        return exc.code, None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConnectError(f"GET {url} failed: {exc}") from exc
    try:
        return status, json.loads(raw)
    except ValueError as exc:
        raise RemoteProtocolError(f"GET {url}: body is not JSON") from exc
