"""The tool QA app, as upstream's finqa_env builds its own.

Its action model subclasses ``CallToolAction`` (accepting ``arguments`` as a JSON string
too), so OpenEnv's server validates every step as that model: a ``list_tools`` step is
refused, and the tools are listed over MCP only.
"""

import json
import os
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from pydantic import field_validator

from .tool_qa_environment import ToolQAEnvironment

MAX_STEPS = int(os.environ.get("TOOL_QA_MAX_STEPS", "10"))


def _env_factory():
    """A new environment per session."""
    return ToolQAEnvironment(max_steps=MAX_STEPS)


class ToolQACallToolAction(CallToolAction):
    """CallToolAction that also takes its arguments as a JSON string."""

    @field_validator("arguments", mode="before")
    @classmethod
    def parse_arguments(cls, v: Any) -> dict[str, Any]:
        if isinstance(v, str):
            return json.loads(v)
        return v


app = create_app(_env_factory, ToolQACallToolAction, CallToolObservation, env_name="tool_qa_env")
