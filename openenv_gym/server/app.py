"""The server runtime: one environment class, many instances, on the websockets server.

Endpoints (``docs/protocol.md``):

* ``GET /ws`` (WebSocket) -- OpenEnv's JSON session protocol: one instance per
  connection, exactly as OpenEnv servers do, so official OpenEnv clients work.
* ``GET /batch`` (WebSocket, subprotocol ``openenv-gym.batch.v1``) -- the batched
  protocol: many instances (slots) per connection.
* ``GET /health``, ``GET /schema``, ``GET /metadata`` -- JSON, as OpenEnv serves them.

Capacity (``max_sessions``) counts live instances over both endpoints. Environment calls
run on the event loop: they are expected to be fast, and batching amortises the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import inspect
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from openenv_gym._version import __version__
from openenv_gym.exceptions import LocalProtocolError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.server.columns import batch_table, result_table
from openenv_gym.server.environment import EnvironmentMetadata, ObservationBatch
from openenv_gym.server.loader import EnvModels, resolve_models

__all__ = ["EnvServer", "ServerConfig"]

logger = logging.getLogger("openenv_gym.server")

SERVER_NAME = f"openenv-gym/{__version__}"


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """Server settings.

    Attributes:
        host: Address to bind. 127.0.0.1 unless told otherwise.
        port: Port to bind; 0 picks a free one (read it back from :attr:`EnvServer.url`).
        max_sessions: Most environment instances alive at once, over both endpoints.
        max_frame: Largest frame accepted, in bytes.
        compression: Offer permessage-deflate (off: it costs ~30 % throughput on loopback).
        ping_interval: Seconds between WebSocket pings (None: no pings).
        ping_timeout: Seconds to wait for a pong before dropping the connection.
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_sessions: int = 4096
    max_frame: int = 16 * 2**20
    compression: bool = False
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0


