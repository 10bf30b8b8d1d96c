"""Fixtures of tests/transport: the servers of tests/runtime (see openenv_gym_test_envs)."""

import sys
from pathlib import Path

# The test environments and server harnesses live beside the server tests; subprocess
# servers import them from there too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from openenv_gym_test_envs import (
    _fresh_lifecycle,
    cli_server,
    env_server,
    ping_server,
    ws_server,
)

__all__ = ["_fresh_lifecycle", "cli_server", "env_server", "ping_server", "ws_server"]
