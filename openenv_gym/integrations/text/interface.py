"""What a language model sees of an environment: :class:`TextInterface`, its tools, its text.

A :class:`TextInterface` is everything an LLM integration needs to know about one
environment:

* the **tool** TRL exposes to the model (``guess(word: str)`` for Wordle): its name, typed
  parameters, docstring, and how the tool's arguments become a Gymnasium action;
* how a **plain-text answer** becomes an action (:attr:`TextInterface.parse_action`, used by
  the lockstep rollout and the vLLM loop, where the model answers in text);
* how a **Gymnasium observation** becomes text for the model.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openenv_gym.exceptions import ConfigurationError, InvalidActionError

__all__ = [
    "NO_DEFAULT",
    "RESERVED_NAMES",
    "Param",
    "TextInterface",
    "Tool",
    "observation_to_text",
    "strip_reasoning",
    "text_answer",
]

RESERVED_NAMES = frozenset(
    {"reset", "get_reward", "reward", "done", "trajectory", "observation", "env", "interface"}
)
"""Never a tool name: TRL's hooks, and the state the TRL tool classes expose."""

NO_DEFAULT: Any = inspect.Parameter.empty


def _observation_text(obs: Any) -> str:
    # the default of TextInterface.observation_text: module-level, so interfaces pickle
    return observation_to_text(obs)


@dataclass(frozen=True)
class Param:
    """One typed parameter of a tool.

    Attributes:
        name: A Python identifier.
        annotation: ``str``, ``int``, ``float``, ``bool``, ``list``, ``dict`` or a
            ``typing.Literal`` of choices (TRL turns it into the JSON schema the model sees).
        description: One line for the docstring's ``Args:`` section.
        default: The value when the model leaves it out (default: required).
    """

    name: str
    annotation: Any
    description: str
    default: Any = NO_DEFAULT


def _check_tool(name: str, params: tuple[Param, ...]) -> None:
    if not name.isidentifier() or name.startswith("_") or name in RESERVED_NAMES:
        raise ConfigurationError(
            f"tool name {name!r} must be a Python identifier, not private, and none of "
            f"{sorted(RESERVED_NAMES)}"
        )
    names = [p.name for p in params]
    if len(set(names)) != len(names) or not all(
        n.isidentifier() and not keyword.iskeyword(n) for n in names
    ):
        raise ConfigurationError(f"tool parameters must be distinct identifiers: {names}")
    if "self" in names:
        raise ConfigurationError("a tool parameter may not be called 'self'")


def _docstring(description: str, params: tuple[Param, ...], returns: str) -> str:
    lines = [description.strip(), ""]
    if params:
        lines.append("Args:")
        lines += [f"    {p.name}: {p.description}" for p in params]
        lines.append("")
    lines += ["Returns:", f"    {returns}"]
    return "\n".join(lines)


def _signature(params: tuple[Param, ...]) -> inspect.Signature:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    listed = [inspect.Parameter("self", kind)]
    # parameters with a default go last (Python's rule); TRL passes them by name
    ordered = sorted(params, key=lambda p: p.default is not NO_DEFAULT)
    listed += [
        inspect.Parameter(p.name, kind, annotation=p.annotation, default=p.default) for p in ordered
    ]
    return inspect.Signature(listed, return_annotation=str)


@dataclass(frozen=True)
class Tool:
    """One tool a model may call: its name, typed parameters, docstring and action.

    Attributes:
        name: A Python identifier, not private, none of :data:`RESERVED_NAMES`.
        description: What the tool does (first lines of its docstring).
        params: Its parameters.
        to_action: Its arguments (by parameter name) -> Gymnasium action.
        returns: The ``Returns:`` line of its docstring.
    """

    name: str
    description: str
    params: tuple[Param, ...]
    to_action: Callable[[Mapping[str, Any]], Any]
    returns: str = "What the environment shows after the action."

    def __post_init__(self) -> None:
        _check_tool(self.name, self.params)

    def docstring(self) -> str:
        """The tool's Google-style docstring (TRL builds the tool schema from it)."""
        return _docstring(self.description, self.params, self.returns)

    def signature(self) -> inspect.Signature:
        """The tool's signature, ``self`` first."""
        return _signature(self.params)


@dataclass(frozen=True)
class TextInterface:
    """An environment as a language model sees it.

    The first five attributes describe its tool; an environment with several (an MCP
    server's) lists the others in ``more_tools``. :attr:`tools` has them all.

    Attributes:
        tool_name: Name of the tool (a Python identifier, not ``reset``/``get_reward``).
        description: What the tool does (first lines of its docstring).
        params: The tool's parameters.
        to_action: Tool arguments (by name) -> Gymnasium action.
        parse_action: A model's plain-text answer -> Gymnasium action; raises
            :class:`~openenv_gym.exceptions.InvalidActionError` (its message is shown to
            the model) when the answer holds no action.
        observation_text: Gymnasium observation -> text for the model.
        instructions: How to answer in plain text (for prompts of text loops).
        returns: The ``Returns:`` line of the tool's docstring.
        more_tools: The environment's other tools, if it has several.
    """

    tool_name: str
    description: str
    params: tuple[Param, ...]
    to_action: Callable[[Mapping[str, Any]], Any]
    parse_action: Callable[[str], Any]
    observation_text: Callable[[Any], str] = field(default=_observation_text)
    instructions: str = ""
    returns: str = "What the environment shows after the action."
    more_tools: tuple[Tool, ...] = ()

    def __post_init__(self) -> None:
        _check_tool(self.tool_name, self.params)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"tool names must be distinct: {names}")

    @property
    def tools(self) -> tuple[Tool, ...]:
        """Every tool: the first one (``tool_name``, ...), then ``more_tools``."""
        first = Tool(self.tool_name, self.description, self.params, self.to_action, self.returns)
        return (first, *self.more_tools)

    def docstring(self) -> str:
        """The (first) tool's Google-style docstring (TRL builds the tool schema from it)."""
        return _docstring(self.description, self.params, self.returns)

    def signature(self) -> inspect.Signature:
        """The (first) tool's signature, ``self`` first."""
        return _signature(self.params)


# ------------------------------------------------------------------ observation text


def observation_to_text(obs: Any) -> str:
    """Any Gymnasium observation as text: strings as they are, arrays as lists, dicts by key."""
    if isinstance(obs, str):
        return obs
    if isinstance(obs, Mapping):
        return "\n".join(f"{k}: {_value_text(v)}" for k, v in obs.items())
    return _value_text(obs)


def _value_text(value: Any) -> str:
    if isinstance(value, np.ndarray | np.generic):
        return json.dumps(value.tolist())
    if isinstance(value, str):
        return value
    if isinstance(value, tuple | list):
        return json.dumps(value, default=_jsonable)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return str(value)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)


def strip_reasoning(text: str) -> str:
    """The model's answer without its reasoning.

    What follows the last ``</think>`` (the template may have opened ``<think>`` in the
    prompt), less any ``<think>`` block left (cut off while thinking: nothing).
    """
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return _THINK.sub("", text).strip()


def text_answer(text: str) -> str:
    """A plain-text answer as a Text action: the answer less its reasoning.

    Raises:
        InvalidActionError: The answer is empty.
    """
    answer = strip_reasoning(text)
    if not answer:
        raise InvalidActionError("the answer is empty")
    return answer
