"""The environment interface the server runtime hosts, after OpenEnv's ``Environment``.

An environment class is written once and served over both wire protocols. It follows
OpenEnv's interface, so a class written against ``openenv.core.env_server.Environment``
is hosted unchanged (duck typing: only the methods below are used)::

    class MyEnv(Environment[MyAction, MyObservation, State]):
        action_type = MyAction
        observation_type = MyObservation

        def reset(self, seed=None, episode_id=None, **kwargs) -> MyObservation: ...
        def step(self, action: MyAction) -> MyObservation: ...   # obs carries done, reward
        @property
        def state(self) -> State: ...

The Pydantic base models match OpenEnv's field for field, so ``/schema`` and the wire
payloads are the same as an OpenEnv server's.

Batched hooks (optional, used by the batched protocol only; ``docs/protocol.md`` 3.9): a
class may also define ``step_batch`` and ``reset_batch`` class methods that act on many
of its instances at once; the runtime then calls them once per request instead of
``step`` / ``reset`` once per slot::

    @classmethod
    def step_batch(cls, envs: list[MyEnv], actions: list[MyAction])
        -> ObservationBatch | list[MyObservation | Exception]: ...
    @classmethod
    def reset_batch(cls, envs: list[MyEnv], kwargs: list[dict])
        -> ObservationBatch | list[MyObservation | Exception]: ...

They must do exactly what ``step`` / ``reset`` would do to each instance, and return
either one observation (or exception) per instance, or an :class:`ObservationBatch`: the
same observations by column, without building a model per instance.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Action",
    "Environment",
    "EnvironmentMetadata",
    "Observation",
    "ObservationBatch",
    "State",
    "trusted",
]


class Action(BaseModel):
    """Base of every action: unknown fields are rejected (OpenEnv: ``extra="forbid"``)."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True
    )

    metadata: dict[str, Any] = Field(default_factory=dict)


class Observation(BaseModel):
    """Base of every observation; ``done`` and ``reward`` travel beside the other fields."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True
    )

    done: bool = False
    reward: bool | int | float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class State(BaseModel):
    """Base of every state: extra fields allowed (OpenEnv: ``extra="allow"``)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    episode_id: str | None = None
    step_count: int = Field(default=0, ge=0)


class EnvironmentMetadata(BaseModel):
    """What ``GET /metadata`` returns (OpenEnv's ``EnvironmentMetadata``)."""

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class Environment(abc.ABC, Generic[ActT, ObsT, StateT]):
    """One environment instance; the server creates one per session or batched slot.

    Class attributes:
        action_type: Pydantic model of an action (validated from the wire).
        observation_type: Pydantic model of an observation (``/schema``).
        state_type: Pydantic model of the state (``/schema``).
        SUPPORTS_CONCURRENT_SESSIONS: Whether many instances may live in one process.
    """

    action_type: ClassVar[type[Action]] = Action
    observation_type: ClassVar[type[Observation]] = Observation
    state_type: ClassVar[type[State]] = State
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True

    @abc.abstractmethod
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start a new episode and return its first observation."""

    @abc.abstractmethod
    def step(self, action: ActT) -> ObsT:
        """Apply one action; the observation carries ``done`` and ``reward``."""

    @property
    @abc.abstractmethod
    def state(self) -> StateT:
        """The current state (episode id, step count, env-specific fields)."""

    def get_metadata(self) -> EnvironmentMetadata:
        """Describe the environment (served at ``GET /metadata``)."""
        name = type(self).__name__
        return EnvironmentMetadata(name=name, description=f"{name} environment")

    def close(self) -> None:
        """Release resources; called once when the session or slot closes."""


@dataclass(frozen=True, slots=True)
class ObservationBatch:
    """Observations of several instances by column: what a batched hook may return.

    Every column has one entry per instance, in the order the hook got them, and holds
    what ``model_dump()`` (python mode) gives for that field: nested models as dicts,
    lists as lists. The runtime sends them as they are.

    Attributes:
        fields: Field name -> column, for every field of the observation model but
            ``done``, ``reward`` and ``metadata``.
        rewards: Per instance: the reward (None: no reward).
        dones: Per instance: the episode-over flag.
        metadata: Key -> column when every instance has the same metadata keys, or one
            dict (or None) per instance, or None when no instance has metadata.
        errors: Position -> the exception that failed that instance (its column entries
            are ignored).
    """

    fields: dict[str, list[Any]]
    rewards: Sequence[float | None]
    dones: Sequence[bool]
    metadata: dict[str, list[Any]] | Sequence[dict[str, Any] | None] | None = None
    errors: Mapping[int, BaseException] = field(default_factory=dict)


_ModelT = TypeVar("_ModelT", bound=BaseModel)
# BaseModel's slots, set through their descriptors: what ``model_construct`` sets, minus the
# per-call attribute lookups.
_set_dict = vars(BaseModel)["__dict__"].__set__
_set_fields_set = vars(BaseModel)["__pydantic_fields_set__"].__set__
_set_extra = vars(BaseModel)["__pydantic_extra__"].__set__
_set_private = vars(BaseModel)["__pydantic_private__"].__set__


def trusted(model: type[_ModelT], values: dict[str, Any]) -> _ModelT:
    """Build ``model`` from ``values`` without validation (a lean ``model_construct``).

    The caller vouches that ``values`` holds every field of ``model``, in field order, each
    already of its field's type, and that nothing else holds a reference to ``values``: it
    becomes the instance's ``__dict__``. The result compares equal to, and dumps the same as,
    ``model(**values)``; every field counts as set.

    Only for models without private attributes, ``model_post_init`` or ``extra="allow"``,
    which ``model_construct`` would have to handle.

    Args:
        model: The model class.
        values: The field values, by field name.

    Returns:
        The new instance.
    """
    instance = object.__new__(model)
    _set_dict(instance, values)
    _set_fields_set(instance, set(values))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance
