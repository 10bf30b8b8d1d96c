"""Echo: OpenEnv's classic ``echo_env``, the trivial environment used by benchmarks."""

from openenv_gym_servers.echo.environment import EchoEnvironment
from openenv_gym_servers.echo.models import EchoAction, EchoObservation

__all__ = ["EchoAction", "EchoEnvironment", "EchoObservation"]
