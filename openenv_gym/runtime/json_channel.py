"""One OpenEnv ``/ws`` session on the server: one environment instance for the connection's life.

The JSON protocol's server end (:class:`~openenv_gym.protocol.openenv.ServerSession`) over
one WebSocket: each request is answered as it arrives, or, when the environment's call is
a coroutine, once it is done (later frames wait their turn, as they wait while the
instance is built off the loop). ``docs/protocol.md`` section 2.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from openenv_gym.protocol import openenv as op
from openenv_gym.runtime.calls import Capacity, EnvCalls, FactoryFailed
from openenv_gym.runtime.interfaces import Socket
from openenv_gym.runtime.mcp import Attachment, close_env
from openenv_gym.runtime.settings import ServerConfig

__all__ = ["JsonChannel"]


class JsonChannel:
    """One OpenEnv ``/ws`` session: one instance for the connection's life.

    Args:
        calls: The environment class.
        capacity: The instances shared over every endpoint.
        config: The server's settings (bytes that may wait their turn, values per frame).
        socket: The WebSocket.
        borrowed: An MCP session's instance to attach to (not ours to close), or why
            attaching to one is refused.
    """

    def __init__(
        self,
        calls: EnvCalls,
        capacity: Capacity,
        config: ServerConfig,
        socket: Socket,
        borrowed: Attachment | str | None = None,
    ) -> None:
        self.calls = calls
        self.capacity = capacity
        self.max_queue_bytes = config.max_queue_bytes
        self.socket = socket
        self.session = op.ServerSession(max_values=config.max_values)
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
        if not capacity.acquire():
            self.session.send_error(
                op.ErrorCode.CAPACITY_REACHED,
                capacity.refusal(),
                active_sessions=capacity.active,
                max_sessions=capacity.limit,
            )
            self._end()
            return
        self._held = True
        if calls.builds_in_thread:
            self._task = asyncio.get_running_loop().create_task(self._build())
            return
        try:
            self.env = calls.create()
        except FactoryFailed as exc:
            self._refuse(exc)

    async def _build(self) -> None:
        """Build the instance off the loop; then answer what came meanwhile."""
        try:
            env = await self.calls.build_one(self.capacity.release)
        except FactoryFailed as exc:
            self._task = None
            self._refuse(exc)
            return
        except asyncio.CancelledError:
            self._held = False  # the build frees the slot once its instance is closed
            raise
        self._task = None
        self.env = env
        self._drain()

    def _refuse(self, exc: FactoryFailed) -> None:
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
            if self._backlog_bytes > self.max_queue_bytes:
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
            later = self.calls.answer_json(self.env, session, request)
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
        self._drain()

    def _drain(self) -> None:
        """Answer the frames that waited their turn, until one awaits again."""
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
            self.capacity.release()

    def on_close(self) -> None:
        """The connection is gone: stop its call, close the instance, free its capacity.

        An instance still being built is closed, and its slot freed, once it is built.
        """
        if self._task is not None:
            self._task.cancel()
            if self.env is None and self._borrowed is None:
                self._held = False  # being built: the build frees the slot
        self._backlog.clear()
        self._free()


@dataclass(frozen=True, slots=True)
class _InvalidText:
    """A text frame whose bytes are not UTF-8, waiting its turn."""

    data: bytes

    def __len__(self) -> int:
        return len(self.data)
