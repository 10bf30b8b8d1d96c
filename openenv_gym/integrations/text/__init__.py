"""How a language model talks to an environment: tools, text actions, text observations.

A :class:`TextInterface` is everything an LLM integration needs to know about one
environment:

* the **tool** TRL exposes to the model (``guess(word: str)`` for Wordle): its name, typed
  parameters, docstring, and how the tool's arguments become a Gymnasium action;
* how a **plain-text answer** becomes an action (:attr:`TextInterface.parse_action`, used by
  the lockstep rollout and the vLLM loop, where the model answers in text);
* how a **Gymnasium observation** becomes text for the model.

:func:`text_interface` picks one for an environment: its own, when its
:class:`~openenv_gym.envs.EnvRecord` has one (Wordle, Echo, Catch), one built from the
server's action schema for
``openenv/Generic-v0``, and one built from the action space for any other Gymnasium env
(Text, Discrete, or a Dict of those). Pass your own to override it.

The modules: :mod:`~openenv_gym.integrations.text.interface` (the interface, its tools,
observation text), :mod:`~openenv_gym.integrations.text.from_space` (built from an action
space), :mod:`~openenv_gym.integrations.text.from_tools` (from an MCP server's tools) and
:mod:`~openenv_gym.integrations.text.for_env` (which one an env gets).
"""

from openenv_gym.integrations.text.for_env import action_check, text_interface
from openenv_gym.integrations.text.from_space import interface_from_space
from openenv_gym.integrations.text.from_tools import interface_from_tools
from openenv_gym.integrations.text.interface import (
    RESERVED_NAMES,
    Param,
    TextInterface,
    Tool,
    observation_to_text,
    strip_reasoning,
    text_answer,
)

__all__ = [
    "RESERVED_NAMES",
    "Param",
    "TextInterface",
    "Tool",
    "action_check",
    "interface_from_space",
    "interface_from_tools",
    "observation_to_text",
    "strip_reasoning",
    "text_answer",
    "text_interface",
]
