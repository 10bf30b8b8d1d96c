"""``POST /mcp``: MCP tools over JSON-RPC 2.0, as OpenEnv's HTTP server answers them.

Methods (OpenEnv's ``http_server.py``, both release lines):

* ``tools/list`` -> ``{"tools": [...]}``, the tools of the environment's FastMCP server;
* ``tools/call`` (``params: {name, arguments, session_id?}``) -> the tool's result
  (FastMCP's ``CallToolResult``: ``content``, ``structured_content``, ``meta``, ``data``,
  ``is_error``);
* ``openenv/session/create`` -> ``{"session_id"}``: an environment instance that lives
  until ``openenv/session/close`` (``params: {session_id}``), so that tool calls naming it
  share state. Without ``session_id`` a tool call gets an instance of its own, closed
  after the call.

Only an environment class with an MCP client (OpenEnv's ``MCPEnvironment``) has tools;
for any other, ``tools/list`` and ``tools/call`` answer -32603 "Environment does not
support MCP", as OpenEnv's server does. Errors: -32700 (not JSON), -32600 (not a
JSON-RPC request), -32601 (unknown method), -32602 (bad params, unknown session),
-32603 (the tool or the environment failed), -32000 (capacity, factory). Every answer
is HTTP 200 with a JSON-RPC response; a notification (no ``id``) is answered too, with
``id: null``, as upstream does.

Sessions count against the server's ``max_sessions`` like ``/ws`` sessions; one that sees
no request for ``idle_timeout`` seconds is closed. They hold an instance with no
connection to tell whether their client is still there, so at most ``max_http_sessions``
of them are open at once (-32000 beyond); a session attached to a ``/ws`` WebSocket lives
as that socket does. A temporary instance (a tool call without a session) also holds a
slot while the call runs.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from openenv_gym.protocol.openenv.messages import loads
from openenv_gym.runtime.errors import describe, wire_safe

if TYPE_CHECKING:
    from openenv_gym.runtime.httpapi import EnvHost

__all__ = [
    "REFUSED",
    "Attachment",
    "JsonRpcCode",
    "JsonRpcErrorObject",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "McpEndpoint",
    "RpcCall",
    "close_env",
    "parse_call",
    "rpc_error",
    "rpc_result",
]

logger = logging.getLogger("openenv_gym.runtime")


class JsonRpcCode(enum.IntEnum):
    """JSON-RPC 2.0 error codes (and OpenEnv's server error)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


# ------------------------------------------------------------------- documented shapes


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (documentation: the endpoint parses requests itself)."""

    jsonrpc: Literal["2.0"] = Field(description="Always '2.0'")
    method: str = Field(
        description="tools/list, tools/call, openenv/session/create, openenv/session/close"
    )
    params: dict[str, Any] = Field(default_factory=dict, description="Named parameters")
    id: str | int | None = Field(default=None, description="Echoed in the response")


class JsonRpcErrorObject(BaseModel):
    """The ``error`` member of a failed call."""

    code: int
    message: str
    data: Any = None


class JsonRpcResponse(BaseModel):
    """A JSON-RPC 2.0 response: ``result`` or ``error``."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: str | int | None = None
    result: Any = None
    error: JsonRpcErrorObject | None = None


# ---------------------------------------------------------------------------- codec


@dataclass(frozen=True, slots=True)
class RpcCall:
    """A well-formed request.

    Attributes:
        method: The method name.
        params: The named parameters.
        id: The request id (None for a notification).
    """

    method: str
    params: dict[str, Any]
    id: str | int | None


def rpc_result(request_id: str | int | None, result: Any) -> dict[str, Any]:
    """A success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(
    request_id: str | int | None, code: JsonRpcCode, message: str, data: Any = None
) -> dict[str, Any]:
    """An error response (``data`` always present, ``null`` by default, as upstream)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": int(code), "message": message, "data": data},
    }


_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})


REFUSED = "refused"
"""``error.data.limit`` of a parse error whose body broke a limit (nesting, values): it is
answered with HTTP 400, not 200."""


