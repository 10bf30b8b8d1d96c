"""Catch in the layout of upstream's ``openspiel_env`` (its models, its app factory).

Test fixture, not a test module. The game is written here in plain Python (OpenSpiel's
``catch``: a 10x5 board, the ball falls one row per step, the paddle moves left, stays or
moves right; +1 when it catches the ball, -1 when not). As upstream's, ``reset`` takes no
seed (the server drops it); the ball's column follows the instance's episode count, so a
native server and ours play the same games.
"""

from .models import OpenSpielAction, OpenSpielObservation, OpenSpielState

__all__ = ["OpenSpielAction", "OpenSpielObservation", "OpenSpielState"]
