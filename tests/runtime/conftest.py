"""Fixtures of tests/runtime: in-process and subprocess servers (see openenv_gym_test_envs)."""

from openenv_gym_test_envs import (
    _fresh_lifecycle,
    cli_server,
    env_server,
    ping_server,
    ws_server,
)

__all__ = ["_fresh_lifecycle", "cli_server", "env_server", "ping_server", "ws_server"]
