"""Async drivers over the sans-I/O protocols: the only code that touches sockets.

* :class:`JsonSession` -- one OpenEnv ``/ws`` session (one environment instance).
* :class:`BatchConnection` -- one batched ``/batch`` connection carrying many slots,
  several requests in flight, replies matched by request id.

Every third-party exception is converted here, once, to :mod:`openenv_gym.exceptions`.
A timeout or a lost connection is fatal: the socket is dropped, so no late reply can
ever be taken for the answer to a later request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol

from openenv_gym._version import __version__
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import (
    ConnectError,
    ConnectionLostError,
    OpenEnvGymError,
    ProtocolError,
    RemoteProtocolError,
    RequestTimeoutError,
    ServerError,
    UsageError,
    server_error,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op

__all__ = ["BatchConnection", "BatchUnsupportedError", "JsonSession", "ws_url"]

logger = logging.getLogger("openenv_gym.transport")

MAX_MESSAGE = 100 * 2**20  # the official client's receive cap (100 MB)


class BatchUnsupportedError(ConnectError):
    """The server does not speak the batched protocol (fall back to JSON ``/ws``)."""


def ws_url(base_url: str, path: str) -> str:
    """``http(s)://host[:port][/prefix]`` (or ws(s)://, or bare host) -> ``ws(s)://.../path``."""
    url = base_url.strip().rstrip("/")
    for http_scheme, ws_scheme in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(http_scheme):
            url = ws_scheme + url[len(http_scheme) :]
    if "://" not in url:
        url = "ws://" + url
    return url + path


