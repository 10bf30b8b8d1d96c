"""Find an environment class by name and the Pydantic models it speaks.

A name (``wordle``, ``echo``, ``catch``, or one added with
:func:`openenv_gym.register_environment`) is looked up in the
:class:`~openenv_gym.envs.EnvRecord` table; ``package.module:Class`` names any class
following OpenEnv's ``Environment`` interface, including classes written against
``openenv.core.env_server.Environment``.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Discriminator, Tag

from openenv_gym import envs
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.runtime.environment import Observation, State

__all__ = ["BUILTIN_SERVERS", "EnvModels", "load_env", "mcp_accepts", "resolve_models"]


class _Servers(Mapping[str, str]):
    """Name -> ``module:Class`` of every environment in the record table, read live."""

    def __getitem__(self, name: str) -> str:
        record = envs.environment(name) if isinstance(name, str) else None
        if record is None:
            raise KeyError(name)
        return record.server

    def __iter__(self) -> Iterator[str]:
        return iter(envs.environments())

    def __len__(self) -> int:
        return len(envs.environments())


BUILTIN_SERVERS: Mapping[str, str] = _Servers()
"""The server class of each named environment (from :mod:`openenv_gym.envs`)."""


@dataclass(frozen=True, slots=True)
class EnvModels:
    """The Pydantic models of an environment's action, observation and state.

    Attributes:
        action: The action model ``/schema`` publishes.
        observation: The observation model ``/schema`` publishes.
        state: The state model.
        accepts: What actions are validated as, when not just ``action``: for an OpenEnv
            MCP environment, ``ListToolsAction`` or ``CallToolAction`` chosen by the
            ``type`` field, anything else the class's own action (as OpenEnv's
            ``deserialize_action`` does).
    """

    action: type[BaseModel]
    observation: type[BaseModel]
    state: type[BaseModel]
    accepts: Any = None


def load_env(spec: str) -> Callable[[], Any]:
    """Import an environment class from a name in the record table or ``module:attribute``.

    Raises:
        ConfigurationError: Unknown name, missing module or attribute.
    """
    record = envs.environment(spec)
    target = spec if record is None else record.server
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        known = ", ".join(sorted(envs.environments()))
        raise ConfigurationError(
            f"unknown environment {spec!r}: use one of {known} or module:Class"
        )
    obj = envs.resolve(target, "environment", callable_only=False)
    if not callable(obj):
        raise ConfigurationError(f"{spec!r} is not a class or factory")
    return obj  # type: ignore[no-any-return]


def _hinted(func: Any, name: str) -> Any:
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        return None
    return hints.get(name)


def _model(value: Any) -> type[BaseModel] | None:
    return value if inspect.isclass(value) and issubclass(value, BaseModel) else None


def resolve_models(env_factory: Callable[[], Any]) -> EnvModels:
    """Find the Pydantic models of an environment class.

    Reads ``action_type`` / ``observation_type`` / ``state_type``, falling back to the
    type hints of ``step`` and ``state`` (classes written against OpenEnv's base).

    Raises:
        ConfigurationError: No action model can be found.
    """
    action = _model(getattr(env_factory, "action_type", None))
    step = getattr(env_factory, "step", None)
    if action is None and step is not None:
        action = _model(_hinted(step, "action"))
    if action is None:
        raise ConfigurationError(
            f"cannot tell the action model of {env_factory!r}: set `action_type` on the class "
            "or annotate step(self, action: MyAction)"
        )
    observation = _model(getattr(env_factory, "observation_type", None))
    if observation is None and step is not None:
        observation = _model(_hinted(step, "return"))
    state = _model(getattr(env_factory, "state_type", None))
    prop = getattr(env_factory, "state", None)
    if state is None and isinstance(prop, property):
        state = _model(_hinted(prop.fget, "return"))
    models = EnvModels(action, observation or Observation, state or State)
    return _mcp_models(env_factory, models) or models


def _mcp_models(env_factory: Callable[[], Any], models: EnvModels) -> EnvModels | None:
    """The models of an OpenEnv ``MCPEnvironment`` subclass, as upstream serves them.

    Upstream's MCP environments annotate ``step(action: Action)`` and are served with
    ``create_app(Env, CallToolAction, CallToolObservation)``: ``/schema`` publishes those,
    and a ``{"type": "list_tools"}`` or ``{"type": "call_tool", ...}`` action becomes its
    MCP model whatever the class's own action model is.
    """
    base = next(
        (
            kind
            for kind in getattr(env_factory, "__mro__", ())
            if kind.__name__ == "MCPEnvironment" and kind.__module__.startswith("openenv.")
        ),
        None,
    )
    if base is None:
        return None
    package = base.__module__.rsplit(".", 1)[0]
    try:
        accepts = mcp_accepts(package, models.action)
        called = importlib.import_module(package + ".mcp_types").CallToolObservation
    except (ImportError, AttributeError):
        return None
    if accepts is None:
        return None  # an action model of its own: upstream validates it as it is
    observation = models.observation
    if not issubclass(observation, called):
        observation = called
    calling = importlib.import_module(package + ".mcp_types").CallToolAction
    return EnvModels(calling, observation, models.state, accepts)


def mcp_accepts(env_server: str, own: type[BaseModel]) -> Any:
    """What actions are validated as when OpenEnv's server would route MCP actions.

    OpenEnv's ``deserialize_action`` turns a ``{"type": "list_tools"}`` or
    ``{"type": "call_tool", ...}`` action into ``ListToolsAction`` / ``CallToolAction``
    when the server's action model ``own`` is ``Action`` or one of those two; anything
    else is validated as ``own``. For any other ``own`` (a subclass of ``CallToolAction``
    included) every action is validated as ``own``: None.

    Args:
        env_server: The package of OpenEnv's server models (``openenv.core.env_server``).
        own: The action model the server was given.

    Raises:
        ImportError: ``env_server`` has no MCP models.
        AttributeError: Likewise.
    """
    types = importlib.import_module(env_server + ".mcp_types")
    listing, calling = types.ListToolsAction, types.CallToolAction
    plain = importlib.import_module(env_server + ".types").Action
    if own not in (listing, calling, plain):
        return None
    mcp = {"list_tools": listing, "call_tool": calling}

    def kind(value: Any) -> str:
        tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return tag if tag in mcp else "own"

    return Annotated[
        Annotated[listing, Tag("list_tools")]
        | Annotated[calling, Tag("call_tool")]
        | Annotated[own, Tag("own")],
        Discriminator(kind),
    ]
