"""What a server accepts: :class:`ServerConfig`, its limits, and their checks.

Every limit is one field of :class:`ServerConfig`, declared once with its kind and a line
of help (:func:`options`); ``openenv-gym serve`` makes one flag of each
(``idle_timeout`` -> ``--idle-timeout``) and one ``OPENENV_GYM_*`` variable
(``OPENENV_GYM_IDLE_TIMEOUT``), and ``docs/security.md`` lists them. A config is checked
when it is made, so a server never starts with a limit that refuses every client, on a
port that does not exist, or reachable from other machines without a token::

    >>> ServerConfig(max_frame=0)
    Traceback (most recent call last):
    ...
    openenv_gym.exceptions.ConfigurationError: max_frame must be a positive integer, got 0
"""

from __future__ import annotations

import dataclasses
import enum
import ipaddress
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from openenv_gym._version import __version__
from openenv_gym.config import env_count, env_float, env_str, resolve_token
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.protocol.fragments import DEFAULT_MAX_FRAGMENTS

if TYPE_CHECKING:
    from openenv_gym.runtime.interfaces import Limits

__all__ = ["SERVER_NAME", "Option", "ServerConfig", "ServerMode", "is_loopback", "options"]

SERVER_NAME = f"openenv-gym/{__version__}"

_T = TypeVar("_T")

_COUNT = "count"
_SECONDS = "seconds"
_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what fits a header unchanged


