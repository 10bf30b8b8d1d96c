"""The spiel app, built as upstream's openspiel_env builds its own."""

import os

try:
    from openenv.core.env_server.http_server import create_app

    from ..models import OpenSpielAction, OpenSpielObservation
    from .spiel_environment import SpielEnvironment
except ImportError:
    from models import OpenSpielAction, OpenSpielObservation
    from openenv.core.env_server.http_server import create_app
    from server.spiel_environment import SpielEnvironment

game_name = os.getenv("OPENSPIEL_GAME", "catch")
agent_player = int(os.getenv("OPENSPIEL_AGENT_PLAYER", "0"))
opponent_policy = os.getenv("OPENSPIEL_OPPONENT_POLICY", "random")
max_concurrent = int(os.getenv("MAX_CONCURRENT_ENVS", "8"))


def create_spiel_environment():
    """A new environment per session, configured from the environment variables."""
    return SpielEnvironment(
        game_name=game_name, agent_player=agent_player, opponent_policy=opponent_policy
    )


app = create_app(
    create_spiel_environment,
    OpenSpielAction,
    OpenSpielObservation,
    env_name="spiel_env",
    max_concurrent_envs=max_concurrent,
)
