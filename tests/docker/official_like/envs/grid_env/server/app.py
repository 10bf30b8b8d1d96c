"""The grid world's app (relative imports: run as ``envs.grid_env.server.app``)."""

try:
    from openenv.core.env_server import create_app
except ImportError:
    from core.env_server import create_app

from ..models import GridWorldAction, GridWorldObservation
from .grid_world_environment import GridWorldEnvironment

app = create_app(
    GridWorldEnvironment, GridWorldAction, GridWorldObservation, env_name="grid_world_env"
)
