"""Our Echo served by OpenEnv's own ``create_app`` under uvicorn: an "official" OpenEnv image.

Run inside the image built from the Dockerfile next to it (``PORT``, ``MAX_SESSIONS``).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import uvicorn
from openenv.core.env_server.http_server import create_app

from openenv_gym.runtime.environment import State
from openenv_gym.runtime.openenv_app import as_openenv_environment
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

kwargs: dict[str, Any] = {"max_concurrent_envs": int(os.environ.get("MAX_SESSIONS", "64"))}
params = inspect.signature(create_app).parameters
if "state_cls" in params:
    kwargs["state_cls"] = State
if "env_name" in params:
    kwargs["env_name"] = "echo"
app = create_app(as_openenv_environment(EchoEnvironment), EchoAction, EchoObservation, **kwargs)

if __name__ == "__main__":
    uvicorn.run(app, host="0.0.0.0", port=int(os.environ.get("PORT", "8000")), log_level="warning")
