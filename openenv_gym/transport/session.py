"""One environment session, over the batched protocol or JSON ``/ws``: the single env's transport.

:func:`open_session` discovers what the server speaks (``docs/protocol.md`` section 1.2):
with ``protocol="auto"`` it tries ``/batch`` and falls back to OpenEnv's ``/ws``. Every
call of the returned :class:`Session` is one round trip on the calling thread.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from typing import Any, Literal

from openenv_gym._http import with_token
from openenv_gym.config import Timeouts, env_str
from openenv_gym.exceptions import (
    ConfigurationError,
    EnvErrorGroup,
    OpenEnvGymError,
    ResetNeededError,
    UsageError,
)
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.transport.batch_connection import BatchConnection
from openenv_gym.transport.connection import JsonSession, error_of
from openenv_gym.transport.shards import BatchShard, JsonShard, Shard, connect_shard

__all__ = ["Protocol", "Session", "open_session", "resolve_protocol", "session_of"]

logger = logging.getLogger("openenv_gym.transport")

Protocol = Literal["auto", "batch", "json"]


def resolve_protocol(protocol: str | None) -> Protocol:
    """Validate a protocol name; ``None`` reads ``OPENENV_GYM_PROTOCOL`` (default auto)."""
    value = protocol or env_str("OPENENV_GYM_PROTOCOL", "auto") or "auto"
    if value not in ("auto", "batch", "json"):
        raise ConfigurationError(f"protocol must be 'auto', 'batch' or 'json', got {value!r}")
    return value  # type: ignore[return-value]


class _BatchSlot:
    """One slot of a :class:`BatchConnection` that this session owns alone."""

    def __init__(self, conn: BatchConnection, slot: int) -> None:
        self.conn = conn
        self.slot = slot
        self._failure_raised = False
        self._rid: int | None = None  # a request a KeyboardInterrupt left unanswered

    @property
    def closed(self) -> bool:
        return self.conn.closed or self.slot not in self.conn.open_slots

    def raise_unseen_failure(self) -> None:
        """Raise, once, a connection failure no call of this session has reported yet.

        The keepalive thread notices a lost connection while the session is idle; the
        next call must report *that* (e.g. ConnectionLostError), as over JSON /ws, not a
        bare "session closed".
        """
        if not self._failure_raised:
            conn = self.conn
            ws = conn.ws
            if ws.messages or ws.failure is not None:
                # the keepalive thread read something (a close, an error): take it in.
                # Otherwise the call's own read finds whatever came since, with no extra
                # syscall here
                conn.poll()
            failure = conn.failure
            if failure is not None:
                self._failure_raised = True
                raise failure

    @property
    def pending(self) -> bool:
        """Whether a call was interrupted before its reply came (:meth:`settle` it)."""
        return self._rid is not None

    def settle(self) -> None:
        """Wait for the reply an interrupted call left pending, and drop it."""
        rid = self._rid
        if rid is not None:
            try:
                self.conn.result(rid)
            except OpenEnvGymError:
                self._failure_raised = True
                raise
            finally:
                self._rid = None

    def _one(self, op_: bp.Op, arg: Mapping[str, Any] | None = None) -> bp.BatchReplyReceived:
        try:
            rid = self._rid = self.conn.send(op_, [self.slot], None if arg is None else [arg])
            reply = self.conn.result(rid, op_)
        except OpenEnvGymError:
            self._rid = None
            self._failure_raised = True
            raise
        self._rid = None
        error = reply.errors.get(self.slot)
        if error is not None:
            raise error_of(error)
        return reply

    def _obs(self, op_: bp.Op, arg: Mapping[str, Any]) -> ObservationReceived:
        reply = self._one(op_, arg)
        reward = float(reply.rewards[0])
        obs = reply.observation(0)
        assert obs is not None
        return ObservationReceived(
            obs, None if reward != reward else reward, bool(reply.dones[0]), reply.meta(0)
        )

    def reset(self, **kwargs: Any) -> ObservationReceived:
        return self._obs(bp.Op.RESET, kwargs)

    def step(self, action: Mapping[str, Any]) -> ObservationReceived:
        return self._obs(bp.Op.STEP, action)

    def state(self) -> dict[str, Any]:
        state = self._one(bp.Op.STATE).observation(0)
        assert state is not None
        return state

    def close(self) -> None:
        self.conn.close()

    def abort(self) -> None:
        self.conn.abort()


def _connect(
    base_url: str, protocol: Protocol, timeouts: Timeouts, headers: Mapping[str, str] | None
) -> JsonSession | _BatchSlot:
    """Discover the protocol and open one session: the vector env's path, for one env."""
    try:
        shard = connect_shard(base_url, [0], protocol, timeouts, headers)
    except EnvErrorGroup as group:  # one session: raise its own error, cause kept
        raise group.errors[0]  # noqa: B904 - ``from`` would replace its own __cause__
    return _impl_of(shard)


