"""Wire models of the Echo environment, field for field those of OpenEnv's classic ``echo_env``."""

from __future__ import annotations

from pydantic import Field

from openenv_gym.runtime.environment import Action, Observation

__all__ = ["EchoAction", "EchoObservation"]


class EchoAction(Action):
    """A message to echo back.

    Attributes:
        message: The text; at least one character.
    """

    message: str = Field(..., min_length=1, description="Message to echo back")


class EchoObservation(Observation):
    """The echoed message.

    Attributes:
        echoed_message: The message of the action (a greeting after a reset).
        message_length: Its length in characters (``0`` after a reset).
    """

    echoed_message: str = Field(..., description="The echoed message from the environment")
    message_length: int = Field(default=0, ge=0, description="Length of the echoed message")
