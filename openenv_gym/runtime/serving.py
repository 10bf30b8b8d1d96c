"""What a server hosts, and where its instances live: in this process, or one per worker.

``openenv-gym serve`` (and a Ray actor's server) host one environment, named one of three
ways: a name in the record table (``wordle``), an environment class (``--env
module:Class``), or an unmodified OpenEnv app module (``--app MODULE:ATTR``, ``--app-dir
DIR``: :mod:`openenv_gym.runtime.apps`). :func:`host` loads it and decides where its
instances live:

* **in this process** when the class is marked ``SUPPORTS_CONCURRENT_SESSIONS = True``
  (our own environments, and 13 of upstream's), or when ``concurrent=True`` says the user
  knows its instances are independent;
* **one per worker process** otherwise (:mod:`openenv_gym.runtime.workers`): OpenEnv's
  server takes one session of such a class per process, and so do we, but one server
  holds up to ``max_workers`` of them behind its one batched endpoint.

The flag is read from the class, as OpenEnv's ``create_app`` reads it (its ``Environment``
base says False). A class written for our runtime without OpenEnv's base counts as
concurrent unless it says otherwise (``openenv_gym.runtime.environment.Environment``
says True). When the app gives a factory function whose class cannot be told from its
annotation, one instance is made here to read it, as OpenEnv's server does.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from typing import Any

from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError
from openenv_gym.runtime.app import EnvServer
from openenv_gym.runtime.apps import AppTarget, OpenEnvApp, app_models, load_app
from openenv_gym.runtime.loader import EnvModels, load_env, resolve_models
from openenv_gym.runtime.mcp import close_env
from openenv_gym.runtime.remote import worker_environment
from openenv_gym.runtime.settings import ServerConfig, ServerMode
from openenv_gym.runtime.workers import DEFAULT_MAX_WORKERS, WorkerPool

__all__ = ["DEFAULT_MAX_WORKERS", "Hosted", "host"]

logger = logging.getLogger("openenv_gym.runtime")


@dataclass
class Hosted:
    """A server ready to start, and the worker processes behind it (if any).

    Attributes:
        server: The server (next: ``await server.start()``).
        pool: The worker processes (None: the instances live in this process).
        app: What the app module's factory was given (None: not an app).
        spec: What was named, for messages (``wordle``, ``module:Class``, ``module:app``).
    """

    server: EnvServer
    pool: WorkerPool | None = None
    app: OpenEnvApp | None = None
    spec: str = ""

    @property
    def in_workers(self) -> bool:
        """Whether each instance lives in a worker process of its own."""
        return self.pool is not None

    async def aclose(self) -> None:
        """Close the server (every connection), then stop the workers."""
        try:
            await self.server.aclose()
        finally:
            self.close_workers()

    def close_workers(self) -> None:
        """Stop the worker processes (blocks until they are gone). Idempotent."""
        if self.pool is not None:
            self.pool.close()


def host(
    config: ServerConfig,
    *,
    env: str | None = None,
    app: AppTarget | None = None,
    concurrent: bool = False,
    max_workers: int = DEFAULT_MAX_WORKERS,
) -> Hosted:
    """Load what is named and build its server (not started); workers started if needed.

    Args:
        config: Bind address, limits. With workers, ``max_sessions`` is at most
            ``max_workers``.
        env: A name in the record table or ``module:Class``.
        app: An OpenEnv app module (exclusive with ``env``).
        concurrent: Host every instance in this process, whatever the class says.
        max_workers: Most worker processes (one per live instance).

    Raises:
        ConfigurationError: Nothing or both named, or what is named cannot be loaded
            (:class:`~openenv_gym.exceptions.AppError` for an app module).
        OpenEnvGymError: The environment cannot be built, or its workers not started.
    """
    if (env is None) == (app is None):
        raise ConfigurationError("name one environment: a name or module:Class, or an app")
    if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1:
        raise ConfigurationError(f"max_workers must be a positive integer, got {max_workers!r}")
    recorded: OpenEnvApp | None = None
    target: dict[str, Any]
    if app is not None:
        recorded, app = load_app(app)
        factory: Any = recorded.env
        models: EnvModels | None = app_models(recorded)
        name, spec, target = recorded.name, app.spec, {"app": app.as_dict()}
        default = False
        if recorded.mode == ServerMode.PRODUCTION and config.mode is ServerMode.SIMULATION:
            config = replace(config, mode=ServerMode.PRODUCTION)  # as the app asks
        if recorded.max_concurrent_envs is not None:
            logger.info(
                "%s: the native server would take %d session(s); ours takes --max-sessions "
                "(--max-workers when not concurrent)",
                spec,
                recorded.max_concurrent_envs,
            )
    else:
        assert env is not None
        factory = load_env(env)
        models, name, spec, target = None, env.rsplit(":", 1)[-1].lower(), env, {"env": env}
        default = True
    try:
        kind = _made_class(factory, recorded)
        if concurrent or bool(getattr(kind, "SUPPORTS_CONCURRENT_SESSIONS", default)):
            made = factory if kind is factory else _Made(factory, kind)
            server = EnvServer(made, config, models=models, name=name)
            return Hosted(server, None, recorded, spec)
        return _in_workers(factory, models, config, target, name, spec, recorded, max_workers)
    except OpenEnvGymError:
        raise
    except Exception as exc:
        raise OpenEnvGymError(f"cannot build environment {spec!r}: {exc!r}") from exc


def _in_workers(
    factory: Any,
    models: EnvModels | None,
    config: ServerConfig,
    target: dict[str, Any],
    name: str,
    spec: str,
    recorded: OpenEnvApp | None,
    max_workers: int,
) -> Hosted:
    pool = WorkerPool(target, max_workers)
    probe = pool.start()
    try:
        env_cls = worker_environment(pool, probe, name)
        server = EnvServer(
            env_cls,
            replace(config, max_sessions=min(config.max_sessions, max_workers)),
            models=models or resolve_models(factory),
            name=name,
            build_in_thread=False,  # a handle: its worker builds the instance, not the loop
        )
    except BaseException:
        pool.close()
        raise
    logger.warning(
        "%s is not marked SUPPORTS_CONCURRENT_SESSIONS: each session gets a worker process "
        "of its own (up to %d; --concurrent hosts them all in this process)",
        spec,
        max_workers,
    )
    return Hosted(server, pool, recorded, spec)


def _made_class(factory: Any, recorded: OpenEnvApp | None) -> Any:
    """The class ``factory`` makes (one instance made, and closed, if it must be)."""
    kind = recorded.env_class if recorded is not None else None
    if kind is None and isinstance(factory, type):
        kind = factory
    if kind is None:  # a factory function: what it makes tells (OpenEnv does the same)
        instance = factory()
        kind = type(instance)
        with contextlib.suppress(Exception):
            close_env(instance)
    return kind


class _Made:
    """A factory function, seen by the runtime as the class it makes.

    The runtime reads the class of what it hosts: ``reset``'s keyword arguments (the rest
    dropped, as OpenEnv does), an own ``step_async`` to await (an MCP environment's), the
    batched hooks. A factory function has none of them; this answers with the class's.
    """

    def __init__(self, make: Any, kind: type) -> None:
        self._make = make
        self._kind = kind
        self.__name__ = kind.__name__

    def __call__(self) -> Any:
        return self._make()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kind, name)
