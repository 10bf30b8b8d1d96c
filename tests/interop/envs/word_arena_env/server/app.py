"""The word arena app, built as upstream's textarena_env builds its own."""

from __future__ import annotations

import inspect
import os

from openenv.core.env_server.http_server import create_app

try:
    from word_arena_env.models import TextArenaAction, TextArenaObservation
    from word_arena_env.server.environment import WordArenaEnvironment
    from word_arena_env.server.gradio_ui import build_word_arena_gradio_app
except ImportError:
    from models import TextArenaAction, TextArenaObservation

    from .environment import WordArenaEnvironment
    from .gradio_ui import build_word_arena_gradio_app

max_concurrent = int(os.getenv("MAX_CONCURRENT_ENVS", "8"))


def create_word_arena_environment():
    """A new environment per session (the game from the environment)."""
    return WordArenaEnvironment(env_id=os.getenv("TEXTARENA_ENV_ID", "Wordle-v0"))


_sig = inspect.signature(create_app)
if "gradio_builder" in _sig.parameters:
    app = create_app(
        create_word_arena_environment,
        TextArenaAction,
        TextArenaObservation,
        env_name="word_arena_env",
        max_concurrent_envs=max_concurrent,
        gradio_builder=build_word_arena_gradio_app,
    )
else:
    app = create_app(
        create_word_arena_environment,
        TextArenaAction,
        TextArenaObservation,
        env_name="word_arena_env",
        max_concurrent_envs=max_concurrent,
    )
