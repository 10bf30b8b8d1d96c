"""The tool QA environment: FastMCP tools, a reward on ``submit_answer``."""

import random
import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import Action, Observation

from ..models import AVAILABLE_TOOLS, ToolQAState
from . import data


class ToolQAEnvironment(MCPEnvironment):
    """Answer a question about a company's tables with four tools (not concurrent-safe)."""

    def __init__(self, max_steps: int = 10) -> None:
        mcp = FastMCP("tool_qa_env")

        @mcp.tool
        def get_descriptions(company_name: str) -> str:
            """List the tables of a company.

            Args:
                company_name: The company
            """
            return data.descriptions(company_name)

        @mcp.tool
        def get_table_info(company_name: str, table_name: str) -> str:
            """Describe one table: its columns and how many rows it has.

            Args:
                company_name: The company
                table_name: The table
            """
            return data.table_info(company_name, table_name)

        @mcp.tool
        def sql_query(company_name: str, table_name: str, query: str) -> str:
            """Rows of a table matching a filter written column=value.

            Args:
                company_name: The company
                table_name: The table
                query: The filter, column=value
            """
            return data.query(company_name, table_name, query)

        @mcp.tool
        def submit_answer(answer: str) -> str:
            """Submit the final answer.

            Args:
                answer: The answer
            """
            return f"submitted {answer}"

        super().__init__(mcp)
        self.max_steps = max_steps
        self._state = ToolQAState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        """Pick a question (by the seed)."""
        question = random.Random(seed).choice(data.QUESTIONS)
        self._state = ToolQAState(
            episode_id=episode_id or str(uuid.uuid4()),
            current_question=question["question"],
            current_company=question["company"],
            ground_truth=question["answer"],
            question_id=question["id"],
        )
        return Observation(
            done=False,
            reward=0.0,
            metadata={
                "question": question["question"],
                "company": question["company"],
                "available_tools": list(AVAILABLE_TOOLS),
            },
        )

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "use the tools"})

    def _scored(self, action: Action, obs: Observation) -> Observation:
        if isinstance(action, CallToolAction) and action.tool_name == "submit_answer":
            answer = str(action.arguments.get("answer", ""))
            reward = 1.0 if answer.strip() == self._state.ground_truth else 0.0
            return Observation(
                done=True,
                reward=reward,
                metadata={**obs.metadata, "truth": self._state.ground_truth},
            )
        if self._state.step_count >= self.max_steps:
            return Observation(
                done=True, reward=0.0, metadata={**obs.metadata, "error": "out of steps"}
            )
        return obs

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """A tool call; ``submit_answer`` ends the episode with its reward."""
        self._state.step_count += 1
        return self._scored(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        """The same, for the WebSocket handler."""
        self._state.step_count += 1
        obs = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        return self._scored(action, obs)

    @property
    def state(self) -> ToolQAState:
        """The episode's question and answer."""
        return self._state
