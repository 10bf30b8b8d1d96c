"""An MCP echo environment in the shape of OpenEnv's ``envs/echo_env`` (written for the tests)."""