def _impl_of(shard: Shard) -> JsonSession | _BatchSlot:
    if isinstance(shard, BatchShard):
        return _BatchSlot(shard.conn, 0)
    assert isinstance(shard, JsonShard)
    return shard.sessions[0]


def session_of(shard: Shard) -> Session:
    """The :class:`Session` of the first sub-env of ``shard`` (sharing its connection).

    The single env drives its shard through it: one blocking call per request.
    """
    return Session(_impl_of(shard), shard.url)


class Session:
    """A blocking handle on one environment session. Create with :func:`open_session`.

    Every method raises :mod:`openenv_gym.exceptions` errors only. After a timeout, a
    lost connection or a session-ending server error, the session is closed and further
    calls raise :class:`UsageError`.
    """

    def __init__(self, impl: JsonSession | _BatchSlot, base_url: str) -> None:
        self._impl = impl
        self.base_url = base_url
        self.protocol: Protocol = "json" if isinstance(impl, JsonSession) else "batch"
        # dropped without close(): drop the socket (the server frees the session), never
        # blocking the garbage collector on a closing handshake
        self._finalizer = weakref.finalize(self, impl.abort)

    @property
    def closed(self) -> bool:
        """Whether the session is over."""
        return self._impl.closed

    @property
    def timeouts(self) -> Timeouts:
        """The timeouts of this session's calls."""
        impl = self._impl
        return impl.timeouts if isinstance(impl, JsonSession) else impl.conn.timeouts

    @timeouts.setter
    def timeouts(self, value: Timeouts) -> None:
        impl = self._impl
        if isinstance(impl, JsonSession):
            impl.timeouts = value
        else:
            impl.conn.timeouts = value

    def _check(self) -> None:
        if isinstance(self._impl, _BatchSlot):
            self._impl.raise_unseen_failure()
        if self._impl.closed:
            raise UsageError(f"the session with {self.base_url} is closed")

    def reset(self, **kwargs: Any) -> ObservationReceived:
        """Start an episode (``seed``, ``episode_id`` and env-specific kwargs).

        After a call interrupted while it waited (``KeyboardInterrupt``), the reply it
        left pending is awaited and dropped first.

        Returns:
            The reply: ``observation`` (dict), ``reward`` (float or None), ``done``,
            ``metadata`` (dict or None).
        """
        self._check()
        self._impl.settle()
        return self._impl.reset(**kwargs)

    def step(self, action: Mapping[str, Any]) -> ObservationReceived:
        """Apply one action, given as the fields of the env's action model.

        Raises:
            ResetNeededError: The last call was interrupted before its reply came: the
                episode went on without the caller (call :meth:`reset`).
        """
        self._check()
        if self._impl.pending:
            raise ResetNeededError(
                "the last call was interrupted before its reply came, so the episode went "
                "on without you: call reset()"
            )
        return self._impl.step(action)

    def state(self) -> dict[str, Any]:
        """Read the environment's state (after any interrupted call's reply)."""
        self._check()
        self._impl.settle()
        return self._impl.state()

    def close(self) -> None:
        """Close the session. Idempotent."""
        self._finalizer.detach()
        self._impl.close()


def open_session(
    base_url: str,
    *,
    protocol: str | None = None,
    timeouts: Timeouts | None = None,
    headers: Mapping[str, str] | None = None,
    token: str | None = None,
) -> Session:
    """Open one environment session on an OpenEnv or openenv-gym server.

    Args:
        base_url: ``http(s)://`` or ``ws(s)://`` URL of the server (a path prefix is kept).
        protocol: ``"auto"`` (batched if offered, else JSON), ``"batch"`` or ``"json"``.
        timeouts: Connect / step / close timeouts (default: :meth:`Timeouts.from_env`).
        headers: Extra HTTP headers for the upgrade.
        token: Sent as ``Authorization: Bearer <token>`` (default: ``OPENENV_GYM_TOKEN``,
            unless ``headers`` carry an ``Authorization``).

    Raises:
        AuthenticationError: The server wants a token and ours is missing or wrong.
        ConnectError: The server is unreachable (or, with ``protocol="batch"``, does not
            speak the batched protocol).
        ServerError: The server refused the session (e.g. :class:`CapacityError`).
    """
    chosen = resolve_protocol(protocol)
    sent = with_token(headers, token)
    return Session(_connect(base_url, chosen, timeouts or Timeouts.from_env(), sent), base_url)