def parse_call(body: bytes, max_values: int | None = None) -> RpcCall | dict[str, Any]:
    """Parse one request body: the call, or the error response to send instead.

    ``max_values``: a body holding more values is refused unparsed (``messages.loads``).

    >>> parse_call(b'{"jsonrpc": "2.0", "method": "tools/list", "id": 1}')
    RpcCall(method='tools/list', params={}, id=1)
    >>> parse_call(b"{")["error"]["code"]
    -32700
    >>> parse_call(b"{}")["error"]["code"]
    -32600
    """
    try:
        payload = loads(body, max_values)
    except RecursionError:
        message = "Parse error: JSON nested too deeply"
        return rpc_error(None, JsonRpcCode.PARSE_ERROR, message, {REFUSED: "nesting"})
    except ValueError as exc:  # UnicodeDecodeError is one
        if max_values is not None and str(exc).startswith("more than "):
            message = f"Parse error: {exc}"
            return rpc_error(None, JsonRpcCode.PARSE_ERROR, message, {REFUSED: "values"})
        return rpc_error(None, JsonRpcCode.PARSE_ERROR, "Parse error")
    if not isinstance(payload, dict):
        what = "batch requests are not supported" if isinstance(payload, list) else "not an object"
        return rpc_error(None, JsonRpcCode.INVALID_REQUEST, f"Invalid request: {what}")
    request_id = payload.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, str | int)
    ):
        return rpc_error(
            None, JsonRpcCode.INVALID_REQUEST, "Invalid request: 'id' must be a string or integer"
        )
    problems = []
    if payload.get("jsonrpc") != "2.0":
        problems.append("'jsonrpc' must be \"2.0\"")
    method = payload.get("method")
    if not isinstance(method, str):
        problems.append("'method' must be a string")
    unknown = sorted(set(payload) - _MEMBERS)
    if unknown:
        problems.append(f"unknown members {unknown}")
    params = payload.get("params", {})
    if isinstance(params, list) and not problems:
        return rpc_error(
            request_id, JsonRpcCode.INVALID_PARAMS, "Invalid params: params must be an object"
        )
    if not isinstance(params, dict):
        problems.append("'params' must be an object")
    if problems:
        return rpc_error(
            request_id, JsonRpcCode.INVALID_REQUEST, "Invalid request: " + "; ".join(problems)
        )
    assert isinstance(method, str)
    assert isinstance(params, dict)
    return RpcCall(method, params, request_id)


