"""Host an openenv-gym environment in OpenEnv's own server (its app factory).

OpenEnv's ``create_app`` accepts any class, but its WebSocket handler calls the
``reset_async`` / ``step_async`` that OpenEnv's ``Environment`` base class provides. So an
environment written against :class:`openenv_gym.runtime.environment.Environment` (ours, or
any duck-typed one) is wrapped in a thin subclass of OpenEnv's base that delegates to one
instance per session::

    from openenv.core.env_server.http_server import create_app
    from openenv_gym.runtime.openenv_app import as_openenv_environment
    from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

    app = create_app(as_openenv_environment(EchoEnvironment), EchoAction, EchoObservation)

Needs the ``openenv`` package (``pip install openenv``); nothing here imports it until
:func:`as_openenv_environment` is called.
"""

from __future__ import annotations

from typing import Any

from openenv_gym.exceptions import ConfigurationError

__all__ = ["as_openenv_environment"]


def as_openenv_environment(env_cls: type) -> type:
    """A subclass of OpenEnv's ``Environment`` delegating to a new ``env_cls()`` per session.

    Raises:
        ConfigurationError: ``openenv`` (or ``openenv-core``) is not installed.
    """
    try:
        from openenv.core.env_server.interfaces import Environment
    except ImportError as exc:
        raise ConfigurationError(
            "as_openenv_environment needs OpenEnv: pip install 'openenv-gym[openenv]'"
        ) from exc

    class Adapter(Environment):  # type: ignore[misc]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._inner = env_cls()

        def reset(
            self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
        ) -> Any:
            return self._inner.reset(seed=seed, episode_id=episode_id, **kwargs)

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return self._inner.step(action)

        @property
        def state(self) -> Any:
            return self._inner.state

        def close(self) -> None:
            close = getattr(self._inner, "close", None)
            if callable(close):
                close()

    Adapter.__name__ = Adapter.__qualname__ = f"OpenEnvAdapter[{env_cls.__name__}]"
    Adapter.__doc__ = f"{env_cls.__name__} hosted by OpenEnv's app factory."
    return Adapter
