"""MCP tool environments written as upstream writes them: ``MCPEnvironment`` + FastMCP tools.

Not a test module. Served by OpenEnv's own ``create_app`` with OpenEnv's
``CallToolAction`` / ``CallToolObservation`` (``python -m interop_apps mcp_echo``), as
upstream's ``envs/echo_env/server/app.py`` serves its echo:

* :class:`McpEchoEnvironment` -- the shape of upstream's echo since 2026: tools
  ``echo_message(message)`` and ``echo_with_length(message)``, reset observation with
  ``metadata={"status": "ready", "message": "Echo environment ready!"}``, ``reward`` None
  on steps, never done.
* :class:`LineWalkEnvironment` -- two tools of other argument kinds, with a reward and an
  end, as upstream's ``finqa_env`` sets them (a ``step`` / ``step_async`` override on the
  tool call): ``move(direction, steps)`` (a ``Literal`` and a bounded integer) walks a
  line towards a flag drawn from ``reset``'s seed, and ``look()`` (no argument) tells
  where the walker stands. Reaching the flag ends the episode with reward 1.0.

Both run unchanged on openenv 0.10 (FastMCP 3) and openenv-core 0.3.0 (FastMCP 4).
"""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

__all__ = [
    "ECHO_READY",
    "FLAGS",
    "ConnectionCountingEnvironment",
    "LineWalkEnvironment",
    "McpEchoEnvironment",
    "SoloConnectionCounting",
    "flag_for",
]

ECHO_READY = "Echo environment ready!"

FLAGS = (-3, -2, -1, 1, 2, 3)


def flag_for(seed: int | None) -> int:
    """Where :class:`LineWalkEnvironment` puts the flag on ``reset(seed=seed)``."""
    return random.Random(seed).choice(FLAGS)


class McpEchoEnvironment(MCPEnvironment):
    """Echoes messages through two MCP tools (upstream's echo, as served since 2026)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("echo_env")

        @mcp.tool
        def echo_message(message: str) -> str:
            """Echo back the provided message.

            Args:
                message: The message to echo back

            Returns:
                The same message that was provided
            """
            return message

        @mcp.tool
        def echo_with_length(message: str) -> dict[str, Any]:
            """Echo back the message with its length.

            Args:
                message: The message to echo back

            Returns:
                Dictionary with the message and its length
            """
            return {"message": message, "length": len(message)}

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        """A new episode: nothing but a greeting in ``metadata``."""
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        greeting = {"status": "ready", "message": ECHO_READY}
        return Observation(done=False, reward=0.0, metadata=greeting)

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "use the MCP tools"})

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Count the step, then let MCPEnvironment route the tool call."""
        self._state.step_count += 1
        return super().step(action, timeout_s=timeout_s, **kwargs)

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        """What OpenEnv's WebSocket handler calls: count, then route."""
        self._state.step_count += 1
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return self._state


class ConnectionCountingEnvironment(MCPEnvironment):
    """One tool, ``connections()``: how many times this instance's MCP client connected.

    OpenEnv's ``/ws`` enters ``mcp_session()`` once per session, so every tool call of a
    session finds the client connected (the count stays 1); a server that connects per
    call counts one more each call. Concurrent, or not (:class:`SoloConnectionCounting`,
    hosted in a worker process per session).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("connection_counting")
        counting = self
        self.connects = 0

        @mcp.tool
        def connections() -> int:
            """How many times this instance's MCP client connected, this one included."""
            return counting.connects

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    @contextlib.asynccontextmanager
    async def mcp_session(self) -> AsyncIterator[Any]:
        """Count a connection when the client was not connected, then OpenEnv's session."""
        if not self.mcp_client.is_connected():
            self.connects += 1
        async with super().mcp_session() as client:
            yield client

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        """A new episode (the count goes on: it is the instance's)."""
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=0.0)

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "use the MCP tools"})

    @property
    def state(self) -> State:
        """Episode id and step count."""
        return self._state


class SoloConnectionCounting(ConnectionCountingEnvironment):
    """:class:`ConnectionCountingEnvironment` not marked concurrent (a worker per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = False


class LineWalkState(State):
    """Base state plus the walk."""

    position: int = 0
    flag: int = 0


class LineWalkEnvironment(MCPEnvironment):
    """Walk a line to a flag with two MCP tools; reward 1.0 and done on the flag."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("line_walk")
        walk = self

        @mcp.tool
        def move(
            direction: Literal["left", "right"],
            steps: Annotated[int, Field(ge=1, le=3, description="How far to go: 1 to 3.")],
        ) -> dict[str, int]:
            """Walk along the line.

            Args:
                direction: Which way to walk.
                steps: How far to go.
            """
            walk._state.position += steps if direction == "right" else -steps
            return {"position": walk._state.position}

        @mcp.tool
        def look() -> str:
            """Tell where the walker stands and where the flag is."""
            state = walk._state
            return f"You stand at {state.position}; the flag is at {state.flag}."

        super().__init__(mcp)
        self._rng = random.Random()
        self._state = LineWalkState(episode_id=str(uuid.uuid4()))

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        """Back to 0; the flag is drawn from ``seed`` (:func:`flag_for`)."""
        if seed is not None:
            self._rng.seed(seed)
        self._state = LineWalkState(
            episode_id=episode_id or str(uuid.uuid4()), flag=self._rng.choice(FLAGS)
        )
        return Observation(done=False, reward=0.0, metadata={"goal": "reach the flag"})

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "use the MCP tools"})

    def _judge(self, action: Action, observation: Observation) -> Observation:
        self._state.step_count += 1
        if isinstance(action, CallToolAction) and action.tool_name == "move":
            reached = self._state.position == self._state.flag
            observation.reward = 1.0 if reached else 0.0
            observation.done = reached
        return observation

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Route the tool call, then reward a move that reached the flag."""
        return self._judge(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        """What OpenEnv's WebSocket handler calls (see :meth:`step`)."""
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        return self._judge(action, observation)

    @property
    def state(self) -> LineWalkState:
        """Episode id, step count, position and flag."""
        return self._state
