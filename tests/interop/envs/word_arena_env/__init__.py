"""Wordle in the layout of upstream's ``textarena_env`` (a growing one-message transcript).

Test fixture, not a test module. Unlike upstream's (TextArena draws the secret from the
global ``random``), ``reset``'s seed picks the secret, so that a native server and ours
play the same game.
"""

from .models import TextArenaAction, TextArenaMessage, TextArenaObservation, TextArenaState

__all__ = ["TextArenaAction", "TextArenaMessage", "TextArenaObservation", "TextArenaState"]
