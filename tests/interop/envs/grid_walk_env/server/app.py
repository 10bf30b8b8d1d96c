"""The grid walk app, built as upstream's older envs build theirs."""

try:
    from openenv.core.env_server import create_app
except ImportError:
    from core.env_server import create_app

from ..models import GridWalkAction, GridWalkObservation
from .grid_walk_environment import GridWalkEnvironment

app = create_app(GridWalkEnvironment, GridWalkAction, GridWalkObservation, env_name="grid_walk_env")
