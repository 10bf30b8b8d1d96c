"""The TextArena-style app: a factory configured from the environment, as upstream's is."""

import os

from openenv.core.env_server.http_server import create_app

try:  # the env installed as a package
    from textarena_env.models import TextArenaAction, TextArenaObservation
    from textarena_env.server.environment import TextArenaEnvironment
except ImportError:  # uvicorn run from the env's directory
    from models import TextArenaAction, TextArenaObservation

    from .environment import TextArenaEnvironment

ENV_ID = os.getenv("TEXTARENA_ENV_ID", "Wordle-v0")
MAX_TURNS = int(os.getenv("TEXTARENA_MAX_TURNS", "6"))


def create_textarena_environment() -> TextArenaEnvironment:
    """One game per session."""
    return TextArenaEnvironment(env_id=ENV_ID, max_turns=MAX_TURNS)


app = create_app(
    create_textarena_environment,
    TextArenaAction,
    TextArenaObservation,
    env_name="textarena_env",
    max_concurrent_envs=int(os.getenv("MAX_CONCURRENT_ENVS", "8")),
)
