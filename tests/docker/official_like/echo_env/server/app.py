"""The echo environment's app, built as OpenEnv's env folders build theirs.

Run from the env's directory: ``uvicorn server.app:app --host 0.0.0.0 --port 8000``.
"""

import os

try:  # imported as a package (``echo_env.server.app``)
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

    from .echo_environment import EchoEnvironment
except ImportError:  # ``cd /app/env && uvicorn server.app:app``
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from server.echo_environment import EchoEnvironment

app = create_app(
    EchoEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="echo_env",
    max_concurrent_envs=int(os.getenv("MAX_CONCURRENT_ENVS", "8")),
)


def main() -> None:
    """``python -m server.app``: serve on port 8000."""
    import uvicorn

    uvicorn.run(app, host="0.0.0.0", port=8000)


if __name__ == "__main__":
    main()
