"""The one exception hierarchy of openenv-gym.

Every error a public function of this package raises is an :class:`OpenEnvGymError`.
Third-party exceptions (``websockets``, ``OSError``, ``msgpack``, ``json``) are converted
once, at the transport or protocol boundary, with ``raise ... from exc``::

    OpenEnvGymError
    ├── ConfigurationError (ValueError)      bad argument, unknown env id, bad URL
    │   ├── ArgumentTypeError (TypeError)    an argument of the wrong type
    │   └── AppError                         an OpenEnv app module that cannot be hosted
    ├── UsageError (RuntimeError)            wrong call order, env already closed
    │   ├── EpisodeOverError                 an action after the episode ended (a TRL tool)
    │   ├── EnvClosedError                   a call on a closed env or vector env
    │   │     (gymnasium.error.ClosedEnvironmentError)
    │   ├── ResetNeededError                 step before the first reset, or after the
    │   │     (gymnasium.error.ResetNeeded)    episode ended
    │   ├── NoPendingCallError               step_wait without step_async, recv without send
    │   │     (gymnasium.error.NoAsyncCallError)
    │   └── PendingCallError                 step_async / send / reset while a step is pending
    │         (gymnasium.error.AlreadyPendingCallError)
    ├── InvalidActionError (ValueError)      action outside the action space, or
    │   │                                    rejected by the server (see ServerValidationError)
    │   └── ActionBatchError (TypeError)     a vector env's action batch of the wrong length,
    │                                        or a scalar where a batch is due
    ├── ProtocolError                        bytes on the wire do not follow the protocol
    │   ├── LocalProtocolError               we were about to send something illegal
    │   └── RemoteProtocolError              the peer sent something illegal
    ├── ServerError                          an error frame from the server (``code``)
    │   ├── InvalidJSONError                 INVALID_JSON       (session survives)
    │   ├── UnknownTypeError                 UNKNOWN_TYPE       (session survives)
    │   ├── ServerValidationError            VALIDATION_ERROR   (session survives;
    │   │                                    also an InvalidActionError)
    │   ├── ExecutionError                   EXECUTION_ERROR    (session survives)
    │   ├── CapacityError                    CAPACITY_REACHED   (session ended)
    │   ├── FactoryError                     FACTORY_ERROR      (session ended)
    │   └── SessionError                     SESSION_ERROR and our slot errors (ended)
    ├── TransportError                       the connection itself failed
    │   ├── ConnectError                     could not connect / upgrade
    │   │   └── AuthenticationError          HTTP 401: missing or wrong token
    │   ├── ConnectionLostError              the connection dropped
    │   └── RequestTimeoutError (TimeoutError)  no reply in time (fatal for the session)
    ├── WaitTimeoutError (TimeoutError,      step_wait / recv gave up waiting; the step
    │     multiprocessing.TimeoutError)      is still pending (call again)
    ├── ProviderError                        a server could not be started or stopped
    │   └── UnsupportedImageError            an image cannot be served by our runtime
    │                                        (DockerProvider(runtime="openenv-gym"))
    └── EnvErrorGroup (ExceptionGroup)       several sub-envs of a vector env failed;
                                             ``errors`` maps env index -> error

A timeout is fatal for its session: OpenEnv replies carry no request id, so a late reply
would be taken for the answer to the next request.

Where Gymnasium's vector envs raise an error of their own, ours also subclasses it (in
parentheses above), so code written against ``gymnasium.vector.AsyncVectorEnv`` catches
what :class:`~openenv_gym.vector.OpenEnvVectorEnv` raises::

    try:
        envs.step_wait(timeout=1.0)
    except multiprocessing.TimeoutError:  # our WaitTimeoutError: the step is still pending
        ...
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping, Sequence
from typing import Any, cast

import gymnasium.error

__all__ = [
    "ActionBatchError",
    "AppError",
    "ArgumentTypeError",
    "AuthenticationError",
    "CapacityError",
    "ConfigurationError",
    "ConnectError",
    "ConnectionLostError",
    "EnvClosedError",
    "EnvErrorGroup",
    "EpisodeOverError",
    "ExecutionError",
    "FactoryError",
    "InvalidActionError",
    "InvalidJSONError",
    "LocalProtocolError",
    "NoPendingCallError",
    "OpenEnvGymError",
    "PendingCallError",
    "ProtocolError",
    "ProviderError",
    "RemoteProtocolError",
    "RequestTimeoutError",
    "ResetNeededError",
    "ServerError",
    "ServerValidationError",
    "SessionError",
    "TransportError",
    "UnknownTypeError",
    "UnsupportedImageError",
    "UsageError",
    "WaitTimeoutError",
    "server_error",
]


class OpenEnvGymError(Exception):
    """Root of every exception raised by openenv-gym."""


class ConfigurationError(OpenEnvGymError, ValueError):
    """An argument, an environment variable or an env id is invalid."""


class AppError(ConfigurationError):
    """An OpenEnv app module (``--app``, ``--app-dir``) that cannot be imported or hosted."""


class ArgumentTypeError(ConfigurationError, TypeError):
    """An argument has the wrong type (also a ``TypeError``, as Python would raise)."""


class UsageError(OpenEnvGymError, RuntimeError):
    """A method was called in the wrong order, or on a closed object."""


class InvalidActionError(OpenEnvGymError, ValueError):
    """An action was rejected: outside the action space, or refused by the server."""


class EpisodeOverError(UsageError):
    """An action was taken after the episode ended (a tool called after the game is over)."""


class EnvClosedError(UsageError, gymnasium.error.ClosedEnvironmentError):
    """A call on an environment or vector environment that was closed.

    Also a ``gymnasium.error.ClosedEnvironmentError``, as ``AsyncVectorEnv`` raises.
    """


class ResetNeededError(UsageError, gymnasium.error.ResetNeeded):
    """``step`` with no episode running: before the first ``reset``, or after it ended.

    Also a ``gymnasium.error.ResetNeeded``, as Gymnasium's ``OrderEnforcing`` raises.
    """


class NoPendingCallError(UsageError, gymnasium.error.NoAsyncCallError):
    """A wait with nothing to wait for (``step_wait`` first, ``recv`` before ``send``).

    Also a ``gymnasium.error.NoAsyncCallError``, as ``AsyncVectorEnv`` raises.

    Attributes:
        name: The call that was not made first (``"step"``, ``"send"``).
    """

    def __init__(self, message: str, name: str = "step") -> None:
        UsageError.__init__(self, message)  # Gymnasium's __init__ wants ``name`` positionally
        self.name = name


class PendingCallError(UsageError, gymnasium.error.AlreadyPendingCallError):
    """``step_async``, ``send`` or ``reset`` while a step's replies are not collected.

    Also a ``gymnasium.error.AlreadyPendingCallError``, as ``AsyncVectorEnv`` raises.

    Attributes:
        name: The pending call (``"step"``: ``step_async``; ``"send"``: ``send``).
    """

    def __init__(self, message: str, name: str = "step") -> None:
        UsageError.__init__(self, message)  # Gymnasium's __init__ wants ``name`` positionally
        self.name = name


class ActionBatchError(InvalidActionError, TypeError):
    """A vector env's actions are not one per sub-environment (wrong length, or a scalar).

    A ``TypeError`` as Gymnasium's vector envs raise for ``step(0)``, and (as an
    :class:`InvalidActionError`) a ``ValueError`` as they raise for a wrong count.
    """


class ProtocolError(OpenEnvGymError):
    """Data on the wire does not follow the protocol."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol does not allow (state unchanged)."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class ServerError(OpenEnvGymError):
    """The server answered with an error frame.

    Attributes:
        code: OpenEnv's error code (``"EXECUTION_ERROR"``, ...) or one of ours.
        message: The server's message.
        details: Any other fields of the error frame (``errors``, ``max_sessions``, ...).
        session_closed: Whether the server ended the session with this error.
    """

    code: str = ""
    session_closed: bool = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
        session_closed: bool | None = None,
    ) -> None:
        if code is not None:
            self.code = code
        if session_closed is not None:
            self.session_closed = session_closed
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(f"{message} (code: {self.code})")


