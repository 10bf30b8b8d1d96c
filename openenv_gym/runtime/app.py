"""The server runtime: one environment class, many instances, behind one listening socket.

Endpoints (``docs/protocol.md``):

* ``GET /ws`` (WebSocket) -- OpenEnv's JSON session protocol: one instance per
  connection, exactly as OpenEnv servers do, so official OpenEnv clients work
  (:mod:`openenv_gym.runtime.json_channel`).
* ``GET /batch`` (WebSocket, subprotocol ``openenv-gym.batch.v2`` or ``.v1``) -- the
  batched protocol: many instances (slots) per connection
  (:mod:`openenv_gym.runtime.batch_channel`).
* every plain HTTP request (``/health``, ``/schema``, ``/metadata``, ``/openapi.json``,
  ``POST /mcp``, and in simulation mode ``POST /reset``, ``POST /step``, ``GET /state``)
  -- OpenEnv's HTTP API, :mod:`openenv_gym.runtime.httpapi`.

Connections, HTTP and limits are :mod:`openenv_gym.runtime.http`'s; how the environment
class is called is :mod:`openenv_gym.runtime.calls`'. This module hosts it: it starts and
stops the server, routes each upgrade to its channel, and owns the capacity
(``max_sessions``) that live instances share over every endpoint.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel

from openenv_gym.protocol import batch as bp
from openenv_gym.runtime.batch_channel import BatchChannel
from openenv_gym.runtime.calls import Capacity, EnvCalls
from openenv_gym.runtime.environment import EnvironmentMetadata
from openenv_gym.runtime.http import WebSocketServer
from openenv_gym.runtime.httpapi import EnvHost, HttpApi
from openenv_gym.runtime.interfaces import HttpRequest, HttpResponse, Socket, json_response
from openenv_gym.runtime.json_channel import JsonChannel
from openenv_gym.runtime.loader import EnvModels, resolve_models
from openenv_gym.runtime.mcp import close_env
from openenv_gym.runtime.settings import ServerConfig

__all__ = ["EnvServer", "ServerConfig"]

logger = logging.getLogger("openenv_gym.runtime")


_GUARDS = {
    "handshake_timeout": "a client may hold a connection open without ever sending a "
    "request head (slowloris)",
    "idle_timeout": "a WebSocket that sends nothing keeps its sessions forever",
    "send_timeout": "a peer that never reads keeps its connection and sessions forever",
    "ping_interval": "a peer that vanished without closing keeps its sessions until the idle "
    "timeout",
    "ping_timeout": "a peer that stops answering pings is never dropped",
}
"""The timeouts that guard the server, and what turning each off lets a client do."""


class EnvServer:
    """Hosts one environment class over both wire protocols.

    Args:
        env_factory: Zero-argument callable (usually the class) making one instance.
        config: Bind address, capacity and limits.
        models: Action / observation / state models; read from the class when omitted.
        name: Environment name for ``/metadata`` and ``hello``.
        build_in_thread: Build instances off the event loop (None: unless the class says
            ``REQUIRES_SINGLE_THREAD_EXECUTOR``; :class:`~openenv_gym.runtime.calls.EnvCalls`).
    """

    def __init__(
        self,
        env_factory: Callable[[], Any],
        config: ServerConfig | None = None,
        *,
        models: EnvModels | None = None,
        name: str | None = None,
        build_in_thread: bool | None = None,
    ) -> None:
        self.env_factory = env_factory
        self.config = config or ServerConfig()
        self.models = models or resolve_models(env_factory)
        self.name: str = name or str(getattr(env_factory, "__name__", "env"))
        self.capacity = Capacity(self.config.max_sessions)
        """The live instances, over every endpoint."""
        self.calls = EnvCalls(env_factory, self.models, self.name, build_in_thread=build_in_thread)
        """How the environment class is called."""
        self._server: WebSocketServer | None = None
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

    @property
    def active(self) -> int:
        """Environment instances alive now, over every endpoint."""
        return self.capacity.active

    def _http_host(self) -> EnvHost:
        """What the HTTP API uses of this server (instances, capacity, models)."""
        capacity, calls = self.capacity, self.calls
        return EnvHost(
            name=self.name,
            models=self.models,
            schema_json=self._schema,
            metadata_json=self._metadata,
            max_sessions=self.config.max_sessions,
            idle_timeout=self.config.idle_timeout,
            acquire=lambda: capacity.acquire() == 1,
            release=capacity.release,
            active=lambda: capacity.active,
            build=lambda: calls.build_one(capacity.release),
            validate_action=calls.action.validate_python,
            awaits=calls.awaits,
            max_values=self.config.max_values,
            max_http_sessions=self.config.max_http_sessions,
            refuse_wide=calls.refuse_wide,
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
        for name, guards in _GUARDS.items():
            if getattr(config, name) is None:
                logger.warning("%s is off: %s", name, guards)

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
        try:
            if self._server is not None:
                await self._server.close()
            await self.http_api.aclose()
        finally:
            self.calls.close()

    # ------------------------------------------------------------------ HTTP
    def handle_http(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        """Answer a plain request (:mod:`openenv_gym.runtime.httpapi`)."""
        return self.http_api.handle(request)

    def open_channel(
        self, request: HttpRequest, offered: Sequence[str]
    ) -> tuple[Callable[[Socket], Any], str | None] | HttpResponse:
        """The channel of a WebSocket upgrade: ``/ws`` (JSON) or ``/batch``."""
        calls, capacity, config = self.calls, self.capacity, self.config
        if request.path == "/ws":
            attach = request.query.get("session_id")  # an MCP session's instance (openenv>=0.5)
            if attach:
                lent = self.http_api.attach(attach)
                return (lambda socket: JsonChannel(calls, capacity, config, socket, lent)), None
            return (lambda socket: JsonChannel(calls, capacity, config, socket)), None
        if request.path == "/batch":
            versions = [v for name in offered if (v := bp.version_of(name)) is not None]
            # the endpoint does not insist on its subprotocol: version 1 without one
            version = max(versions) if versions else bp.PROTOCOL_VERSION
            chosen = bp.SUBPROTOCOLS[version] if versions else None
            return (lambda socket: BatchChannel(calls, capacity, config, socket, version)), chosen
        return json_response(404, '{"detail":"Not Found"}')