class _CapacityFull(Exception):
    def __init__(self, active: int, limit: int) -> None:
        super().__init__(
            f"Server at capacity: {active}/{limit} sessions active. Cannot accept new connections."
        )
        self.active = active
        self.limit = limit


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
        self._server: Server | None = None
        self._reset_filter = _reset_kwargs_filter(env_factory)
        self._actions: TypeAdapter[list[Any]] = TypeAdapter(list[self.models.action])  # type: ignore[name-defined]
        self._schema = json.dumps(
            {
                "action": self.models.action.model_json_schema(),
                "observation": self.models.observation.model_json_schema(),
                "state": self.models.state.model_json_schema(),
            }
        )
        self._metadata = self._probe_metadata()

    # ------------------------------------------------------------------ lifecycle
    def _probe_metadata(self) -> str:
        env = self.env_factory()  # fail fast at start-up if the env cannot be built
        try:
            getter = getattr(env, "get_metadata", None)
            meta = getter() if callable(getter) else None
        finally:
            _close_env(env)
        if isinstance(meta, BaseModel):
            return meta.model_dump_json()
        return EnvironmentMetadata(
            name=self.name, description=f"{self.name} environment"
        ).model_dump_json()

    async def start(self) -> None:
        """Bind and start serving. Next: :attr:`url`, then :meth:`aclose`."""
        cfg = self.config
        self._server = await serve(
            self._handle,
            cfg.host,
            cfg.port,
            process_request=self._process_request,
            select_subprotocol=_select_subprotocol,
            compression="deflate" if cfg.compression else None,
            max_size=cfg.max_frame,
            ping_interval=cfg.ping_interval,
            ping_timeout=cfg.ping_timeout,
            server_header=SERVER_NAME,
            max_queue=64,
        )

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("server not started")
        sock = next(iter(self._server.sockets))
        return int(sock.getsockname()[1])

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
            self._server.close()
            await self._server.wait_closed()

    # ------------------------------------------------------------------ HTTP
    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path in ("/ws", "/batch"):
            if "upgrade" not in request.headers.get("Connection", "").lower():
                return _json_response(
                    connection, http.HTTPStatus.UPGRADE_REQUIRED, '{"detail":"WebSocket endpoint"}'
                )
            return None
        body = {
            "/health": '{"status":"healthy"}',
            "/schema": self._schema,
            "/metadata": self._metadata,
        }.get(path)
        if body is None:
            return _json_response(connection, http.HTTPStatus.NOT_FOUND, '{"detail":"Not Found"}')
        return _json_response(connection, http.HTTPStatus.OK, body)

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

    async def _handle(self, connection: ServerConnection) -> None:
        assert connection.request is not None
        path = connection.request.path.split("?", 1)[0]
        try:
            if path == "/batch":
                await self._serve_batch(connection)
            else:
                await self._serve_json(connection)
        except ConnectionClosed:
            pass

    # ---- OpenEnv JSON /ws: one instance per connection
    async def _serve_json(self, connection: ServerConnection) -> None:
        session = op.ServerSession()
        env: Any = None
        if not self._acquire():
            session.send_error(
                op.ErrorCode.CAPACITY_REACHED,
                str(_CapacityFull(self.active, self.config.max_sessions)),
                active_sessions=self.active,
                max_sessions=self.config.max_sessions,
            )
            await _flush_and_close(connection, session.data_to_send())
            return
        try:
            try:
                env = self._create()
            except _FactoryFailed as exc:
                session.send_error(op.ErrorCode.FACTORY_ERROR, str(exc), factory_name=exc.factory)
                await _flush_and_close(connection, session.data_to_send())
                return
            async for frame in connection:
                session.receive_data(frame)
                for request in session.events_received():
                    self._answer_json(env, session, request)
                for out in session.data_to_send():
                    await connection.send(out)
                if session.closed:
                    break
        finally:
            if env is not None:
                _close_env(env)
            self._release()
            await connection.close()

    def _answer_json(self, env: Any, session: op.ServerSession, request: op.Request) -> None:
        if isinstance(request, op.CloseRequest):
            return
        try:
            if isinstance(request, op.StateRequest):
                session.send_state(_dump_state(env.state, json_mode=True))
                return
            if isinstance(request, op.ResetRequest):
                obs = env.reset(**self._reset_filter(request.kwargs))
            else:
                obs = env.step(
                    self.models.action.__pydantic_validator__.validate_python(request.action)
                )
            fields, reward, done, metadata = _split_observation(obs, keep_metadata=True)
            session.send_observation(fields, reward, done, metadata)
        except ValidationError as exc:
            session.send_error(
                op.ErrorCode.VALIDATION_ERROR, "Invalid message", errors=_errors(exc)
            )
        except Exception as exc:
            logger.debug("environment raised", exc_info=True)
            session.send_error(op.ErrorCode.EXECUTION_ERROR, str(exc) or type(exc).__name__)

    # ---- batched protocol: many instances per connection
    async def _serve_batch(self, connection: ServerConnection) -> None:
        version = bp.version_of(connection.subprotocol) or bp.PROTOCOL_VERSION
        conn = bp.BatchServer(max_frame=self.config.max_frame, version=version)
        slots: dict[int, Any] = {}
        try:
            async for frame in connection:
                conn.receive_data(frame)
                for event in conn.events_received():
                    if isinstance(event, bp.HelloRequestReceived):
                        conn.send_hello(
                            server=SERVER_NAME, env=self.name, max_slots=self.config.max_sessions
                        )
                    elif event.op in (bp.Op.STEP, bp.Op.RESET):
                        self._answer_table(conn, event, slots)
                    else:
                        results = self._run_batch(event, slots)
                        try:
                            conn.send_results(event, results)
                        except LocalProtocolError:  # one env's result cannot be encoded
                            conn.send_results(event, [_encodable(r) for r in results])
                for out in conn.data_to_send():
                    await connection.send(out)
        finally:
            for env in slots.values():
                _close_env(env)
            self._release(len(slots))

    def _answer_table(
        self, conn: bp.BatchServer, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> None:
        results, batch, ready = self._run_episode_op(request, slots)
        version = conn.version
        try:
            if batch is None:
                table = result_table(results, version=version)
            else:
                table = batch_table(batch, self.models.observation, results, ready, version)
            conn.send_table(request, table)
        except (LocalProtocolError, ValueError, TypeError) as exc:
            # some result cannot be encoded: fail only those (all of a batch hook's)
            if batch is not None:
                failed = _execution_error(exc)
                results = [failed if r is None else r for r in results]
            checked = [
                r if isinstance(r, bp.SlotError) else _encodable(_slot_result(r)) for r in results
            ]
            fixed = [
                c if isinstance(c, bp.SlotError) else r
                for r, c in zip(results, checked, strict=True)
            ]
            conn.send_table(request, result_table(fixed, version=1))

    def _run_episode_op(
        self, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> tuple[list[Any], ObservationBatch | None, list[int]]:
        """``step`` / ``reset`` for every slot of a request: the hot path.

        Actions are validated in one call for the whole request. An environment class may
        act on all its instances of the request at once (``step_batch`` / ``reset_batch``,
        see ``docs/protocol.md`` section 3.9).

        Returns:
            Per slot, an observation or a SlotError (None where the batch holds it); the
            batch hook's :class:`ObservationBatch`, if it gave one; and the positions of
            the slots it covers.
        """
        envs = [slots.get(slot) for slot in request.slots]
        if None in envs:
            results: list[Any] = [
                _no_such_slot(slot) if env is None else None
                for slot, env in zip(request.slots, envs, strict=True)
            ]
            live = [k for k, env in enumerate(envs) if env is not None]
        else:
            results, live = [None] * len(envs), list(range(len(envs)))
        args = request.args
        one: Callable[[Any, Any], Any]
        if request.op is bp.Op.RESET:
            keep = self._reset_filter
            ready, inputs = live, [keep(args[k]) for k in live]
            name, one = "reset_batch", _reset_one
        else:
            ready, inputs = [], []
            checked = self._validate_actions(
                list(args) if len(live) == len(args) else [args[k] for k in live]
            )
            for k, action in zip(live, checked, strict=True):
                if action.__class__ is bp.SlotError:
                    results[k] = action
                else:
                    ready.append(k)
                    inputs.append(action)
            name, one = "step_batch", _step_one
        if not ready:
            return results, None, ready
        kind = envs[ready[0]].__class__
        hook = _hook_of(kind, name)
        if hook is not None and all(envs[k].__class__ is kind for k in ready):
            outcome = _batched(hook, [envs[k] for k in ready], inputs)
            if isinstance(outcome, ObservationBatch):
                for j, exc in outcome.errors.items():
                    results[ready[j]] = _execution_error(exc)
                return results, outcome, ready
            for k, result in zip(ready, outcome, strict=True):
                results[k] = result
            return results, None, ready
        for k, value in zip(ready, inputs, strict=True):
            results[k] = _guard(one, envs[k], value)
        return results, None, ready

    def _validate_actions(self, args: list[Any]) -> list[Any]:
        """The action models of ``args`` in one validation call; a SlotError where invalid."""
        try:
            return list(self._actions.validate_python(args))
        except ValidationError:
            pass  # some are invalid: find which, one by one
        validate = self.models.action.__pydantic_validator__.validate_python
        out: list[Any] = []
        for arg in args:
            try:
                out.append(validate(arg))
            except ValidationError as exc:
                out.append(
                    bp.SlotError(
                        op.ErrorCode.VALIDATION_ERROR.value,
                        "Invalid message",
                        {"errors": _errors(exc)},
                    )
                )
        return out

    def _run_batch(
        self, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> list[bp.SlotResult | bp.SlotError | None]:
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
        _close_env(env)

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
        except ValidationError as exc:
            return bp.SlotError(
                op.ErrorCode.VALIDATION_ERROR.value, "Invalid message", {"errors": _errors(exc)}
            )
        except Exception as exc:
            logger.debug("environment raised", exc_info=True)
            return bp.SlotError(op.ErrorCode.EXECUTION_ERROR.value, str(exc) or type(exc).__name__)

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
            if not self._acquire():
                full = _CapacityFull(self.active, self.config.max_sessions)
                results.append(
                    bp.SlotError(
                        op.ErrorCode.CAPACITY_REACHED.value,
                        str(full),
                        {"active_sessions": full.active, "max_sessions": full.limit},
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


class _FactoryFailed(Exception):
    def __init__(self, factory: str, cause: BaseException) -> None:
        super().__init__(f"Environment factory '{factory}' failed to create instance: {cause}")
        self.factory = factory


def _select_subprotocol(connection: ServerConnection, offered: Any) -> Subprotocol | None:
    """On ``/batch``: the newest batched-protocol version the client offers (section 1.3)."""
    assert connection.request is not None
    if connection.request.path.split("?", 1)[0] != "/batch":
        return None
    versions = [v for name in offered if (v := bp.version_of(name)) is not None]
    return Subprotocol(bp.SUBPROTOCOLS[max(versions)]) if versions else None


def _no_such_slot(slot: int) -> bp.SlotError:
    return bp.SlotError(bp.SlotErrorCode.NO_SUCH_SLOT.value, f"slot {slot} is not open")


def _execution_error(exc: BaseException) -> bp.SlotError:
    logger.debug("environment raised", exc_info=exc)
    return bp.SlotError(op.ErrorCode.EXECUTION_ERROR.value, str(exc) or type(exc).__name__)


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
        return [_execution_error(exc)] * len(envs)
    if len(outcomes) != len(envs):
        error = ValueError(f"the batched hook returned {len(outcomes)} results for {len(envs)}")
        return [_execution_error(error)] * len(envs)
    return [_execution_error(o) if isinstance(o, BaseException) else o for o in outcomes]


def _guard(call: Callable[[Any, Any], Any], env: Any, arg: Any) -> Any:
    """``call(env, arg)``; an exception becomes the slot's EXECUTION_ERROR."""
    try:
        return call(env, arg)
    except Exception as exc:
        return _execution_error(exc)


def _json_response(connection: ServerConnection, status: http.HTTPStatus, body: str) -> Response:
    response = connection.respond(status, body)
    headers = Headers(response.headers)
    del headers["Content-Type"]  # Headers is a multidict: assigning would add a second one
    headers["Content-Type"] = "application/json"
    return Response(response.status_code, response.reason_phrase, headers, response.body)


async def _flush_and_close(connection: ServerConnection, frames: list[str]) -> None:
    with contextlib.suppress(ConnectionClosed):
        for frame in frames:
            await connection.send(frame)
    await connection.close()


def _close_env(env: Any) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            logger.warning("environment close() raised", exc_info=True)


def _errors(exc: ValidationError) -> list[Any]:
    return json.loads(exc.json(include_url=False))  # type: ignore[no-any-return]


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


def _encodable(result: bp.SlotResult | bp.SlotError | None) -> bp.SlotResult | bp.SlotError | None:
    """The result, or an EXECUTION_ERROR if msgpack cannot carry it (a datetime field...)."""
    if isinstance(result, bp.SlotResult):
        try:
            bp.encode_frame({"obs": result.observation, "meta": result.metadata})
        except LocalProtocolError as exc:
            return bp.SlotError(op.ErrorCode.EXECUTION_ERROR.value, str(exc))
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


async def run_server(
    env_factory: Callable[[], Any], config: ServerConfig, on_ready: Callable[[str], None]
) -> None:
    """Start a server, report its URL through ``on_ready``, serve until cancelled."""
    server = EnvServer(env_factory, config)
    await server.start()
    on_ready(server.url)
    try:
        await asyncio.Future()
    finally:
        await server.aclose()
