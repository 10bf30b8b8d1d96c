"""Catch in the layout of upstream's ``openspiel_env`` (its models, its app factory).

Test fixture, not a test module. The game is written here in plain Python (OpenSpiel's
``catch``: a 10x5 board, the ball falls one row per step, the paddle moves left, stays or
moves right; +1 when it catches the ball, -1 when not). Unlike upstream's, ``reset``'s
seed picks the ball's column, so that a native server and ours play the same game.
"""

from .models import OpenSpielAction, OpenSpielObservation, OpenSpielState

__all__ = ["OpenSpielAction", "OpenSpielObservation", "OpenSpielState"]