class _RpcFailure(Exception):
    """A call that ends in a JSON-RPC error (raised inside a method, answered once)."""

    def __init__(self, code: JsonRpcCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


# ------------------------------------------------------------------------- sessions


@dataclass(frozen=True, slots=True)
class Attachment:
    """A session's instance lent to one ``/ws?session_id=`` WebSocket (openenv >= 0.5).

    Attributes:
        env: The instance: the WebSocket's resets and steps act on it.
        detach: Call once when the WebSocket is gone; the session lives on (or closes,
            if ``openenv/session/close`` came meanwhile).
    """

    env: Any
    detach: Callable[[], None]


@dataclass(eq=False)
class _Session:
    """An instance created by ``openenv/session/create``, with its MCP client held open."""

    id: str
    env: Any
    holder: asyncio.Task[None] | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None
    attached: bool = False
    close_pending: bool = False


class McpEndpoint:
    """Answers ``POST /mcp`` bodies for one environment class.

    Args:
        host: The environment host (instances, capacity, timeouts).
    """

    def __init__(self, host: EnvHost) -> None:
        self.host = host
        self.sessions: dict[str, _Session] = {}
        self._closing: set[asyncio.Task[None]] = set()  # referenced until done
        self._methods: Mapping[str, Callable[[RpcCall], Awaitable[Any]]] = {
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "openenv/session/create": self._session_create,
            "openenv/session/close": self._session_close,
        }

    def handle(self, body: bytes) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        """The JSON-RPC response to ``body``: now if it is malformed, else an awaitable."""
        call = parse_call(body, self.host.max_values)
        if isinstance(call, dict):
            return call
        method = self._methods.get(call.method)
        if method is None:
            return rpc_error(
                call.id, JsonRpcCode.METHOD_NOT_FOUND, f"Method not found: {call.method}"
            )
        return self._answer(call, method)

    async def _answer(
        self, call: RpcCall, method: Callable[[RpcCall], Awaitable[Any]]
    ) -> dict[str, Any]:
        try:
            return rpc_result(call.id, await method(call))
        except _RpcFailure as failure:
            return rpc_error(call.id, failure.code, failure.message, failure.data)
        except Exception as exc:
            logger.debug("MCP call %s failed", call.method, exc_info=True)
            return rpc_error(call.id, JsonRpcCode.INTERNAL_ERROR, describe(exc))

    # ------------------------------------------------------------------ tools
    async def _tools_list(self, call: RpcCall) -> Any:
        async def listing(client: Any) -> Any:
            tools = await client.list_tools()
            return {"tools": [_jsonable(tool) for tool in tools]}

        return await self._with_client(call, listing)

    async def _tools_call(self, call: RpcCall) -> Any:
        name = call.params.get("name")
        if not name:
            raise _RpcFailure(JsonRpcCode.INVALID_PARAMS, "Missing 'name' in params")
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise _RpcFailure(
                JsonRpcCode.INVALID_PARAMS, "Invalid params: 'arguments' must be an object"
            )

        async def calling(client: Any) -> Any:
            return _jsonable(await client.call_tool(name=name, arguments=arguments))

        return await self._with_client(call, calling)

    async def _with_client(self, call: RpcCall, op: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run ``op(mcp_client)`` on the named session's instance, or on a new one."""
        session_id = call.params.get("session_id")
        if session_id:
            session = self._session(session_id)
            self._touch(session)
            return await _run_mcp(session.env, op, held=True)
        env = await self._new_instance()
        try:
            return await _run_mcp(env, op, held=False)
        finally:
            close_env(env)
            self.host.release()

    async def _new_instance(self) -> Any:
        """A new instance holding a slot; raises the -32000 failure at capacity."""
        host = self.host
        if not host.acquire():
            active, limit = host.active(), host.max_sessions
            raise _RpcFailure(
                JsonRpcCode.SERVER_ERROR,
                f"Server at capacity: {active}/{limit} sessions active.",
                {"active_sessions": active, "max_sessions": limit},
            )
        try:
            return await host.build()
        except Exception as exc:
            host.release()
            factory = getattr(exc, "factory", host.name)
            raise _RpcFailure(
                JsonRpcCode.SERVER_ERROR, describe(exc), {"factory_name": wire_safe(factory)}
            ) from exc

    # --------------------------------------------------------------- sessions
    def _session(self, session_id: Any) -> _Session:
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None or session.close_pending:
            raise _RpcFailure(JsonRpcCode.INVALID_PARAMS, f"Unknown session_id: {session_id}")
        return session

    async def _session_create(self, call: RpcCall) -> Any:
        limit = self.host.max_http_sessions
        if limit is not None and len(self.sessions) >= limit:
            raise _RpcFailure(
                JsonRpcCode.SERVER_ERROR,
                f"Too many MCP sessions over HTTP: {len(self.sessions)}/{limit} open. Close one, "
                "or attach to one over /ws.",
                {"open_sessions": len(self.sessions), "max_http_sessions": limit},
            )
        env = await self._new_instance()
        session = _Session(str(uuid.uuid4()), env)
        opener = getattr(env, "mcp_session", None)
        if callable(opener) and getattr(env, "mcp_client", None) is not None:
            entered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            session.holder = asyncio.get_running_loop().create_task(
                hold_open(opener, entered, session.closing)
            )
            try:
                await entered
            except Exception as exc:
                close_env(env)
                self.host.release()
                raise _RpcFailure(
                    JsonRpcCode.SERVER_ERROR, "the MCP session did not start: " + describe(exc)
                ) from exc
        self.sessions[session.id] = session
        self._touch(session)
        return {"session_id": session.id}

    async def _session_close(self, call: RpcCall) -> Any:
        session_id = call.params.get("session_id")
        if not session_id:
            raise _RpcFailure(
                JsonRpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required"
            )
        session = self._session(session_id)
        if session.attached:  # a WebSocket uses it: closed when that detaches
            session.close_pending = True
            return {"session_id": session.id, "closed": False, "closing": True}
        await self._close(session)
        return {"session_id": session.id, "closed": True}

    def _touch(self, session: _Session) -> None:
        """Restart the session's idle clock."""
        timeout = self.host.idle_timeout
        if session.timer is not None:
            session.timer.cancel()
        if timeout is not None:
            session.timer = asyncio.get_running_loop().call_later(timeout, self._expire, session)

    def _expire(self, session: _Session) -> None:
        if session.attached or self.sessions.get(session.id) is not session:
            return
        logger.info("MCP session %s closed: idle for %s s", session.id, self.host.idle_timeout)
        self._close_later(session)

    def _close_later(self, session: _Session) -> None:
        task = asyncio.get_running_loop().create_task(self._close(session))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, session: _Session) -> None:
        """Forget the session, end its MCP client, close its instance, free its slot."""
        if self.sessions.pop(session.id, None) is None:
            return
        if session.timer is not None:
            session.timer.cancel()
        session.closing.set()
        if session.holder is not None:
            try:
                await asyncio.wait_for(asyncio.shield(session.holder), 5.0)
            except (TimeoutError, asyncio.CancelledError):
                session.holder.cancel()
            except Exception:
                logger.debug("closing the MCP session failed", exc_info=True)
        close_env(session.env)
        self.host.release()

    def attach(self, session_id: str) -> Attachment | str:
        """Lend the session's instance to a WebSocket, or say why not (OpenEnv's wording).

        One WebSocket at a time; while attached the session does not idle out (the
        WebSocket has its own idle timeout).
        """
        session = self.sessions.get(session_id)
        if session is None or session.close_pending:
            return f"Unknown session_id: {session_id}"
        if session.attached:
            return f"Session {session_id} already has an attached WebSocket"
        session.attached = True
        if session.timer is not None:
            session.timer.cancel()

        def detach() -> None:
            session.attached = False
            if session.close_pending:
                self._close_later(session)
            elif self.sessions.get(session.id) is session:
                self._touch(session)

        return Attachment(session.env, detach)

    async def aclose(self) -> None:
        """Close every session (server shutdown)."""
        for session in list(self.sessions.values()):
            await self._close(session)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def hold_open(
    opener: Callable[[], Any], entered: asyncio.Future[None], closing: asyncio.Event
) -> None:
    """Enter ``opener()`` and stay inside until ``closing`` (one task enters and exits it)."""
    try:
        async with opener():
            entered.set_result(None)
            await closing.wait()
    except BaseException as exc:
        failed = exc if isinstance(exc, Exception) else RuntimeError("cancelled")
        if not entered.done():
            entered.set_exception(failed)
        elif failed is exc:
            logger.debug("an MCP session ended with an error", exc_info=True)
        if failed is not exc:
            raise


async def _run_mcp(env: Any, op: Callable[[Any], Awaitable[Any]], *, held: bool) -> Any:
    """``op(client)`` with the instance's MCP client connected (as OpenEnv's server does)."""
    client = getattr(env, "mcp_client", None)
    if client is None:
        raise _RpcFailure(JsonRpcCode.INTERNAL_ERROR, "Environment does not support MCP")
    connected = getattr(client, "is_connected", None)
    if held and callable(connected) and connected():
        return await op(client)
    opener = getattr(env, "mcp_session", None)
    async with opener() if callable(opener) else client:
        return await op(client)


def _jsonable(obj: Any) -> Any:
    """``obj`` as JSON values: models dumped, objects by their attributes (as upstream)."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, list | tuple):
        return [_jsonable(item) for item in obj]
    if isinstance(obj, dict):
        return {key: _jsonable(value) for key, value in obj.items()}
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if hasattr(obj, "__dict__"):
        return {key: _jsonable(value) for key, value in vars(obj).items()}
    return str(obj)


@dataclass(slots=True)
class _Held:
    """An instance's MCP session held open by :func:`hold_mcp` until :func:`close_env`."""

    env: Any
    task: asyncio.Task[None]
    leave: asyncio.Event
    loop: asyncio.AbstractEventLoop

    def release(self) -> None:
        """Let the holding task leave the session (from any thread)."""
        if self.loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.leave.set()
        else:
            self.loop.call_soon_threadsafe(self.leave.set)


_HELD: dict[int, _Held] = {}
"""Instances whose MCP session :func:`hold_mcp` holds, by ``id`` (the entry keeps them)."""


async def hold_mcp(env: Any) -> None:
    """Hold ``env``'s MCP session open from now until :func:`close_env` (idempotent).

    OpenEnv's ``/ws`` enters ``mcp_session()`` when a session starts and leaves it when the
    session ends; every tool call then reuses the connected client. Called before each
    awaited call of an instance, so tool calls over ``/batch`` and ``/ws`` find it held
    too, instead of connecting FastMCP's client for every call (twice the cost of the call
    itself). An instance without MCP, or whose client is already connected (an MCP
    session over HTTP holds it), is left alone; one whose session does not start is left
    to open its own per call, which reports the failure in its observation.
    """
    if id(env) in _HELD:
        return
    opener = getattr(env, "mcp_session", None)
    client = getattr(env, "mcp_client", None)
    if not callable(opener) or client is None:
        return
    connected = getattr(client, "is_connected", None)
    if callable(connected) and connected():
        return
    loop = asyncio.get_running_loop()
    entered: asyncio.Future[None] = loop.create_future()
    leave = asyncio.Event()
    held = _Held(env, loop.create_task(hold_open(opener, entered, leave)), leave, loop)
    _HELD[id(env)] = held
    try:
        await asyncio.shield(entered)
    except asyncio.CancelledError:
        raise  # the entry stays: close_env releases it
    except Exception:
        logger.debug("holding an MCP session failed; tool calls open their own", exc_info=True)
        if _HELD.get(id(env)) is held:
            del _HELD[id(env)]


def close_env(env: Any) -> None:
    """Leave its held MCP session, then call ``env.close()`` if it has one.

    An exception in ``close()`` is logged, never raised.
    """
    held = _HELD.get(id(env))
    if held is not None and held.env is env:
        del _HELD[id(env)]
        held.release()
    close = getattr(env, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            logger.warning("environment close() raised", exc_info=True)
