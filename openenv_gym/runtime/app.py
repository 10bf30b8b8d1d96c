"""The server runtime: one environment class, many instances, behind one listening socket.

Endpoints (``docs/protocol.md``):

* ``GET /ws`` (WebSocket) -- OpenEnv's JSON session protocol: one instance per
  connection, exactly as OpenEnv servers do, so official OpenEnv clients work.
* ``GET /batch`` (WebSocket, subprotocol ``openenv-gym.batch.v2`` or ``.v1``) -- the
  batched protocol: many instances (slots) per connection.
* every plain HTTP request (``/health``, ``/schema``, ``/metadata``, ``/openapi.json``,
  ``POST /mcp``, and in simulation mode ``POST /reset``, ``POST /step``, ``GET /state``)
  -- OpenEnv's HTTP API, :mod:`openenv_gym.runtime.httpapi`.

Connections, HTTP and limits are :mod:`openenv_gym.runtime.http`'s; this module hosts the
environment. Capacity (``max_sessions``) counts live instances over both endpoints.
Environment calls run on the event loop, a request's slots in chunks: between two chunks
other connections get their turn, so one large request never stalls them.

One cohesive concern, over 600 lines: hosting one environment class (its instances,
sessions and slots over both channels, the capacity they share, and the calls into it).
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from openenv_gym.exceptions import LocalProtocolError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.runtime.columns import batch_table, result_table
from openenv_gym.runtime.environment import EnvironmentMetadata, ObservationBatch
from openenv_gym.runtime.errors import (
    describe,
    execution_error,
    validation_error,
    validation_errors,
    wire_safe,
)
from openenv_gym.runtime.http import (
    HttpRequest,
    HttpResponse,
    Socket,
    WebSocketServer,
    json_response,
)
from openenv_gym.runtime.httpapi import EnvHost, HttpApi
from openenv_gym.runtime.loader import EnvModels, resolve_models
from openenv_gym.runtime.mcp import Attachment, close_env
from openenv_gym.runtime.settings import SERVER_NAME, ServerConfig

__all__ = ["EnvServer", "ServerConfig"]

logger = logging.getLogger("openenv_gym.runtime")

CHUNK = 64
"""Slots of one request stepped before other connections get a turn (if 2 ms passed)."""
_TURN = 0.002


def _capacity_message(active: int, limit: int) -> str:
    return f"Server at capacity: {active}/{limit} sessions active. Cannot accept new connections."


class EnvServer:
    """Hosts one environment class over both wire protocols.

    Args:
        env_factory: Zero-argument callable (usually the class) making one instance.
        config: Bind address, capacity and limits.
        models: Action / observation / state models; read from the class when omitted.
        name: Environment name for ``/metadata`` and ``hello``.
    """

    def __init__(
        self,
        env_factory: Callable[[], Any],
        config: ServerConfig | None = None,
        *,
        models: EnvModels | None = None,
        name: str | None = None,
    ) -> None:
        self.env_factory = env_factory
        self.config = config or ServerConfig()
        self.models = models or resolve_models(env_factory)
        self.name: str = name or str(getattr(env_factory, "__name__", "env"))
        self.active = 0
        self._server: WebSocketServer | None = None
        self._reset_filter = _reset_kwargs_filter(env_factory)
        accepts: Any = self.models.accepts or self.models.action
        self._action: TypeAdapter[Any] = TypeAdapter(accepts)
        self._actions: TypeAdapter[list[Any]] = TypeAdapter(list[accepts])
        self.awaits = {
            name: _is_async_override(env_factory, name) for name in ("step_async", "reset_async")
        }
        """Per method, whether the class's own coroutine is called (not the sync one)."""
        self._awaited_ops = frozenset(
            op_
            for op_, name in ((bp.Op.STEP, "step_async"), (bp.Op.RESET, "reset_async"))
            if self.awaits[name]
        )
        self._schema = json.dumps(
            {
                "action": self.models.action.model_json_schema(),
                "observation": self.models.observation.model_json_schema(),
                "state": self.models.state.model_json_schema(),
            }
        )
        self._metadata = self._probe_metadata()
        self.http_api = HttpApi(self._http_host(), self.config.mode)
        """Every plain HTTP request: OpenEnv's HTTP API, ``/mcp``, ``/openapi.json``."""

    def _http_host(self) -> EnvHost:
        """What the HTTP API uses of this server (instances, capacity, models)."""
        return EnvHost(
            name=self.name,
            models=self.models,
            schema_json=self._schema,
            metadata_json=self._metadata,
            max_sessions=self.config.max_sessions,
            idle_timeout=self.config.idle_timeout,
            acquire=lambda: self._acquire() == 1,
            release=self._release,
            active=lambda: self.active,
            create=self._create,
            validate_action=self._action.validate_python,
            awaits=self.awaits,
        )

    # ------------------------------------------------------------------ lifecycle
    def _probe_metadata(self) -> str:
        env = self.env_factory()  # fail fast at start-up if the env cannot be built
        try:
            getter = getattr(env, "get_metadata", None)
            meta = getter() if callable(getter) else None
        finally:
            close_env(env)
        if isinstance(meta, BaseModel):
            return meta.model_dump_json()
        return EnvironmentMetadata(
            name=self.name, description=f"{self.name} environment"
        ).model_dump_json()

    async def start(self) -> None:
        """Bind and start serving. Next: :attr:`url`, then :meth:`aclose`."""
        config = self.config
        server = WebSocketServer(self, config.limits())
        await server.start(config.host, config.port)
        self._server = server
        if config.exposed:
            logger.warning(
                "serving on %s without a token (insecure): anyone who can reach this "
                "address can drive its environments",
                self.url,
            )

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("server not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8000``."""
        host = self.config.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}"

    async def serve_forever(self) -> None:
        """Serve until cancelled."""
        if self._server is None:
            await self.start()
        assert self._server is not None
        await self._server.serve_forever()

    async def aclose(self) -> None:
        """Stop accepting, close every connection (their instances close too)."""
        if self._server is not None:
            await self._server.close()
        await self.http_api.aclose()

    # ------------------------------------------------------------------ HTTP
    def handle_http(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """Answer a plain request (:mod:`openenv_gym.runtime.httpapi`)."""
        return self.http_api.handle(request)

    def open_channel(
        self, request: HttpRequest, offered: Sequence[str]
    ) -> tuple[Callable[[Socket], Any], str | None] | HttpResponse:
        """The channel of a WebSocket upgrade: ``/ws`` (JSON) or ``/batch``."""
        if request.path == "/ws":
            attach = request.query.get("session_id")  # an MCP session's instance (openenv>=0.5)
            if attach:
                lent = self.http_api.attach(attach)
                return (lambda socket: _JsonChannel(self, socket, lent)), None
            return (lambda socket: _JsonChannel(self, socket)), None
        if request.path == "/batch":
            versions = [v for name in offered if (v := bp.version_of(name)) is not None]
            if not versions:  # the endpoint does not insist on its subprotocol: version 1
                return (lambda socket: _BatchChannel(self, socket, bp.PROTOCOL_VERSION)), None
            version = max(versions)
            return (lambda socket: _BatchChannel(self, socket, version)), bp.SUBPROTOCOLS[version]
        return json_response(404, '{"detail":"Not Found"}')

    # ------------------------------------------------------------------ sessions
    def _acquire(self, n: int = 1) -> int:
        """Reserve up to ``n`` instances; return how many were granted."""
        granted = max(0, min(n, self.config.max_sessions - self.active))
        self.active += granted
        return granted

    def _release(self, n: int = 1) -> None:
        self.active -= n

    def _create(self) -> Any:
        try:
            return self.env_factory()
        except Exception as exc:
            raise _FactoryFailed(self.name, exc) from exc

    def _answer_json(
        self, env: Any, session: op.ServerSession, request: op.Request
    ) -> Coroutine[Any, Any, None] | None:
        """Answer one ``/ws`` request; a coroutine to await when the env's call is async."""
        if isinstance(request, op.CloseRequest):
            return None
        try:
            if isinstance(request, op.StateRequest):
                session.send_state(_dump_state(env.state, json_mode=True))
                return None
            if isinstance(request, op.ResetRequest):
                kwargs = self._reset_filter(request.kwargs)
                if self.awaits["reset_async"]:
                    return self._answer_json_later(session, env.reset_async(**kwargs))
                obs = env.reset(**kwargs)
            else:
                action = self._action.validate_python(request.action)
                if self.awaits["step_async"]:
                    return self._answer_json_later(session, env.step_async(action))
                obs = env.step(action)
            _send_json_observation(session, obs)
        except Exception as exc:
            _send_json_error(session, exc)
        return None

    @staticmethod
    async def _answer_json_later(session: op.ServerSession, pending: Awaitable[Any]) -> None:
        try:
            _send_json_observation(session, await pending)
        except Exception as exc:
            _send_json_error(session, exc)

    def _answer_results(
        self,
        conn: bp.BatchServer,
        request: bp.BatchRequestReceived,
        results: list[bp.SlotResult | bp.SlotError | None],
    ) -> None:
        """Answer ``open`` / ``state`` / ``close``; a result msgpack cannot carry fails alone."""
        try:
            conn.send_results(request, results)
        except LocalProtocolError:
            conn.send_results(request, [_encodable(r) for r in results])

    def _answer_table(
        self,
        conn: bp.BatchServer,
        request: bp.BatchRequestReceived,
        outcome: tuple[list[Any], ObservationBatch | None, list[int]],
    ) -> None:
        results, batch, ready = outcome
        version = conn.version
        try:
            if batch is None:
                table = result_table(results, version=version)
            else:
                table = batch_table(batch, self.models.observation, results, ready, version)
            conn.send_table(request, table)
        except Exception as exc:
            # some result cannot be encoded: fail only those (all of a batch hook's)
            if batch is not None:
                failed = execution_error(exc)
                results = [failed if r is None else r for r in results]
            checked = [_checked_result(r) for r in results]
            fixed = [
                c if isinstance(c, bp.SlotError) else r
                for r, c in zip(results, checked, strict=True)
            ]
            conn.send_table(request, result_table(fixed, version=1))

    def awaits_op(self, op_: bp.Op) -> bool:
        """Whether ``step`` / ``reset`` calls a coroutine of the class (never answered inline)."""
        return op_ in self._awaited_ops

    def _run_episode_op(
        self, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> _EpisodeOutcome | Coroutine[Any, Any, _EpisodeOutcome]:
        """``step`` / ``reset`` for every slot of a request: the hot path.

        Actions are validated in one call for the whole request. An environment class may
        act on all its instances of the request at once (``step_batch`` / ``reset_batch``,
        see ``docs/protocol.md`` section 3.9). A class with its own ``step_async`` /
        ``reset_async`` (:meth:`awaits_op`) gets a coroutine back, which calls them for every
        slot at once (an MCP environment's tool calls run side by side).

        Returns:
            Per slot, an observation or a SlotError (None where the batch holds it); the
            batch hook's :class:`ObservationBatch`, if it gave one; and the positions of
            the slots it covers.
        """
        envs = list(map(slots.get, request.slots))
        n = len(envs)
        if None in envs:
            results: list[Any] = [
                _no_such_slot(slot) if env is None else None
                for slot, env in zip(request.slots, envs, strict=True)
            ]
            live = [k for k, env in enumerate(envs) if env is not None]
        else:
            results, live = [None] * n, list(range(n))
        args = request.args
        one: Callable[[Any, Any], Any]
        if request.op is bp.Op.RESET:
            keep = self._reset_filter
            ready, inputs = live, [keep(args[k]) for k in live]
            name, one = "reset_batch", _reset_one
        else:
            checked, valid = self._validate_actions(
                list(args) if len(live) == n else [args[k] for k in live]
            )
            if valid:
                ready, inputs = live, checked
            else:
                ready, inputs = [], []
                for k, action in zip(live, checked, strict=True):
                    if action.__class__ is bp.SlotError:
                        results[k] = action
                    else:
                        ready.append(k)
                        inputs.append(action)
            name, one = "step_batch", _step_one
        if not ready:
            return results, None, ready
        run = envs if len(ready) == n else [envs[k] for k in ready]
        if request.op in self._awaited_ops:
            return _run_async(results, run, ready, inputs, request.op)
        kinds = set(map(type, run))  # a hook acts on instances of its own class only
        hook = _hook_of(kinds.pop(), name) if len(kinds) == 1 else None
        if hook is not None:
            outcome = _batched(hook, run, inputs)
            if isinstance(outcome, ObservationBatch):
                for j, exc in outcome.errors.items():
                    results[ready[j]] = execution_error(exc)
                return results, outcome, ready
            for k, result in zip(ready, outcome, strict=True):
                results[k] = result
            return results, None, ready
        for k, env, value in zip(ready, run, inputs, strict=True):
            results[k] = _guard(one, env, value)
        return results, None, ready

    def _validate_actions(self, args: list[Any]) -> tuple[list[Any], bool]:
        """The action models of ``args`` in one validation call; a SlotError where invalid.

        A validator of the model may raise something else than a validation error: that
        slot gets ``EXECUTION_ERROR``, the others are validated as usual.

        Returns:
            Per entry, the model or the SlotError; and whether every entry is valid.
        """
        try:
            return self._actions.validate_python(args), True
        except Exception:
            pass  # some are invalid: find which, one by one
        validate = self._action.validate_python
        out: list[Any] = []
        for arg in args:
            try:
                out.append(validate(arg))
            except ValidationError as exc:
                out.append(validation_error(exc))
            except Exception as exc:
                out.append(execution_error(exc))
        return out, False

    def _run_batch(
        self, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> list[bp.SlotResult | bp.SlotError | None]:
        """``open`` / ``state`` / ``close`` for every slot of a request."""
        op_ = request.op
        if op_ is bp.Op.OPEN:
            return self._open_slots(request.slots, slots)
        guarded = self._guarded
        if op_ is bp.Op.STATE:
            return [guarded(slots, slot, _state_result, None) for slot in request.slots]
        return [guarded(slots, slot, self._close_slot, (slots, slot)) for slot in request.slots]

    def _close_slot(self, env: Any, where: tuple[dict[int, Any], int]) -> None:
        slots, slot = where
        del slots[slot]
        self._release()
        close_env(env)

    @staticmethod
    def _guarded(
        slots: dict[int, Any],
        slot: int,
        call: Callable[[Any, Any], bp.SlotResult | None],
        arg: Any,
    ) -> bp.SlotResult | bp.SlotError | None:
        """Run ``call(env, arg)`` for one slot; any failure becomes that slot's error."""
        env = slots.get(slot)
        if env is None:
            return bp.SlotError(bp.SlotErrorCode.NO_SUCH_SLOT.value, f"slot {slot} is not open")
        try:
            return call(env, arg)
        except ValidationError as exc:  # e.g. a state model refusing what reset stored
            return validation_error(exc)
        except Exception as exc:
            return execution_error(exc)

    def _open_slots(
        self, wanted: tuple[int, ...], slots: dict[int, Any]
    ) -> list[bp.SlotResult | bp.SlotError | None]:
        results: list[bp.SlotResult | bp.SlotError | None] = []
        for slot in wanted:
            if slot in slots:
                results.append(
                    bp.SlotError(bp.SlotErrorCode.SLOT_IN_USE.value, f"slot {slot} is already open")
                )
                continue
            if len(slots) >= self.config.max_connection_slots:
                limit = self.config.max_connection_slots
                results.append(
                    bp.SlotError(
                        op.ErrorCode.CAPACITY_REACHED.value,
                        f"Connection at capacity: {len(slots)}/{limit} slots open.",
                        {"open_slots": len(slots), "max_connection_slots": limit},
                    )
                )
                continue
            if not self._acquire():
                active, limit = self.active, self.config.max_sessions
                results.append(
                    bp.SlotError(
                        op.ErrorCode.CAPACITY_REACHED.value,
                        _capacity_message(active, limit),
                        {"active_sessions": active, "max_sessions": limit},
                    )
                )
                continue
            try:
                slots[slot] = self._create()
            except _FactoryFailed as exc:
                self._release()
                results.append(
                    bp.SlotError(
                        op.ErrorCode.FACTORY_ERROR.value, str(exc), {"factory_name": exc.factory}
                    )
                )
                continue
            results.append(None)
        return results


class _JsonChannel:
    """One OpenEnv ``/ws`` session: one instance for the connection's life."""

    def __init__(
        self, server: EnvServer, socket: Socket, borrowed: Attachment | str | None = None
    ) -> None:
        self.server = server
        self.socket = socket
        self.session = op.ServerSession()
        self.env: Any = None
        self._held = False
        self._task: asyncio.Task[None] | None = None
        self._backlog: collections.deque[bytes | str | _InvalidText] = collections.deque()
        self._backlog_bytes = 0
        self._borrowed: Attachment | None = None  # an MCP session's instance: not ours to close
        if isinstance(borrowed, str):  # the session to attach to cannot be
            self.session.send_error(op.ErrorCode.SESSION_ERROR, borrowed)
            self._end()
            return
        if borrowed is not None:
            self._borrowed, self.env = borrowed, borrowed.env
            return
        if not server._acquire():
            limit = server.config.max_sessions
            self.session.send_error(
                op.ErrorCode.CAPACITY_REACHED,
                _capacity_message(server.active, limit),
                active_sessions=server.active,
                max_sessions=limit,
            )
            self._end()
            return
        self._held = True
        try:
            self.env = server._create()
        except _FactoryFailed as exc:
            self.session.send_error(op.ErrorCode.FACTORY_ERROR, str(exc), factory_name=exc.factory)
            self._end()

    def on_invalid_text(self, data: bytes) -> None:
        """A text frame that is not UTF-8: answered ``INVALID_JSON``, the session kept."""
        self.on_message(_InvalidText(data))

    def on_message(self, message: bytes | str | _InvalidText) -> None:
        """Answer one frame (at most one request: OpenEnv has no pipelining).

        While an awaited call (``step_async``) runs, later frames wait their turn; reading
        pauses while more than ``max_queue_bytes`` of them wait.
        """
        if self._task is not None or self._backlog:
            self._backlog.append(message)
            self._backlog_bytes += len(message)
            if self._backlog_bytes > self.server.config.max_queue_bytes:
                self.socket.pause_reading()
            return
        self._handle(message)

    def _handle(self, message: bytes | str | _InvalidText) -> None:
        session = self.session
        if self.env is None or session.closed:
            return
        if isinstance(message, _InvalidText):
            session.receive_invalid_text(message.data)
        else:
            session.receive_data(message)
        for request in session.events_received():
            later = self.server._answer_json(self.env, session, request)
            if later is not None:
                self._task = asyncio.get_running_loop().create_task(self._finish(later))
                return
        self._reply()

    def _reply(self) -> None:
        if self.session.closed:  # a close request, or an error that ends the session
            self._end()
            return
        for out in self.session.data_to_send():
            self.socket.send(out)

    async def _finish(self, later: Coroutine[Any, Any, None]) -> None:
        try:
            await later
        finally:
            self._task = None
        if self.env is None:
            return
        self._reply()
        while self._backlog and self._task is None and self.env is not None:
            message = self._backlog.popleft()
            self._backlog_bytes -= len(message)
            self._handle(message)
        if not self._backlog:
            self.socket.resume_reading()

    def _end(self) -> None:
        """Free the instance, then say what is queued and close (the client sees 1000)."""
        self._free()
        for out in self.session.data_to_send():
            self.socket.send(out)
        self.socket.close(1000)

    def _free(self) -> None:
        env, self.env = self.env, None
        borrowed, self._borrowed = self._borrowed, None
        if borrowed is not None:
            borrowed.detach()
        elif env is not None:
            close_env(env)
        if self._held:
            self._held = False
            self.server._release()

    def on_close(self) -> None:
        """The connection is gone: stop its call, close the instance, free its capacity."""
        if self._task is not None:
            self._task.cancel()
        self._backlog.clear()
        self._free()


@dataclass(frozen=True, slots=True)
class _InvalidText:
    """A text frame whose bytes are not UTF-8, waiting its turn."""

    data: bytes

    def __len__(self) -> int:
        return len(self.data)


class _BatchChannel:
    """One ``/batch`` connection: many instances (slots), requests answered in order.

    A request of at most :data:`CHUNK` slots is answered where it arrives; a larger one,
    or any request while others wait, is queued and answered by one task per connection,
    :data:`CHUNK` slots at a time, giving other connections a turn in between. Requests wait
    while the peer does not read (the send buffer is full); reading pauses while more than
    ``max_queue_bytes`` of requests wait.
    """

    def __init__(self, server: EnvServer, socket: Socket, version: int) -> None:
        self.server = server
        self.socket = socket
        config = server.config
        self.conn = bp.BatchServer(
            max_frame=config.max_frame, version=version, max_slots=config.max_request_slots
        )
        self.slots: dict[int, Any] = {}
        self._queue: collections.deque[tuple[Any, int]] = collections.deque()
        self._queued_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._last_turn = time.monotonic()

    def on_invalid_text(self, data: bytes) -> None:
        """A text frame that is not UTF-8: refused as any text frame (``INVALID_FRAME``)."""
        self.on_message(data.decode(errors="replace"))

    def on_message_head(self, head: bytes, size: int) -> bool:
        """A large frame's first bytes: True if it names too many slots (refused, 3.8).

        The connection then drops the rest of the frame unread (never buffered).
        """
        if not self.conn.receive_head(head, size):
            return False
        self._flush()
        return True

    def on_message(self, message: bytes | str) -> None:
        """Parse a frame; answer its request now if it is small and nothing waits."""
        conn = self.conn
        conn.receive_data(message)
        events = conn.events_received()
        size = len(message)
        if not events:  # answered by the protocol itself (an error frame)
            self._flush()
            return
        if (
            self._task is None
            and not self._queue
            and self.socket.writable
            and all(_inline(event, self.server) for event in events)
        ):
            for event in events:
                try:
                    self._answer_now(event)
                except Exception as exc:
                    self._fail(event, exc)
            self._flush()
            return
        for event in events:
            self._queue.append((event, size))
            self._queued_bytes += size
            size = 0
        if self._queued_bytes > self.server.config.max_queue_bytes:
            self.socket.pause_reading()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def _flush(self) -> None:
        for out in self.conn.data_to_send():
            self.socket.send(out)

    async def _run(self) -> None:
        try:
            while self._queue and not self._closed:
                if not self.socket.writable:
                    await self.socket.wait_writable()
                    continue
                event, size = self._queue.popleft()
                self._queued_bytes -= size
                if self._queued_bytes <= self.server.config.max_queue_bytes // 2:
                    self.socket.resume_reading()
                try:
                    await self._answer_in_turns(event)
                except Exception as exc:
                    self._fail(event, exc)
                self._flush()
                await self._turn()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("answering a batched request failed")
            self.socket.close(1011, "internal error")
        finally:
            self._task = None

    async def _turn(self) -> None:
        """Let other connections run if this one has had the loop for a while."""
        now = time.monotonic()
        if now - self._last_turn >= _TURN:
            await asyncio.sleep(0)
            self._last_turn = time.monotonic()

    def _fail(self, event: Any, exc: Exception) -> None:
        """Last resort: a request that could not be answered fails in every slot, alone."""
        logger.error("answering a batched request failed", exc_info=exc)
        failed = bp.SlotError(
            op.ErrorCode.EXECUTION_ERROR.value, "internal error: " + describe(exc)
        )
        try:
            self.conn.send_results(event, [failed] * len(event.slots))
        except Exception:  # not pending any more, or hello: nothing sane to answer
            logger.exception("the request cannot be answered: closing the connection")
            self.socket.close(1011, "internal error")

    def _answer_now(self, event: Any) -> None:
        conn, server = self.conn, self.server
        if isinstance(event, bp.HelloRequestReceived):
            conn.send_hello(
                server=SERVER_NAME, env=server.name, max_slots=server.config.max_sessions
            )
        elif event.op in (bp.Op.STEP, bp.Op.RESET):
            outcome = server._run_episode_op(event, self.slots)
            assert isinstance(outcome, tuple), "an awaited op is never answered inline"
            server._answer_table(conn, event, outcome)
        else:
            server._answer_results(conn, event, server._run_batch(event, self.slots))

    async def _answer_in_turns(self, event: Any) -> None:
        if _inline(event, self.server):
            self._answer_now(event)
            return
        server = self.server
        if event.op in (bp.Op.STEP, bp.Op.RESET):
            parts = []
            for part in _chunks(event):
                outcome = server._run_episode_op(part, self.slots)
                parts.append(outcome if isinstance(outcome, tuple) else await outcome)
                await self._turn()
            server._answer_table(self.conn, event, _merge_parts(parts))
            return
        results: list[Any] = []
        for part in _chunks(event):
            results += server._run_batch(part, self.slots)
            await self._turn()
        server._answer_results(self.conn, event, results)

    def on_close(self) -> None:
        """The connection is gone: stop its work, close its instances, free capacity."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
        slots, self.slots = self.slots, {}
        for env in slots.values():
            close_env(env)
        self.server._release(len(slots))


def _inline(event: Any, server: EnvServer) -> bool:
    """Whether a request is answered as it arrives: small, and no coroutine to await."""
    if isinstance(event, bp.HelloRequestReceived):
        return True
    return len(event.slots) <= CHUNK and not server.awaits_op(event.op)


def _chunks(event: bp.BatchRequestReceived) -> list[bp.BatchRequestReceived]:
    """The request split into parts of at most :data:`CHUNK` slots (for the env work only)."""
    slots, args = event.slots, event.args
    return [
        replace(event, slots=slots[k : k + CHUNK], args=args[k : k + CHUNK] if args else ())
        for k in range(0, len(slots), CHUNK)
    ]


def _merge_parts(
    parts: list[tuple[list[Any], ObservationBatch | None, list[int]]],
) -> tuple[list[Any], ObservationBatch | None, list[int]]:
    """One request's outcome from its chunks' (see :meth:`EnvServer._run_episode_op`)."""
    results: list[Any] = []
    covered: list[int] = []
    batches: list[ObservationBatch] = []
    for part_results, batch, ready in parts:
        offset = len(results)
        if batch is not None:
            batches.append(batch)
            covered += [offset + k for k in ready]
        results += part_results
    if not batches:
        return results, None, []
    if len(batches) != sum(1 for _, b, r in parts if r):  # a hook that answered both ways
        failed = execution_error(RuntimeError("the batched hook answered in two forms"))
        return [failed if r is None else r for r in results], None, []
    return results, _merge_batches(batches), covered


def _merge_batches(batches: list[ObservationBatch]) -> ObservationBatch:
    if len(batches) == 1:
        return batches[0]
    fields = {key: [v for b in batches for v in b.fields[key]] for key in batches[0].fields}
    errors: dict[int, BaseException] = {}
    offset = 0
    for batch in batches:
        errors.update({offset + j: e for j, e in batch.errors.items()})
        offset += len(batch.dones)
    metadata: Any = None
    metas = [b.metadata for b in batches]
    if all(isinstance(m, dict) for m in metas) and len({tuple(m) for m in metas}) == 1:  # type: ignore[arg-type]
        metadata = {key: [v for m in metas for v in m[key]] for key in metas[0]}  # type: ignore[index,union-attr]
    elif any(m is not None for m in metas):
        metadata = []
        for batch in batches:
            meta = batch.metadata
            count = len(batch.dones)
            if meta is None:
                metadata += [None] * count
            elif isinstance(meta, dict):
                keys = list(meta)
                metadata += (
                    [dict(zip(keys, row, strict=True)) for row in zip(*meta.values(), strict=True)]
                    if keys
                    else [None] * count
                )
            else:
                metadata += list(meta)
    return ObservationBatch(
        fields,
        rewards=[r for b in batches for r in b.rewards],
        dones=[d for b in batches for d in b.dones],
        metadata=metadata,
        errors=errors,
    )


class _FactoryFailed(Exception):
    def __init__(self, factory: str, cause: BaseException) -> None:
        super().__init__(
            wire_safe(f"Environment factory '{factory}' failed to create instance: ")
            + describe(cause)
        )
        self.factory: str = wire_safe(factory)


def _no_such_slot(slot: int) -> bp.SlotError:
    return bp.SlotError(bp.SlotErrorCode.NO_SUCH_SLOT.value, f"slot {slot} is not open")


def _send_json_observation(session: op.ServerSession, obs: Any) -> None:
    fields, reward, done, metadata = _split_observation(obs, keep_metadata=True)
    session.send_observation(fields, reward, done, metadata)


def _send_json_error(session: op.ServerSession, exc: Exception) -> None:
    """Answer the pending request with the error ``exc`` (it never fails to encode)."""
    if isinstance(exc, ValidationError):
        errors = validation_errors(exc)
        session.send_error(op.ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors)
        return
    logger.debug("environment raised", exc_info=True)
    session.send_error(op.ErrorCode.EXECUTION_ERROR, describe(exc))


def _is_async_override(env_factory: Callable[[], Any], name: str) -> bool:
    """Whether the class has a coroutine ``name`` of its own (``step_async`` ...).

    OpenEnv's base ``Environment`` has ``step_async`` / ``reset_async`` that call the sync
    method; as OpenEnv's server does, only an override is awaited (an MCP environment's
    ``step_async`` calls its tools without a thread of its own).
    """
    method = getattr(env_factory, name, None)
    if not inspect.iscoroutinefunction(method):
        return False
    owner = next((k for k in getattr(env_factory, "__mro__", ()) if name in vars(k)), None)
    if owner is None:
        return False
    return not (owner.__name__ == "Environment" and owner.__module__.startswith("openenv."))


_EpisodeOutcome = tuple[list[Any], ObservationBatch | None, list[int]]


async def _run_async(
    results: list[Any], envs: list[Any], ready: list[int], inputs: list[Any], op_: bp.Op
) -> _EpisodeOutcome:
    """``step_async`` / ``reset_async`` of every ready slot, side by side."""

    async def one(env: Any, value: Any) -> Any:
        try:
            if op_ is bp.Op.RESET:
                return await env.reset_async(**value)
            return await env.step_async(value)
        except Exception as exc:
            return execution_error(exc)

    outcomes = await asyncio.gather(
        *(one(env, value) for env, value in zip(envs, inputs, strict=True))
    )
    for k, outcome in zip(ready, outcomes, strict=True):
        results[k] = outcome
    return results, None, ready


def _step_one(env: Any, action: Any) -> Any:
    return env.step(action)


def _reset_one(env: Any, kwargs: Any) -> Any:
    return env.reset(**kwargs)


_HOOKS: dict[tuple[type, str], Callable[..., Any] | None] = {}


def _hook_of(kind: type, name: str) -> Callable[..., Any] | None:
    """The class's batched hook ``name``, if it has a callable one (looked up once)."""
    try:
        return _HOOKS[kind, name]
    except KeyError:
        hook = getattr(kind, name, None)
        found = _HOOKS[kind, name] = hook if callable(hook) else None
        return found


def _batched(
    hook: Callable[..., Any], envs: list[Any], inputs: list[Any]
) -> ObservationBatch | list[Any]:
    """``hook(envs, inputs)``: a batch, or a result per env; an exception fails its env only."""
    try:
        outcome = hook(envs, inputs)
        if isinstance(outcome, ObservationBatch):
            if len(outcome.dones) != len(envs) or len(outcome.rewards) != len(envs):
                raise ValueError(f"the batch does not hold {len(envs)} results")
            return outcome
        outcomes = list(outcome)
    except Exception as exc:
        return [execution_error(exc)] * len(envs)
    if len(outcomes) != len(envs):
        error = ValueError(f"the batched hook returned {len(outcomes)} results for {len(envs)}")
        return [execution_error(error)] * len(envs)
    return [execution_error(o) if isinstance(o, BaseException) else o for o in outcomes]


def _guard(call: Callable[[Any, Any], Any], env: Any, arg: Any) -> Any:
    """``call(env, arg)``; an exception becomes the slot's EXECUTION_ERROR."""
    try:
        return call(env, arg)
    except Exception as exc:
        return execution_error(exc)


_OBS_EXCLUDE_DONE = frozenset({"done"})
_OBS_EXCLUDE_META = frozenset({"reward", "done", "metadata"})


def _split_observation(
    obs: Any, *, keep_metadata: bool
) -> tuple[dict[str, Any], float | None, bool, dict[str, Any] | None]:
    """Observation model -> (fields, reward, done, metadata) as OpenEnv serialises it.

    ``keep_metadata=True`` is the OpenEnv ``/ws`` reply, in Pydantic's JSON mode as
    OpenEnv's ``model_dump_json`` writes it: datetime, UUID and Enum fields become strings,
    an ``int`` reward stays ``1`` (not ``1.0``), a NaN reward becomes null, and
    ``metadata`` stays inside. Otherwise (batched reply): Python mode, so ndarrays reach
    the msgpack codec intact, with ``metadata`` apart and the reward a float.
    """
    if keep_metadata:
        fields = obs.model_dump(mode="json", exclude=_OBS_EXCLUDE_DONE)
        reward = fields.pop("reward", None)
        if isinstance(reward, float) and not math.isfinite(reward):
            reward = None  # model_dump_json writes NaN / inf as null
        return fields, reward, bool(obs.done), fields.get("metadata") or None
    # the model's own serializer: what model_dump runs, without its Python-level overhead
    fields = type(obs).__pydantic_serializer__.to_python(obs, exclude=_OBS_EXCLUDE_META)
    metadata = getattr(obs, "metadata", None) or None
    reward = obs.reward
    return fields, None if reward is None else float(reward), bool(obs.done), metadata


def _state_result(env: Any, _: Any) -> bp.SlotResult:
    return bp.SlotResult(observation=_dump_state(env.state, json_mode=False))


def _slot_result(obs: Any) -> bp.SlotResult:
    fields, reward, done, metadata = _split_observation(obs, keep_metadata=False)
    return bp.SlotResult(fields, reward, done, metadata)


def _checked_result(result: Any) -> bp.SlotResult | bp.SlotError | None:
    """A slot's outcome as msgpack carries it, or the EXECUTION_ERROR standing for it."""
    if isinstance(result, bp.SlotError):
        return _encodable(result)
    try:
        return _encodable(_slot_result(result))
    except Exception as exc:  # a serializer of the observation model raised
        return execution_error(exc)


def _encodable(result: bp.SlotResult | bp.SlotError | None) -> bp.SlotResult | bp.SlotError | None:
    """The result, or an EXECUTION_ERROR if msgpack cannot carry it (a datetime field...).

    An error's message and details are made safe too (:func:`wire_safe`).
    """
    if isinstance(result, bp.SlotResult):
        try:
            bp.encode_frame({"obs": result.observation, "meta": result.metadata})
        except LocalProtocolError as exc:
            return execution_error(exc)
    elif isinstance(result, bp.SlotError):
        return bp.SlotError(
            wire_safe(str(result.code)),
            wire_safe(str(result.message)),
            wire_safe(dict(result.details)),
        )
    return result


def _dump_state(state: Any, *, json_mode: bool) -> dict[str, Any]:
    if isinstance(state, BaseModel):
        return state.model_dump(mode="json" if json_mode else "python")
    return dict(state) if state else {}


def _reset_kwargs_filter(
    env_factory: Callable[[], Any],
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Keep only the kwargs ``reset`` accepts; drop the rest silently, as OpenEnv does."""
    reset = getattr(env_factory, "reset", None)
    try:
        params = inspect.signature(reset).parameters.values() if reset else ()
    except (TypeError, ValueError):
        params = ()
    if not params or any(p.kind is p.VAR_KEYWORD for p in params):
        return dict
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    names.discard("self")
    return lambda kwargs: {k: v for k, v in kwargs.items() if k in names}
