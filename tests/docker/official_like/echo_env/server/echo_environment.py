"""Echoes messages through two MCP tools, as OpenEnv's MCP echo does."""

import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Action, Observation, State


class EchoEnvironment(MCPEnvironment):
    """Tools ``echo_message(message)`` and ``echo_with_length(message)``; never done."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("echo_env")

        @mcp.tool
        def echo_message(message: str) -> str:
            """Send the message back.

            Args:
                message: What to echo.
            """
            return message

        @mcp.tool
        def echo_with_length(message: str) -> dict:
            """Send the message back with its length.

            Args:
                message: What to echo.
            """
            return {"message": message, "length": len(message)}

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=0.0, metadata={"status": "ready"})

    def _step_impl(self, action: Action, timeout_s: Any = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "call a tool"})

    def step(self, action: Action, timeout_s: Any = None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        return super().step(action, timeout_s=timeout_s, **kwargs)

    async def step_async(self, action: Action, timeout_s: Any = None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> State:
        return self._state
