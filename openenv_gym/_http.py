"""Plain HTTP GET of JSON (``/health``, ``/schema``, ``/metadata``), blocking, stdlib only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from openenv_gym.exceptions import ConnectError, RemoteProtocolError

__all__ = ["get_json", "http_base"]


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

    Non-2xx statuses are returned, not raised (the body is None if it is not JSON).
    ``headers`` are sent along (e.g. ``Authorization`` for a private Space).

    Raises:
        ConnectError: The server could not be reached.
        RemoteProtocolError: A 2xx reply whose body is not JSON.
    """
    request = urllib.request.Request(url, headers={**(headers or {}), "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ConnectError(f"GET {url} failed: {exc}") from exc
    try:
        return status, json.loads(raw)
    except ValueError as exc:
        raise RemoteProtocolError(f"GET {url}: body is not JSON") from exc