async def _open(
    base_url: str,
    path: str,
    timeouts: Timeouts,
    subprotocols: Sequence[str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> ClientConnection:
    url = ws_url(base_url, path)
    try:
        async with asyncio.timeout(timeouts.connect):
            return await connect(
                url,
                compression=None,
                max_size=MAX_MESSAGE,
                subprotocols=[Subprotocol(s) for s in subprotocols] if subprotocols else None,
                additional_headers=dict(headers) if headers else None,
                user_agent_header=f"openenv-gym/{__version__}",
                open_timeout=None,
                close_timeout=timeouts.close,
                max_queue=64,
                proxy=None if _is_loopback(url) else True,
            )
    except TimeoutError as exc:
        raise ConnectError(f"connecting to {url} timed out after {timeouts.connect} s") from exc
    except InvalidStatus as exc:
        status = exc.response.status_code
        if path == "/batch":
            raise BatchUnsupportedError(f"{url}: HTTP {status}") from exc
        raise ConnectError(
            f"{url}: the server refused the WebSocket upgrade (HTTP {status})"
        ) from exc
    except (InvalidHandshake, InvalidURI, OSError, ValueError) as exc:
        if path == "/batch" and isinstance(exc, InvalidHandshake):
            raise BatchUnsupportedError(f"{url}: {exc}") from exc
        raise ConnectError(f"cannot connect to {url}: {exc}") from exc


def _is_loopback(url: str) -> bool:
    host = url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    host = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return host.strip("[]") in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


async def _abort(ws: ClientConnection) -> None:
    """Drop the socket at once (no close handshake: its replies can't be trusted)."""
    ws.transport.abort()
    with contextlib.suppress(Exception):
        await ws.wait_closed()


def _raise_error(reply: op.ErrorReceived) -> ServerError:
    return server_error(reply.code, reply.message, reply.details, session_closed=reply.ends_session)


class JsonSession:
    """One OpenEnv ``/ws`` session. Create with :meth:`connect`.

    Args:
        ws: The open WebSocket.
        timeouts: Step and close timeouts.
        url: For messages.
    """

    def __init__(self, ws: ClientConnection, timeouts: Timeouts, url: str) -> None:
        self._ws = ws
        self._proto = op.ClientSession()
        self.timeouts = timeouts
        self.url = url

    @classmethod
    async def connect(
        cls, base_url: str, timeouts: Timeouts, headers: Mapping[str, str] | None = None
    ) -> JsonSession:
        """Open ``/ws`` on ``base_url``.

        Raises:
            ConnectError: Unreachable, or the upgrade was refused.
        """
        ws = await _open(base_url, "/ws", timeouts, headers=headers)
        return cls(ws, timeouts, ws_url(base_url, "/ws"))

    @property
    def closed(self) -> bool:
        """Whether the session is over (closed, failed or timed out)."""
        return self._proto.state is op.SessionState.CLOSED

    async def _exchange(self) -> op.Reply:
        frames = self._proto.data_to_send()
        try:
            async with asyncio.timeout(self.timeouts.step):
                try:
                    for frame in frames:
                        await self._ws.send(frame)
                except ConnectionClosed:
                    pass  # the reason may be buffered (e.g. CAPACITY_REACHED): read it
                while True:
                    self._proto.receive_data(await self._ws.recv())
                    events = self._proto.events_received()
                    if events:
                        return events[0]
        except TimeoutError as exc:
            self._proto.connection_lost()
            await _abort(self._ws)
            raise RequestTimeoutError(
                f"no reply from {self.url} within {self.timeouts.step} s; the session is closed"
            ) from exc
        except ConnectionClosed as exc:
            self._proto.connection_lost()
            raise ConnectionLostError(f"connection to {self.url} lost: {exc}") from exc
        except ProtocolError:
            await _abort(self._ws)
            raise
        except asyncio.CancelledError:
            self._proto.connection_lost()
            await _abort(self._ws)
            raise

    async def _observation(self) -> op.ObservationReceived:
        reply = await self._exchange()
        if isinstance(reply, op.ErrorReceived):
            if reply.ends_session:
                await _abort(self._ws)
            raise _raise_error(reply)
        assert isinstance(reply, op.ObservationReceived)
        return reply

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError(f"the session with {self.url} is closed")

    async def reset(self, **kwargs: Any) -> op.ObservationReceived:
        """Send ``reset`` and return the first observation."""
        self._check_open()
        self._proto.send_reset(**kwargs)
        return await self._observation()

    async def step(self, action: Mapping[str, Any]) -> op.ObservationReceived:
        """Send ``step`` with the action's fields and return the observation."""
        self._check_open()
        self._proto.send_step(action)
        return await self._observation()

    async def state(self) -> dict[str, Any]:
        """Return the environment's state."""
        self._check_open()
        self._proto.send_state()
        reply = await self._exchange()
        if isinstance(reply, op.ErrorReceived):
            raise _raise_error(reply)
        assert isinstance(reply, op.StateReceived)
        return reply.state

    async def aclose(self) -> None:
        """Send ``close`` and close the socket. Idempotent; never raises."""
        if not self.closed:
            self._proto.send_close()
            with contextlib.suppress(ConnectionClosed, OSError):
                for frame in self._proto.data_to_send():
                    await self._ws.send(frame)
        try:
            async with asyncio.timeout(self.timeouts.close):
                await self._ws.close()
        except (TimeoutError, OSError, ConnectionClosed):
            await _abort(self._ws)


class BatchConnection:
    """One batched-protocol connection carrying many slots. Create with :meth:`connect`.

    Requests may be in flight concurrently (each awaits its own reply). A reply not
    received within ``timeouts.step`` closes the whole connection.
    """

    def __init__(self, ws: ClientConnection, timeouts: Timeouts, url: str) -> None:
        self._ws = ws
        self._proto = bp.BatchClient(client_name=f"openenv-gym/{__version__}")
        self.timeouts = timeouts
        self.url = url
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._failure: OpenEnvGymError | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closing = False  # aclose() called: the reader's end is not a failure

    @classmethod
    async def connect(
        cls, base_url: str, timeouts: Timeouts, headers: Mapping[str, str] | None = None
    ) -> BatchConnection:
        """Open ``/batch`` on ``base_url`` and exchange ``hello``.

        Raises:
            BatchUnsupportedError: The server does not speak the batched protocol.
            ConnectError: The server is unreachable.
        """
        ws = await _open(base_url, "/batch", timeouts, [bp.SUBPROTOCOL], headers)
        url = ws_url(base_url, "/batch")
        if ws.subprotocol != bp.SUBPROTOCOL:
            await _abort(ws)
            raise BatchUnsupportedError(f"{url}: subprotocol {bp.SUBPROTOCOL} not selected")
        self = cls(ws, timeouts, url)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self._proto.send_hello()
        try:
            reply = await self._request(0)
        except BaseException:
            await self.aclose()
            raise
        if not isinstance(reply, bp.HelloReceived):
            await self.aclose()
            raise BatchUnsupportedError(f"{url}: hello refused: {reply}")
        return self

    @property
    def server_info(self) -> bp.HelloReceived | None:
        """What the server said in ``hello``."""
        return self._proto.server_info

    @property
    def closed(self) -> bool:
        """Whether the connection is gone."""
        return self._proto.state is bp.ConnectionState.CLOSED

    @property
    def failure(self) -> OpenEnvGymError | None:
        """Why the connection failed (timeout, lost, protocol error); None if it did not."""
        return self._failure

    @property
    def open_slots(self) -> set[int]:
        """Slots currently open on this connection."""
        return set(self._proto.open_slots)

    async def _read(self) -> None:
        failure: OpenEnvGymError
        try:
            async for frame in self._ws:
                self._proto.receive_data(frame)
                for event in self._proto.events_received():
                    rid = event.request_id if not isinstance(event, bp.HelloReceived) else 0
                    waiter = self._waiters.pop(rid, None) if rid is not None else None
                    if waiter is not None and not waiter.done():
                        waiter.set_result(event)
                    elif rid is None:
                        logger.warning("server rejected a frame: %s", event)
                if self._proto.state is bp.ConnectionState.CLOSED:
                    # e.g. an error reply without id: no pending request can be matched
                    await _abort(self._ws)
                    failure = RemoteProtocolError(
                        f"{self.url}: the server rejected a frame it could not attribute; "
                        "the connection is closed"
                    )
                    break
            else:
                failure = ConnectionLostError(f"connection to {self.url} closed by the server")
        except ConnectionClosed as exc:
            failure = ConnectionLostError(f"connection to {self.url} lost: {exc}")
        except ProtocolError as exc:
            failure = exc
            await _abort(self._ws)
        self._fail(failure, remember=not self._closing)

    def _fail(self, failure: OpenEnvGymError, *, remember: bool = True) -> None:
        if self._failure is None and remember:
            self._failure = failure
        self._proto.connection_lost()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            if not waiter.done():
                waiter.set_exception(self._failure or failure)

    async def _request(
        self, rid: int
    ) -> bp.HelloReceived | bp.BatchReplyReceived | bp.RequestFailed:
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = waiter
        try:
            async with asyncio.timeout(self.timeouts.step):
                for frame in self._proto.data_to_send():
                    await self._ws.send(frame)
                return await waiter  # type: ignore[no-any-return]
        except TimeoutError as exc:
            failure = RequestTimeoutError(
                f"no reply from {self.url} within {self.timeouts.step} s; the connection is closed"
            )
            self._fail(failure)
            await _abort(self._ws)
            raise failure from exc
        except ConnectionClosed as exc:
            self._fail(ConnectionLostError(f"connection to {self.url} lost: {exc}"))
            assert self._failure is not None
            raise self._failure from exc
        except asyncio.CancelledError:
            self._fail(ConnectionLostError("request cancelled; the connection is closed"))
            await _abort(self._ws)
            raise

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self.closed:
            raise UsageError(f"the connection to {self.url} is closed")

    async def call(
        self, op_: bp.Op, slots: Sequence[int], args: Sequence[Mapping[str, Any]] | None = None
    ) -> bp.BatchReplyReceived:
        """Send one batched request and return its reply (per-slot errors inside).

        Raises:
            RemoteProtocolError: The server rejected the whole frame.
            TransportError: Timeout or lost connection (the connection is then closed).
        """
        self._check()
        if op_ is bp.Op.OPEN:
            rid = self._proto.send_open(slots)
        elif op_ is bp.Op.RESET:
            rid = self._proto.send_reset(slots, args or [{}] * len(slots))
        elif op_ is bp.Op.STEP:
            rid = self._proto.send_step(slots, args or [])
        elif op_ is bp.Op.STATE:
            rid = self._proto.send_state(slots)
        else:
            rid = self._proto.send_close(slots)
        reply = await self._request(rid)
        if isinstance(reply, bp.RequestFailed):
            raise RemoteProtocolError(
                f"server rejected the {op_.value} frame: {reply.code}: {reply.message}"
            )
        assert isinstance(reply, bp.BatchReplyReceived)
        return reply

    async def aclose(self) -> None:
        """Close the connection (the server closes every slot). Idempotent; never raises."""
        self._closing = True
        self._fail(ConnectionLostError("connection closed by the client"), remember=False)
        try:
            async with asyncio.timeout(self.timeouts.close):
                await self._ws.close()
        except (TimeoutError, OSError, ConnectionClosed):
            await _abort(self._ws)
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader


def slot_error(error: op.ErrorReceived) -> ServerError:
    """The exception for a per-slot error of a batched reply."""
    return _raise_error(error)
