"""The echo tool app, built as upstream's echo_env builds its own."""

import os

try:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

    from .echo_environment import EchoToolEnvironment
except ImportError:
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from server.echo_environment import EchoToolEnvironment

max_concurrent = int(os.getenv("MAX_CONCURRENT_ENVS", "8"))

app = create_app(
    EchoToolEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="echo_tool_env",
    max_concurrent_envs=max_concurrent,
)
