"""What our WebSocket upgrades carry besides RFC 6455's headers: the keepalive opt-in.

Both ends use these names: the server (``runtime/``) answers them, the client
(``transport/``) sends and reads them. A server that does not know them ignores them (an
OpenEnv server), and a client that does not send them is served as before.

* ``OpenEnv-Gym-Keepalive: ping`` on an upgrade request asks the server to count the
  client's WebSocket pings as activity for its idle timeout (by default only messages
  do, so a hostile client cannot hold sessions with pings alone): a client that pings
  while its process lives keeps its sessions through a long pause (a checkpoint, an
  evaluation).
* ``OpenEnv-Gym-Idle-Timeout`` on the server's ``101`` response says its idle timeout in
  seconds (``none``: it has none), so the client knows how often to ping.

>>> parse_idle_timeout("900"), parse_idle_timeout("none"), parse_idle_timeout(None)
(900.0, None, None)
"""

from __future__ import annotations

import math

__all__ = ["IDLE_TIMEOUT_HEADER", "KEEPALIVE_HEADER", "KEEPALIVE_PING", "parse_idle_timeout"]

KEEPALIVE_HEADER = "OpenEnv-Gym-Keepalive"
"""Request header of an upgrade: with :data:`KEEPALIVE_PING`, the client's pings count as
activity for the server's idle timeout."""

KEEPALIVE_PING = "ping"
"""The value of :data:`KEEPALIVE_HEADER` that opts in."""

IDLE_TIMEOUT_HEADER = "OpenEnv-Gym-Idle-Timeout"
"""Response header of an accepted upgrade: the server's idle timeout, seconds (or ``none``)."""


def parse_idle_timeout(value: str | None) -> float | None:
    """The idle timeout a server announced, in seconds; None: none, or not announced.

    A value that is not a positive number counts as not announced.
    """
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 < seconds < math.inf else None