class InvalidJSONError(ServerError):
    """INVALID_JSON: the server could not parse our frame. The session survives."""

    code = "INVALID_JSON"


class UnknownTypeError(ServerError):
    """UNKNOWN_TYPE: the server does not know the message type. The session survives."""

    code = "UNKNOWN_TYPE"


class ServerValidationError(ServerError, InvalidActionError):
    """VALIDATION_ERROR: the server rejected the message or action. The session survives."""

    code = "VALIDATION_ERROR"


class ExecutionError(ServerError):
    """EXECUTION_ERROR: the environment raised. The session survives."""

    code = "EXECUTION_ERROR"


class CapacityError(ServerError):
    """CAPACITY_REACHED: the server holds as many sessions as it allows."""

    code = "CAPACITY_REACHED"
    session_closed = True


class FactoryError(ServerError):
    """FACTORY_ERROR: the server could not construct the environment."""

    code = "FACTORY_ERROR"
    session_closed = True


class SessionError(ServerError):
    """SESSION_ERROR (or a batched slot error): the session is gone."""

    code = "SESSION_ERROR"
    session_closed = True


_BY_CODE: dict[str, type[ServerError]] = {
    cls.code: cls
    for cls in (
        InvalidJSONError,
        UnknownTypeError,
        ServerValidationError,
        ExecutionError,
        CapacityError,
        FactoryError,
        SessionError,
    )
}


