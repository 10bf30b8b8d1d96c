"""OpenEnv's HTTP API on our server: every plain (non-WebSocket) request is answered here.

One route table (:class:`Route`) gives both what is answered and what
``GET /openapi.json`` lists, so the document never claims a path the server does not
serve. The routes depend on the server's mode (:class:`ServerMode`), as in OpenEnv's
``create_app``:

====================  =========  ==========  ==============================================
path                  method     mode        answer
====================  =========  ==========  ==============================================
``/health``           GET        both        ``{"status": "healthy"}``
``/metadata``         GET        both        the environment's ``EnvironmentMetadata``
``/schema``           GET        both        JSON schemas of action, observation, state
``/openapi.json``     GET        both        the OpenAPI 3.1 document (:mod:`.openapi`)
``/mcp``              POST       both        JSON-RPC 2.0 MCP (:mod:`.mcp`)
``/reset``            POST       simulation  reset a fresh instance, return its observation
``/step``             POST       simulation  step a fresh instance, return its observation
``/state``            GET        simulation  the state of a fresh instance
``/ws``, ``/batch``   GET        both        426 unless it is a WebSocket upgrade
====================  =========  ==========  ==============================================

Any other path is 404, any other method 405 (with ``Allow``). ``HEAD`` is accepted
wherever ``GET`` is (no body).

HTTP ``/reset``, ``/step`` and ``/state`` are stateless, as in OpenEnv since 0.2: every
request builds an instance, calls it once and closes it, so an episode cannot be played
over HTTP (use ``/ws`` or ``/batch``). Request and response shapes and status codes are
OpenEnv's: 422 with FastAPI's ``{"detail": [...]}`` for a body or action that does not
validate, the reply ``{"observation", "reward", "done", "metadata"}`` of openenv >= 0.4.
Each call holds one of the server's ``max_sessions`` slots while it runs (503 when none is
free); an exception in the environment is a 500 with its message.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.version import VERSION as PYDANTIC_VERSION

from openenv_gym._version import __version__
from openenv_gym.protocol.openenv.messages import cut, loads
from openenv_gym.runtime.environment import EnvironmentMetadata
from openenv_gym.runtime.errors import describe, validation_errors, wire_safe
from openenv_gym.runtime.interfaces import HttpRequest, HttpResponse, json_response
from openenv_gym.runtime.loader import EnvModels
from openenv_gym.runtime.mcp import (
    REFUSED,
    Attachment,
    JsonRpcRequest,
    JsonRpcResponse,
    McpEndpoint,
)
from openenv_gym.runtime.openapi import Operation, openapi_document
from openenv_gym.runtime.settings import ServerMode

__all__ = [
    "API_VERSION",
    "EnvHost",
    "HttpApi",
    "ResetRequest",
    "ResetResponse",
    "ServerMode",
    "StepRequest",
    "StepResponse",
]

logger = logging.getLogger("openenv_gym.runtime")

API_VERSION = "1.0.0"
"""``info.version`` of the OpenAPI document: the version of OpenEnv's HTTP API served (what
OpenEnv's own app declares, and what ``openenv validate`` reads as ``openenv-http/1.x``).
Our package version is ``info.x-openenv-gym-version`` and the ``Server`` header."""


@dataclass(frozen=True, slots=True)
class EnvHost:
    """What the HTTP API needs of the server hosting the environment.

    Attributes:
        name: The environment's name.
        models: Its action, observation and state models.
        schema_json: The ``/schema`` body.
        metadata_json: The ``/metadata`` body.
        max_sessions: The server's capacity.
        idle_timeout: Seconds an MCP session may go unused (None: forever).
        acquire: Reserve one instance slot; False at capacity.
        release: Free one slot.
        active: Slots in use.
        build: Build one instance, off the loop where the class allows (raises
            ``FactoryFailed`` if the factory fails; the caller frees the slot).
        validate_action: Validate one action dict into the action model.
        awaits: Per ``reset_async`` / ``step_async``: whether the class's own coroutine
            is called instead of ``reset`` / ``step``.
        max_values: Most values a JSON body may hold (None: no limit).
        max_http_sessions: Most MCP sessions created over HTTP open at once (None: no
            limit besides ``max_sessions``).
        refuse_wide: The errors of an action with more keys than its model takes (refused
            unvalidated, at a bounded cost), or None to validate it.
    """

    name: str
    models: EnvModels
    schema_json: str
    metadata_json: str
    max_sessions: int
    idle_timeout: float | None
    acquire: Callable[[], bool]
    release: Callable[[], None]
    active: Callable[[], int]
    build: Callable[[], Awaitable[Any]]
    validate_action: Callable[[Any], Any]
    awaits: Mapping[str, bool]
    max_values: int | None = None
    max_http_sessions: int | None = None
    refuse_wide: Callable[[Any], list[Any] | None] = lambda _: None


# ------------------------------------------------------------------ request shapes


class ResetRequest(BaseModel):
    """Body of ``POST /reset`` (OpenEnv's): extra fields go to ``reset`` if it takes them."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0, description="Random seed")
    episode_id: str | None = Field(default=None, max_length=255, description="Episode id")


class StepRequest(BaseModel):
    """Body of ``POST /step`` (OpenEnv's): extra fields go to ``step`` if it takes them."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any] = Field(description="The action, as the action schema says")
    timeout_s: float | None = Field(default=None, gt=0, description="Passed to step")
    request_id: str | None = Field(default=None, max_length=255, description="Passed to step")


class ResetResponse(BaseModel):
    """Reply of ``POST /reset``."""

    observation: dict[str, Any] = Field(description="Observation fields, metadata included")
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None


class StepResponse(ResetResponse):
    """Reply of ``POST /step``."""


class HealthResponse(BaseModel):
    """Reply of ``GET /health``."""

    status: Literal["healthy"] = "healthy"


class SchemaResponse(BaseModel):
    """Reply of ``GET /schema``."""

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]


class ValidationErrorItem(BaseModel):
    """One entry of a 422 ``detail`` (Pydantic's error, FastAPI's shape)."""

    loc: list[str | int]
    msg: str
    type: str


class HTTPValidationError(BaseModel):
    """A 422 body."""

    detail: list[ValidationErrorItem]


class HTTPError(BaseModel):
    """Any other error body."""

    detail: str


# --------------------------------------------------------------------------- routes

Handler = Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]


@dataclass(frozen=True, slots=True)
class Route:
    """One path and method answered, and how ``/openapi.json`` lists it.

    Attributes:
        operation: Path, method and documentation.
        handler: Answers the request (an awaitable when the environment is async).
        listed: Whether the OpenAPI document lists it.
    """

    operation: Operation
    handler: Handler
    listed: bool = True

    @property
    def method(self) -> str:
        """``GET`` or ``POST``."""
        return self.operation.method.upper()


_NOT_FOUND = '{"detail":"Not Found"}'
_WEBSOCKET_PATHS = {
    "/ws": "WebSocket: OpenEnv's JSON session protocol",
    "/batch": "WebSocket: openenv-gym's batched msgpack protocol",
}


class HttpApi:
    """Answers plain HTTP requests for one environment class (see the module docstring).

    Args:
        host: The environment host.
        mode: ``simulation`` or ``production``.

    Raises:
        ConfigurationError: Unknown mode.
    """

    def __init__(self, host: EnvHost, mode: ServerMode | str = ServerMode.SIMULATION) -> None:
        self.host = host
        self.mode = ServerMode.of(mode)
        self.mcp = McpEndpoint(host)
        self.routes: dict[str, dict[str, Route]] = {}
        for route in self._route_list():
            self.routes.setdefault(route.operation.path, {})[route.method] = route
        self._openapi = json.dumps(self.openapi(), separators=(",", ":"))

    def handle(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """Answer ``request``: now, or later (an awaitable) when an async call is needed."""
        methods = self.routes.get(request.path)
        if methods is None:
            return json_response(404, _NOT_FOUND)
        method = request.method
        route = methods.get("GET" if method == "HEAD" else method)
        if route is None:
            allowed = ", ".join(sorted(methods))
            return json_response(405, '{"detail":"Method Not Allowed"}', (("Allow", allowed),))
        response = route.handler(request)
        if method != "HEAD":
            return response
        if isinstance(response, HttpResponse):
            return _headless(response)
        return _headless_later(response)

    def attach(self, session_id: str) -> Attachment | str:
        """An MCP session's instance for a ``/ws?session_id=`` WebSocket, or why not."""
        return self.mcp.attach(session_id)

    async def aclose(self) -> None:
        """Close what outlives a request (MCP sessions)."""
        await self.mcp.aclose()

    # ---------------------------------------------------------------- the table
    def _route_list(self) -> list[Route]:
        routes = [
            Route(
                Operation("/health", "get", "Health check", tag="Health", response=HealthResponse),
                self._health,
            ),
            Route(
                Operation(
                    "/metadata",
                    "get",
                    "Environment metadata",
                    tag="Environment Info",
                    response=EnvironmentMetadata,
                ),
                self._metadata,
            ),
            Route(
                Operation(
                    "/schema",
                    "get",
                    "JSON schemas of the action, observation and state",
                    tag="Schema",
                    response=SchemaResponse,
                ),
                self._schema,
            ),
            Route(Operation("/openapi.json", "get", "This document"), self._openapi_json, False),
            Route(
                Operation(
                    "/mcp",
                    "post",
                    "MCP JSON-RPC 2.0: tools/list, tools/call, openenv/session/*",
                    tag="MCP",
                    description="Always HTTP 200 with a JSON-RPC response (errors included).",
                    request=JsonRpcRequest,
                    response=JsonRpcResponse,
                ),
                self._mcp,
            ),
        ]
        upgrade = {101: ("Switching Protocols", None), 426: ("Not an upgrade", HTTPError)}
        for path, summary in _WEBSOCKET_PATHS.items():
            operation = Operation(path, "get", summary, tag="WebSocket", responses=upgrade)
            routes.append(Route(operation, _upgrade_required))
        if self.mode is ServerMode.SIMULATION:
            routes += self._simulation_routes()
        return routes

    def _simulation_routes(self) -> list[Route]:
        """``/reset``, ``/step``, ``/state``; documented with the environment's models."""
        models = self.host.models
        step_request = create_model(
            "StepRequest", __base__=StepRequest, action=(models.action, ...)
        )
        reset_response = create_model(
            "ResetResponse", __base__=ResetResponse, observation=(models.observation, ...)
        )
        step_response = create_model(
            "StepResponse", __base__=StepResponse, observation=(models.observation, ...)
        )
        errors: dict[int, tuple[str, type[BaseModel] | None]] = {
            422: ("Validation Error", HTTPValidationError),
            500: ("The environment raised", HTTPError),
            503: ("No instance slot free", HTTPError),
        }
        control = "Environment Control"
        reset = Operation(
            "/reset",
            "post",
            "Reset a fresh instance",
            tag=control,
            description=_STATELESS,
            request=ResetRequest,
            request_required=False,
            response=reset_response,
            responses=errors,
        )
        step = Operation(
            "/step",
            "post",
            "Step a fresh instance",
            tag=control,
            description=_STATELESS,
            request=step_request,
            response=step_response,
            responses=errors,
        )
        state = Operation(
            "/state",
            "get",
            "State of a fresh instance",
            tag="State Management",
            description=_STATELESS,
            response=models.state,
            responses=errors,
        )
        return [Route(reset, self._reset), Route(step, self._step), Route(state, self._state)]

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document of the routes."""
        operations = [
            route.operation
            for methods in self.routes.values()
            for route in methods.values()
            if route.listed
        ]
        return openapi_document(
            title="OpenEnv Environment HTTP API",
            version=API_VERSION,
            operations=operations,
            description=f"{self.host.name}, served by openenv-gym {__version__} "
            f"in {self.mode.value} mode. WebSocket sessions: /ws (OpenEnv's JSON protocol), "
            "/batch (openenv-gym's batched protocol).",
            extra_info={"x-openenv-gym-version": __version__, "x-openenv-mode": self.mode.value},
        )

    # ---------------------------------------------------------------- handlers
    def _health(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, '{"status":"healthy"}')

    def _metadata(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, self.host.metadata_json)

    def _schema(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, self.host.schema_json)

    def _openapi_json(self, request: HttpRequest) -> HttpResponse:
        return json_response(200, self._openapi)

    def _mcp(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        answer = self.mcp.handle(request.body)
        if isinstance(answer, dict):
            error = answer.get("error")
            data = error.get("data") if isinstance(error, dict) else None
            return _json(400 if isinstance(data, dict) and REFUSED in data else 200, answer)
        return _later(answer)

    def _reset(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        body = _json_body(request, self.host.max_values, required=False)
        if isinstance(body, HttpResponse):
            return body
        if body is not None and not isinstance(body, dict):
            return _not_an_object(body)
        try:
            kwargs = ResetRequest.model_validate(body or {}).model_dump(exclude_unset=True)
        except ValidationError as exc:
            return _unprocessable(_body_errors(exc))
        awaited = self.host.awaits.get("reset_async", False)

        def call(env: Any) -> Any:
            method = env.reset_async if awaited else env.reset
            return method(**_accepted(method, kwargs))

        return self._with_instance(call, _observation_response)

    def _step(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        body = _json_body(request, self.host.max_values, required=True)
        if isinstance(body, HttpResponse):
            return body
        if not isinstance(body, dict):
            return _not_an_object(body)
        try:
            parsed = StepRequest.model_validate(body)
        except ValidationError as exc:
            return _unprocessable(_body_errors(exc))
        wide = self.host.refuse_wide(parsed.action)
        if wide is not None:
            return _unprocessable(_with_urls(wide))
        try:
            action = self.host.validate_action(parsed.action)
        except ValidationError as exc:
            return _unprocessable(_action_errors(exc))
        kwargs = parsed.model_dump(exclude_unset=True, exclude={"action"})
        awaited = self.host.awaits.get("step_async", False)

        def call(env: Any) -> Any:
            method = env.step_async if awaited else env.step
            return method(action, **_accepted(method, kwargs, skip="action"))

        return self._with_instance(call, _observation_response)

    def _state(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        return self._with_instance(lambda env: env.state, _state_response)

    # ---------------------------------------------------------------- instances
    def _with_instance(
        self, call: Callable[[Any], Any], render: Callable[[Any], HttpResponse]
    ) -> HttpResponse | Awaitable[HttpResponse]:
        """Build an instance, ``render(call(instance))``, close it (awaited)."""
        host = self.host
        if not host.acquire():
            active, limit = host.active(), host.max_sessions
            return json_response(
                503, {"detail": f"Server at capacity: {active}/{limit} sessions active."}
            )
        return self._built(call, render)

    async def _built(
        self, call: Callable[[Any], Any], render: Callable[[Any], HttpResponse]
    ) -> HttpResponse:
        try:
            env = await self.host.build()
        except Exception as exc:
            self.host.release()
            return json_response(500, {"detail": describe(exc)})
        try:
            outcome = call(env)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return render(outcome)
        except Exception as exc:
            return _execution_failed(exc)
        finally:
            self._free(env)

    def _free(self, env: Any) -> None:
        close = getattr(env, "close", None)
        try:
            if callable(close):
                close()
        except Exception:
            logger.warning("environment close() raised", exc_info=True)
        finally:
            self.host.release()


_STATELESS = (
    "Stateless, as in OpenEnv: every request builds an instance, calls it once and closes "
    "it. Play episodes over the /ws or /batch WebSocket."
)


def _json(status: int, payload: Any) -> HttpResponse:
    """A response that is always valid JSON.

    What JSON cannot carry (NaN, bytes, sets...) is written as its ``repr``
    (:func:`~openenv_gym.runtime.errors.wire_safe`).
    """
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        text = json.dumps(wire_safe(payload), separators=(",", ":"))
    return json_response(status, text)


def _upgrade_required(request: HttpRequest) -> HttpResponse:
    return json_response(426, '{"detail":"WebSocket endpoint"}')


def _headless(response: HttpResponse) -> HttpResponse:
    """The answer to ``HEAD``: the ``GET`` answer without its body."""
    return HttpResponse(response.status, b"", response.content_type, response.headers)


async def _headless_later(pending: Awaitable[HttpResponse]) -> HttpResponse:
    return _headless(await pending)


async def _later(pending: Awaitable[dict[str, Any]]) -> HttpResponse:
    return _json(200, await pending)


def _json_body(request: HttpRequest, max_values: int | None, *, required: bool) -> Any:
    """The parsed body, None when empty and optional, or the 422 (400) response.

    A body nested too deeply for the parser, or holding more than ``max_values`` values,
    is refused with 400 and one error (``json_too_deep``, ``json_too_large``).
    """
    body = request.body
    if not body.strip():
        if not required:
            return None
        return _unprocessable(
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        )
    try:
        return loads(body, max_values)
    except RecursionError:
        return _refused("json_too_deep", "JSON nested too deeply for the parser")
    except (ValueError, UnicodeDecodeError) as exc:
        if max_values is not None and str(exc).startswith("more than "):
            return _refused("json_too_large", f"JSON body of {exc}")
        position = exc.pos if isinstance(exc, json.JSONDecodeError) else 0
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        return _unprocessable(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", position],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": reason},
                }
            ]
        )


def _refused(kind: str, message: str) -> HttpResponse:
    """400: a body over a limit, refused unread (FastAPI's error shape)."""
    return _json(400, {"detail": [{"type": kind, "loc": ["body"], "msg": message, "input": None}]})


def _not_an_object(body: Any) -> HttpResponse:
    """The 422 of a JSON body that is not an object (FastAPI's wording)."""
    msg = "Input should be a valid dictionary or object to extract fields from"
    error = {"type": "model_attributes_type", "loc": ["body"], "msg": msg, "input": cut(body)}
    return _unprocessable([wire_safe(error)])


def _body_errors(exc: ValidationError) -> list[Any]:
    """Pydantic's errors of a request body, located under ``body`` as FastAPI does."""
    errors: list[dict[str, Any]] = validation_errors(exc)
    for error in errors:
        error["loc"] = ["body", *error.get("loc", ())]
    return errors


def _action_errors(exc: ValidationError) -> list[Any]:
    """An invalid action's errors as upstream sends them: not under ``body``, with ``url``."""
    return _with_urls(validation_errors(exc))


def _with_urls(errors: list[Any]) -> list[Any]:
    """Pydantic's ``url`` on each error (not on the count of those not shown)."""
    for error in errors:
        if error["type"] != "too_many_errors":
            error["url"] = f"{_ERRORS_URL}{error['type']}"
    return errors


_ERRORS_URL = "https://errors.pydantic.dev/{}.{}/v/".format(*PYDANTIC_VERSION.split(".")[:2])


def _unprocessable(detail: list[Any]) -> HttpResponse:
    return _json(422, {"detail": detail})


def _execution_failed(exc: Exception) -> HttpResponse:
    logger.debug("environment raised", exc_info=exc)
    return json_response(500, {"detail": describe(exc)})


def _accepted(method: Any, kwargs: Mapping[str, Any], skip: str = "") -> dict[str, Any]:
    """The ``kwargs`` ``method`` accepts (all of them if it takes ``**kwargs``), as upstream."""
    if not kwargs:
        return {}
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return {}
    everything = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {k: v for k, v in kwargs.items() if k != skip and (everything or k in params)}


def _observation_response(obs: Any) -> HttpResponse:
    """OpenEnv's reset / step reply (openenv >= 0.4: ``metadata`` inside and beside)."""
    fields = obs.model_dump(mode="json", exclude={"reward", "done"})
    reward = obs.reward
    if reward is not None:
        reward = float(reward)
        if not math.isfinite(reward):
            reward = None
    payload = {
        "observation": fields,
        "reward": reward,
        "done": bool(obs.done),
        "metadata": fields.get("metadata") or None,
    }
    return _json(200, payload)


def _state_response(state: Any) -> HttpResponse:
    if isinstance(state, BaseModel):
        return json_response(200, state.model_dump_json())
    return _json(200, dict(state) if state else {})