def _option(default: _T, kind: str, doc: str) -> _T:
    """A limit field: its default, kind (a count or size, or seconds) and one line of help."""
    return field(default=default, metadata={"kind": kind, "help": doc})


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (127.0.0.0/8, ::1, localhost).

    >>> is_loopback("127.0.0.2"), is_loopback("::1"), is_loopback("0.0.0.0"), is_loopback("")
    (True, True, False, False)
    """
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another name: it may resolve to anything


class ServerMode(enum.StrEnum):
    """Which OpenEnv HTTP endpoints a server answers (OpenEnv's ``ServerMode``).

    Attributes:
        SIMULATION: All of them, HTTP ``/reset``, ``/step``, ``/state`` included (OpenEnv's
            default, and ours: what ``create_app`` serves unless told otherwise).
        PRODUCTION: No HTTP ``/reset``, ``/step`` or ``/state`` (agents use ``/mcp``);
            ``/ws`` and ``/batch`` stay.
    """

    SIMULATION = "simulation"
    PRODUCTION = "production"

    @classmethod
    def of(cls, value: ServerMode | str) -> ServerMode:
        """``value`` as a mode, case-insensitive.

        >>> ServerMode.of("Production")
        <ServerMode.PRODUCTION: 'production'>

        Raises:
            ConfigurationError: Not a mode.
        """
        try:
            return cls(str(value).lower())
        except ValueError:
            modes = ", ".join(m.value for m in cls)
            raise ConfigurationError(f"unknown server mode {value!r}: use {modes}") from None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Server settings, checked when made (``docs/security.md``).

    Attributes:
        host: Address to bind. 127.0.0.1 unless told otherwise; any address that is not a
            loopback one needs a ``token`` (or ``insecure=True``).
        port: Port to bind, 0..65535; 0 picks a free one (read it back from
            :attr:`EnvServer.url`).
        max_sessions: Most environment instances alive at once, over both endpoints.
        max_frame: Largest WebSocket message accepted, in bytes (fragments together).
        max_fragments: Most frames one WebSocket message may come in (empty continuation
            frames count); beyond, the connection is failed with 1009.
        max_values: Most values one WebSocket message or HTTP JSON body may decode into
            (``docs/security.md``): checked while (msgpack) or before (JSON) decoding, so
            no message costs more than that to decode, validate and answer.
        max_http_sessions: Most MCP sessions created over plain HTTP
            (``openenv/session/create``) open at once: they hold an instance with no
            connection, until closed or idle for ``idle_timeout``.
        compression: Accept permessage-deflate when a client offers it (off by default: it
            costs ~30 % throughput on loopback).
        ping_interval: Seconds between WebSocket pings (None: no pings).
        ping_timeout: Seconds to wait for a pong before dropping the connection.
        max_connections: Open connections at once, HTTP and WebSocket (503 beyond).
        max_request_slots: Most slots one batched request may name (refused whole beyond,
            before any per-slot work).
        max_connection_slots: Most slots one batched connection may hold open.
        idle_timeout: Seconds a WebSocket may go without a message from its peer; pings
            do not count (None: forever). Closing it frees its sessions.
        handshake_timeout: Seconds a new connection has to send its request head.
        max_body: Largest HTTP request body, bytes.
        max_queue_bytes: Received bytes one connection may have waiting to be handled
            (reading pauses beyond).
        max_send_buffer: Written bytes one connection may have waiting for its peer
            (requests wait beyond).
        send_timeout: Seconds a peer may take nothing we send before it is dropped.
        token: The bearer token every request must carry (None: none): visible ASCII,
            compared in constant time.
        allowed_origins: ``Origin`` values accepted; a request with any other ``Origin``
            (web browsers send one) is refused with 403.
        insecure: Serve a non-loopback ``host`` without a token (a warning is logged).
        mode: :class:`ServerMode` (a string is accepted): ``simulation`` (default) also
            answers HTTP ``/reset``, ``/step``, ``/state``; ``production`` does not.
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_sessions: int = _option(
        4096, _COUNT, "most live environment instances, /ws sessions and /batch slots together"
    )
    max_frame: int = _option(16 * 2**20, _COUNT, "largest WebSocket message, bytes")
    max_fragments: int = _option(
        DEFAULT_MAX_FRAGMENTS, _COUNT, "most frames one WebSocket message may come in"
    )
    max_values: int = _option(2**16, _COUNT, "most values one message or JSON body may decode into")
    max_http_sessions: int = _option(
        256, _COUNT, "most MCP sessions created over HTTP (no connection) open at once"
    )
    compression: bool = False
    ping_interval: float | None = _option(20.0, _SECONDS, "seconds between WebSocket pings")
    ping_timeout: float | None = _option(20.0, _SECONDS, "seconds to wait for a pong")
    max_connections: int = _option(8192, _COUNT, "open connections at once; 503 beyond")
    max_request_slots: int = _option(8192, _COUNT, "most slots one batched request may name")
    max_connection_slots: int = _option(
        8192, _COUNT, "most slots one batched connection may hold open"
    )
    idle_timeout: float | None = _option(
        900.0, _SECONDS, "seconds a WebSocket may send no message; pings do not count"
    )
    handshake_timeout: float | None = _option(
        10.0, _SECONDS, "seconds a connection has to send its request head"
    )
    max_body: int = _option(2**20, _COUNT, "largest HTTP request body, bytes")
    max_queue_bytes: int = _option(
        16 * 2**20, _COUNT, "received bytes waiting per connection; reading pauses beyond"
    )
    max_send_buffer: int = _option(
        16 * 2**20, _COUNT, "unsent bytes per connection; its requests wait beyond"
    )
    send_timeout: float | None = _option(
        60.0, _SECONDS, "seconds a peer may take nothing we send before it is dropped"
    )
    token: str | None = None
    allowed_origins: tuple[str, ...] = ()
    insecure: bool = False
    mode: ServerMode = ServerMode.SIMULATION

    def __post_init__(self) -> None:
        for option in options():
            _check(option.name, option.kind, getattr(self, option.name))
        port = self.port
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ConfigurationError(f"port must be in 0..65535, got {port!r}")
        if not isinstance(self.host, str):
            raise ConfigurationError(f"host must be a string, got {self.host!r}")
        if self.token is not None and not (
            isinstance(self.token, str) and _TOKEN.fullmatch(self.token)
        ):
            raise ConfigurationError(
                "token must be a non-empty string of visible ASCII characters (no spaces)"
            )
        origins: Any = self.allowed_origins  # a list or a string, from careless callers
        if isinstance(origins, str) or not all(isinstance(origin, str) for origin in origins):
            raise ConfigurationError(
                f"allowed_origins must be a tuple of strings, got {self.allowed_origins!r}"
            )
        object.__setattr__(self, "allowed_origins", tuple(self.allowed_origins))
        object.__setattr__(self, "mode", ServerMode.of(self.mode))
        if self.exposed and not self.insecure:
            raise ConfigurationError(
                f"refusing to serve on {self.host or 'every address'!r} without a token: "
                "other machines could drive its environments. Give a token "
                "(--token or OPENENV_GYM_TOKEN; token= in Python), bind 127.0.0.1, "
                "or pass --insecure (insecure=True) to serve without one"
            )

    @property
    def exposed(self) -> bool:
        """Whether other machines may reach the server with no token to show."""
        return self.token is None and not is_loopback(self.host)

    @classmethod
    def from_env(cls, **overrides: Any) -> ServerConfig:
        """Defaults, then the ``OPENENV_GYM_*`` variables, then ``overrides``.

        The variables: ``OPENENV_GYM_TOKEN``, ``OPENENV_GYM_MODE``, and each limit's.

        A limit's variable is ``OPENENV_GYM_`` and its name in capitals
        (``OPENENV_GYM_IDLE_TIMEOUT``); times take ``none`` / ``off``.

        Raises:
            ConfigurationError: A variable or an override is invalid (named in the message).
        """
        values: dict[str, Any] = {}
        for option in options():
            if option.kind == _COUNT:
                values[option.name] = env_count(option.env_var, option.default)
            else:
                values[option.name] = env_float(option.env_var, option.default)
        token = resolve_token()
        if token is not None:
            values["token"] = token
        mode = env_str("OPENENV_GYM_MODE")
        if mode is not None:
            values["mode"] = mode
        values.update(overrides)
        return cls(**values)

    def limits(self) -> Limits:
        """The connection layer's limits."""
        from openenv_gym.runtime.interfaces import Limits

        return Limits(
            max_connections=self.max_connections,
            handshake_timeout=self.handshake_timeout,
            idle_timeout=self.idle_timeout,
            max_frame=self.max_frame,
            max_fragments=self.max_fragments,
            max_body=self.max_body,
            max_queue_bytes=self.max_queue_bytes,
            max_send_buffer=self.max_send_buffer,
            send_timeout=self.send_timeout,
            ping_interval=self.ping_interval,
            ping_timeout=self.ping_timeout,
            token=self.token,
            allowed_origins=self.allowed_origins,
            server_name=SERVER_NAME,
            compression=self.compression,
        )


@dataclass(frozen=True, slots=True)
class Option:
    """One limit of :class:`ServerConfig`, as the command line and the docs show it.

    Attributes:
        name: The field (``idle_timeout``).
        kind: ``"count"`` (a positive integer: a count or bytes) or ``"seconds"`` (a
            positive number, or None to disable).
        default: The field's default.
        help: One line of help.
    """

    name: str
    kind: str
    default: Any
    help: str

    @property
    def flag(self) -> str:
        """The ``openenv-gym serve`` flag: ``--idle-timeout``."""
        return "--" + self.name.replace("_", "-")

    @property
    def env_var(self) -> str:
        """The environment variable: ``OPENENV_GYM_IDLE_TIMEOUT``."""
        return "OPENENV_GYM_" + self.name.upper()


def options() -> Iterator[Option]:
    """The limits of :class:`ServerConfig`, in declaration order.

    >>> [o.flag for o in options()][:2]
    ['--max-sessions', '--max-frame']
    """
    for f in dataclasses.fields(ServerConfig):
        if "kind" in f.metadata:
            yield Option(f.name, f.metadata["kind"], f.default, f.metadata["help"])


def _check(name: str, kind: str, value: Any) -> None:
    if kind == _COUNT:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    elif value is not None and (
        not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < math.inf
    ):
        raise ConfigurationError(f"{name} must be > 0 seconds or None, got {value!r}")