def server_error(
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    *,
    session_closed: bool | None = None,
) -> ServerError:
    """Build the :class:`ServerError` subclass that matches an error code.

    Unknown codes give a plain :class:`ServerError` carrying that code.
    """
    cls = _BY_CODE.get(code, ServerError)
    return cls(message, code=code, details=details, session_closed=session_closed)


class TransportError(OpenEnvGymError):
    """The connection to the server failed."""


class ConnectError(TransportError):
    """Could not connect to the server (refused, bad handshake, DNS, TLS)."""


class AuthenticationError(ConnectError):
    """The server refused our credentials (HTTP 401): the token is missing or wrong.

    Pass ``token=`` (or set ``OPENENV_GYM_TOKEN``) with the server's token.
    """


class ConnectionLostError(TransportError):
    """The connection dropped while a request was pending or the session was open."""


class RequestTimeoutError(TransportError, TimeoutError):
    """No reply within the timeout. The session is closed: its replies cannot be trusted."""


class WaitTimeoutError(OpenEnvGymError, TimeoutError, multiprocessing.TimeoutError):
    """``step_wait`` / ``recv`` waited ``timeout`` seconds; the step is still pending.

    Also a ``multiprocessing.TimeoutError``, as ``AsyncVectorEnv.step_wait`` raises.
    """


class ProviderError(OpenEnvGymError):
    """A server could not be started, reached, or stopped."""


class UnsupportedImageError(ProviderError):
    """An image cannot be served by openenv-gym's runtime; the message says why.

    No Python in it, a Python we have no wheels for, a command that names no app we can
    read, or an app the runtime cannot host. ``DockerProvider(runtime="auto")`` then runs
    the image's own server instead; ``runtime="openenv-gym"`` raises this.
    """


class EnvErrorGroup(OpenEnvGymError, ExceptionGroup):
    """Several sub-environments of a vector env failed in one call.

    Also an ``ExceptionGroup`` of those errors (in index order), so ``except*`` picks
    them by type (``except* InvalidActionError as group: ...``); what it hands over is
    an :class:`EnvErrorGroup` of the errors that matched, their indices and the same
    ``results``.

    Attributes:
        errors: Env index -> the exception raised for that sub-env, in index order.
        results: Env index -> ``(obs, reward, terminated, truncated, info)`` of the
            sub-envs of the same call that succeeded (their step did happen), so no
            transition is lost. Empty where the call has no per-env results.
    """

    errors: dict[int, Exception]
    results: dict[int, tuple[Any, ...]]
    _summary: str

    def __new__(
        cls,
        message: str,
        errors: Mapping[int, BaseException],
        results: Mapping[int, tuple[Any, ...]] | None = None,
    ) -> EnvErrorGroup:
        """The group, its message ending with each failure (``env i: error``)."""
        ordered = cast(dict[int, Exception], dict(sorted(errors.items())))
        lines = "; ".join(f"env {i}: {exc}" for i, exc in ordered.items())
        self = super().__new__(cls, f"{message}: {lines}", list(ordered.values()))
        self.errors = ordered
        self.results = dict(sorted((results or {}).items()))
        self._summary = message
        return self

    def __init__(
        self,
        message: str,
        errors: Mapping[int, BaseException],
        results: Mapping[int, tuple[Any, ...]] | None = None,
    ) -> None:
        super().__init__(self.message, list(self.errors.values()))

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._summary, self.errors, self.results))

    def derive(self, excs: Sequence[Exception]) -> EnvErrorGroup:  # type: ignore[override]
        """The group of ``excs`` (some of this one's errors), for ``except*`` and ``split``."""
        kept = {i: e for i, e in self.errors.items() if any(e is x for x in excs)}
        return EnvErrorGroup(self._summary, kept, self.results)

    @property
    def env_indices(self) -> list[int]:
        """Indices of the failed sub-environments, ascending."""
        return list(self.errors)
