"""The grid walk server."""

from .grid_walk_environment import GridWalkEnvironment

__all__ = ["GridWalkEnvironment"]
