"""A grid walk in the older layout of upstream's ``grid_world_env``: relative imports only.

Test fixture, not a test module. Upstream runs such an env as
``uvicorn envs.grid_world_env.server.app:app`` with ``PYTHONPATH=/app``: ``server/app.py``
imports ``from ..models import ...``, so it only imports as part of its package.
"""

from .models import GridWalkAction, GridWalkObservation, MoveAction

__all__ = ["GridWalkAction", "GridWalkObservation", "MoveAction"]
