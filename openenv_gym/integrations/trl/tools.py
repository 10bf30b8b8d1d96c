"""TRL's ``environment_factory``: one env per instance, offered to the model as tools.

:func:`environment_factory` makes an :class:`EnvironmentFactory`, the picklable
zero-argument factory ``GRPOTrainer(environment_factory=...)`` calls once per rollout
slot. Each call returns an instance of a class generated for the env id (a subclass of
:class:`OpenEnvToolEnv`): its tools (one per action kind: Wordle ``guess(word)``, an MCP
server's own tools...), ``reset(**row)`` and ``get_reward()``, over a session of its own.

The servers the instances talk to are started once per process and shared
(``_Runtime``; each instance sees its server through a ``_SharedServer`` provider, which
restarts a lost server once for all of them). :func:`env_reward` lives in
:mod:`openenv_gym.integrations.trl.rollout`.
"""

from __future__ import annotations

import inspect
import itertools
import re
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import gymnasium
import numpy as np

from openenv_gym.assemble import assemble
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ConfigurationError,
    EpisodeOverError,
    InvalidActionError,
    TransportError,
    UsageError,
)
from openenv_gym.integrations.lockstep import Turn, step_text
from openenv_gym.integrations.text import TextInterface, Tool, action_check, text_interface
from openenv_gym.integrations.trl._ids import env_spec
from openenv_gym.options import ENV_OPTIONS, recipe
from openenv_gym.providers import DockerProvider, LocalProvider, Provider, RayProvider

__all__ = ["EnvironmentFactory", "OpenEnvToolEnv", "environment_factory"]

_OUR_ENTRY_POINT = "openenv_gym.env:OpenEnvEnv"


def _class_name(env_id: str) -> str:
    base = env_id.split(":")[-1].split("/")[-1]
    base = re.sub(r"-v\d+$", "", base)
    words = re.findall(r"[A-Za-z0-9]+", base) or ["Tool"]
    name = "".join(w[:1].upper() + w[1:] for w in words)
    return f"{name}Env" if name[0].isalpha() else f"Env{name}"


def _seed(value: Any, column: str) -> int | None:
    if value is None:
        return None
    problem = ConfigurationError(f"the {column!r} column must hold integers, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | np.integer | str):
        raise problem
    try:
        return int(value)
    except ValueError:
        raise problem from None


def _prompt_has_text(prompt: Any) -> bool:
    if isinstance(prompt, str):
        return bool(prompt.strip())
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        content = prompt[-1].get("content")
        return isinstance(content, str) and bool(content.strip())
    return False


# ------------------------------------------------------------------ environment_factory


class OpenEnvToolEnv:
    """Base of the classes :func:`environment_factory` builds: one env as TRL tools.

    Public methods are exactly ``reset``, ``get_reward`` and the generated tool (TRL offers
    every other public function to the model); state is read through properties.
    """

    interface: ClassVar[TextInterface]
    """How the env maps to a tool (set on each generated class)."""

    def __init__(self, factory: EnvironmentFactory, runtime: _Runtime, env: Any) -> None:
        self._factory = factory
        self._runtime = runtime
        self._env = env
        self._finalizer = weakref.finalize(self, env.close)
        self._return = 0.0
        self._started = False
        self._done = False
        self._trajectory: list[Turn] = []
        self._text = ""

    def reset(self, **kwargs: Any) -> str:
        """Start an episode; TRL passes the dataset row (its seed column picks the task).

        Returns:
            The first observation as text (appended to the row's prompt by TRL).
        """
        column = self._factory.seed_column
        seed = _seed(kwargs.get(column), column) if column else None
        if column and column not in kwargs and not self._runtime.warned:
            self._runtime.warned = True
            warnings.warn(
                f"the dataset has no {column!r} column: every rollout draws its own task, so "
                "the rollouts of a GRPO group are not comparable (add the column, or pass "
                "seed_column=None to silence this)",
                UserWarning,
                stacklevel=2,
            )
        if self._session_lost():  # a timeout closed it during the last episode
            self._replace_env()
        try:
            obs, _ = self._env.reset(seed=seed)
        except TransportError:  # the connection died unseen (server restart): one new one
            self._replace_env()
            obs, _ = self._env.reset(seed=seed)
        self._return, self._started, self._done = 0.0, True, False
        self._trajectory = []
        self._text = self.interface.observation_text(obs)
        return f"\n\n{self._text}" if _prompt_has_text(kwargs.get("prompt")) else self._text

    def get_reward(self) -> float:
        """The return of the current (or last) episode: the sum of its rewards."""
        return self._return

    # --------------------------------------------------------------- state, read-only
    @property
    def reward(self) -> float:
        """The episode return so far (as :meth:`get_reward`)."""
        return self._return

    @property
    def done(self) -> bool:
        """The episode has ended (terminated or truncated)."""
        return self._done

    @property
    def trajectory(self) -> list[Turn]:
        """Every tool call of the episode: the action, what the model saw, reward, ends."""
        return list(self._trajectory)

    @property
    def observation(self) -> str:
        """The latest observation as text."""
        return self._text

    @property
    def env(self) -> Any:
        """The underlying ``gymnasium.Env``."""
        return self._env

    # --------------------------------------------------------------- private
    def _act(self, tool: Tool, arguments: dict[str, Any]) -> str:
        if not self._started:
            raise UsageError("no episode is running: TRL calls reset() before any tool")
        if self._done:
            raise EpisodeOverError(
                "The episode is over: no more tool calls are accepted. Give your final answer."
            )
        action = tool.to_action(arguments)
        if not action_check(self._env)(action):
            raise InvalidActionError(f"{action!r} is not a valid action ({self._env.action_space})")
        obs, reward, terminated, truncated, info = self._env.step(action)
        reward, terminated, truncated = float(reward), bool(terminated), bool(truncated)
        self._return += reward
        self._done = terminated or truncated
        self._text = step_text(self.interface, obs, terminated, truncated, info)
        self._trajectory.append(Turn(self._text, reward, terminated, truncated, action, info))
        return self._text

    def _session_lost(self) -> bool:
        unwrapped = self._env.unwrapped
        if not isinstance(unwrapped, OpenEnvEnv):
            return False
        try:
            return unwrapped.session.closed
        except UsageError:  # the env itself was closed
            return True

    def _replace_env(self) -> None:
        self._finalizer()
        if self._runtime.closed:
            raise UsageError("the factory was closed: call it again for a new instance")
        self._env = self._factory._make_env(self._runtime)
        self._finalizer = weakref.finalize(self, self._env.close)

    def _close(self) -> None:
        """Close the session (also done when the instance is collected, or at exit)."""
        self._finalizer()


def _tool_method(spec: Tool) -> Callable[..., str]:
    signature = spec.signature()
    name = spec.name
    # TRL calls a tool with every argument by keyword: then binding is a key comparison
    everything = frozenset(p.name for p in spec.params)

    def tool(self: OpenEnvToolEnv, *args: Any, **kwargs: Any) -> str:
        if not args and kwargs.keys() == everything:
            return self._act(spec, kwargs)
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise InvalidActionError(f"{name}(): {exc}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        del arguments["self"]
        return self._act(spec, arguments)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = spec.docstring()
    tool.__annotations__ = {p.name: p.annotation for p in spec.params} | {"return": str}
    setattr(tool, "__signature__", signature)  # noqa: B010 - what inspect.signature reads
    return tool


class _Runtime:
    """What a factory holds in one process: the shared servers, the class, live instances."""

    def __init__(self) -> None:
        self.started = False
        self.closed = False
        self.warned = False
        self.provider: Provider | None = None
        self.urls: list[str] = []  # the shared servers' (none: every env finds its own)
        self.turns = itertools.count()  # instances take the shared servers in turn
        self.restart_lock = threading.Lock()
        self.make_kwargs: dict[str, Any] = {}
        self.cls: type[OpenEnvToolEnv] | None = None
        self.instances: weakref.WeakSet[OpenEnvToolEnv] = weakref.WeakSet()

    def env_kwargs(self) -> dict[str, Any]:
        """``gymnasium.make`` arguments of the next env: the next shared server."""
        if self.provider is None or not self.urls:
            return self.make_kwargs
        k = next(self.turns) % len(self.urls)
        restart = self.make_kwargs.get("on_server_loss") == "restart"
        return {**self.make_kwargs, "provider": _SharedServer(self, k, revive=restart)}

    def restart(self, k: int, seen: str) -> str:
        """Start shared server ``k`` again unless someone did since ``seen`` was its URL."""
        assert self.provider is not None
        with self.restart_lock:
            if self.closed:
                raise UsageError("the factory was closed: call it again for a new instance")
            if self.urls[k] == seen:
                self.urls[k] = self.provider.restart(k)
            return self.urls[k]


class _SharedServer(Provider):
    """One env's view of shared server ``k``: its URL and token, restarted once for all.

    Closing it leaves the server running (the factory owns it). An env that lost the
    server (``on_server_loss="restart"``) restarts it through here; the other envs on it
    then find the new URL instead of restarting it again.
    """

    def __init__(self, runtime: _Runtime, k: int, *, revive: bool) -> None:
        self._runtime = runtime
        self._k = k
        self._revive = revive
        self._url = runtime.urls[k]

    def __deepcopy__(self, memo: dict[int, Any]) -> _SharedServer:
        return self  # a handle on the factory's servers (gymnasium copies env specs)

    def __repr__(self) -> str:
        return f"<shared server {self._k} of an environment_factory: {self._url}>"

    def start(self) -> list[str]:
        if self._revive and not self.alive(0):  # a new env on a server that was lost
            self._url = self._runtime.restart(self._k, self._url)
        return [self._url]

    def close(self) -> None:
        """Nothing: the factory stops its servers."""

    def token(self, index: int) -> str | None:
        assert self._runtime.provider is not None
        return self._runtime.provider.token(self._k)

    def alive(self, index: int) -> bool:
        provider = self._runtime.provider
        if provider is None or self._runtime.urls[self._k] != self._url:
            return False  # closed, or restarted since this env got its URL
        return provider.alive(self._k)

    def restart(self, index: int) -> str:
        self._url = self._runtime.restart(self._k, self._url)
        return self._url


_SHARED_PROVIDERS: dict[str | None, type[Provider]] = {
    None: LocalProvider,
    "local": LocalProvider,
    "docker": DockerProvider,
    "ray": RayProvider,
}
"""The providers whose servers a factory starts once and shares, and their classes."""


_SERVER_OPTIONS = ("codec", "action_fields", "observation_fields", "server")
"""The env's options that decide the shared servers (the rest are each instance's)."""


def _provider_options(kind: str | None, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Move the provider's own arguments out of ``kwargs`` (``num_servers=``, ``pool=``...).

    The rest are the env's. ``token=`` stays the env's (as in ``gymnasium.make``): the
    servers a factory starts get their own.
    """
    names = set(inspect.signature(_SHARED_PROVIDERS[kind]).parameters)
    names = (names | {"num_servers"}) - {"server", "token", "num_containers"}
    return {key: kwargs.pop(key) for key in list(kwargs) if key in names}


def _check_env_kwargs(kwargs: dict[str, Any], provider: str | None) -> None:
    """Refuse what neither the env, ``gymnasium.make`` nor the provider takes.

    Raises:
        ConfigurationError: Unknown argument(s).
    """
    known = {"env"} | ENV_OPTIONS | set(inspect.signature(gymnasium.make).parameters)
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ConfigurationError(
            f"unexpected argument(s) {', '.join(unknown)}: neither the env's nor the "
            f"{provider or 'local'} provider's"
        )


class EnvironmentFactory:
    """A picklable zero-argument factory for ``GRPOTrainer(environment_factory=...)``.

    Made by :func:`environment_factory`. Calling it returns a new instance of a generated
    :class:`OpenEnvToolEnv` subclass with its own session.
    """

    def __init__(
        self,
        env_id: str,
        *,
        seed_column: str | None = "seed",
        tool_name: str | None = None,
        interface: TextInterface | None = None,
        share_server: bool = True,
        make_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.env_id = env_id
        self.seed_column = seed_column
        self.tool_name = tool_name
        self.interface = interface
        self.share_server = share_server
        self.make_kwargs = dict(make_kwargs or {})
        self._spec = env_spec(env_id)
        self._lock = threading.Lock()
        self._runtime = _Runtime()

    # pickling carries the recipe only: each process starts its own server and sessions
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_lock", "_runtime"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._runtime = _Runtime()

    def __call__(self) -> OpenEnvToolEnv:
        """A new instance with its own session (the first call starts the shared servers)."""
        with self._lock:
            runtime = self._runtime
            if not runtime.started:
                self._start_server(runtime)
            env = self._make_env(runtime)
            try:
                if runtime.cls is None:
                    runtime.cls = self._build_class(env)
                instance = runtime.cls(self, runtime, env)
            except BaseException:
                env.close()
                raise
            runtime.instances.add(instance)
            return instance

    @property
    def env_class(self) -> type[OpenEnvToolEnv] | None:
        """The generated class (None until the factory is first called in this process)."""
        return self._runtime.cls

    @property
    def base_url(self) -> str | None:
        """The (first) shared server's URL (None until started, or when not sharing one)."""
        urls = self._runtime.urls
        return urls[0] if urls else None

    @property
    def base_urls(self) -> list[str]:
        """Every shared server's URL, in the order instances take them (empty: none)."""
        return list(self._runtime.urls)

    @property
    def provider(self) -> Provider | None:
        """The shared servers' provider in this process (None until started, or unshared).

        A :class:`~openenv_gym.providers.RayProvider` lists its actors, nodes and pids.
        """
        return self._runtime.provider

    def close(self) -> None:
        """Close every instance made in this process and stop the shared server. Idempotent.

        Instances are also closed when collected and at exit; this is for tests and loops.
        """
        with self._lock:
            runtime, self._runtime = self._runtime, _Runtime()
        with runtime.restart_lock:  # a restart in flight ends first; later ones see closed
            runtime.closed = True
        for instance in list(runtime.instances):
            instance._close()
        if runtime.provider is not None:
            runtime.provider.close()

    def __repr__(self) -> str:
        return f"EnvironmentFactory({self.env_id!r}, seed_column={self.seed_column!r})"

    # ------------------------------------------------------------------ private
    def _ours(self) -> bool:
        return self._spec.entry_point == _OUR_ENTRY_POINT

    def _start_server(self, runtime: _Runtime) -> None:
        """Start the servers the instances share (our env ids, no base_url=)."""
        kwargs = dict(self.make_kwargs)
        if self._ours():
            # one session making one call at a time: nothing to batch, and OpenEnv's JSON
            # protocol costs less per call (benchmarks/README.md, "tool")
            kwargs.setdefault("protocol", "json")
        provider = kwargs.get("provider")
        sharing = self.share_server and self._ours() and kwargs.get("base_url") is None
        if sharing and isinstance(provider, str | None) and provider in _SHARED_PROVIDERS:
            self._share_server(runtime, kwargs)
        runtime.make_kwargs = kwargs
        runtime.started = True

    def _share_server(self, runtime: _Runtime, kwargs: dict[str, Any]) -> None:
        """Start the provider's servers once; ``kwargs`` keeps the env's arguments only."""
        provider = kwargs.pop("provider", None)
        options = _provider_options(provider, kwargs)
        _check_env_kwargs(kwargs, provider)  # before any server starts
        spec_kwargs = {**(self._spec.kwargs or {}), **kwargs}
        chosen = {k: spec_kwargs.get(k) for k in _SERVER_OPTIONS}
        made = recipe(
            str(spec_kwargs.get("env", "wordle")),
            {**chosen, "provider": provider},
            provider_options=options,
        )
        started = assemble(made)  # servers only: each instance connects on its own
        runtime.provider = started.provider
        runtime.urls = started.urls
        kwargs.pop("server", None)

    def _make_env(self, runtime: _Runtime) -> Any:
        try:
            return gymnasium.make(self.env_id, **runtime.env_kwargs())
        except TypeError as exc:  # gymnasium's word for an unknown keyword argument
            raise ConfigurationError(f"cannot make {self.env_id!r}: {exc}") from exc

    def _build_class(self, env: Any) -> type[OpenEnvToolEnv]:
        interface = self.interface or text_interface(env, tool_name=self.tool_name)
        tools = interface.tools
        for tool in tools:
            if hasattr(OpenEnvToolEnv, tool.name):
                raise ConfigurationError(f"tool name {tool.name!r} is taken: choose another")
        name = _class_name(self.env_id)
        listed = ", ".join(f"``{t.name}``" for t in tools)
        namespace: dict[str, Any] = {
            "interface": interface,
            **{tool.name: _tool_method(tool) for tool in tools},
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": f"``{self.env_id}`` as TRL tools: {listed}.",
        }
        return type(name, (OpenEnvToolEnv,), namespace)


def environment_factory(
    env_id: str,
    *,
    seed_column: str | None = "seed",
    tool_name: str | None = None,
    interface: TextInterface | None = None,
    share_server: bool = True,
    **make_kwargs: Any,
) -> EnvironmentFactory:
    """A factory for ``GRPOTrainer(environment_factory=...)`` from any Gymnasium env id.

    Args:
        env_id: ``"openenv/Wordle-v0"``, ``"openenv/Generic-v0"`` (with ``base_url=``), or
            any registered Gymnasium id with Text / Discrete / Dict actions.
        seed_column: The dataset column whose value seeds ``reset`` (rows of one GRPO
            group share it, so its G rollouts play the same task); None: never seed.
        tool_name: Rename the tool (default: the env's own, e.g. ``guess``).
        interface: Your own :class:`~openenv_gym.integrations.text.TextInterface`
            (module-level functions keep the factory picklable).
        share_server: With our env ids and no ``base_url=``: start the servers once
            per process for all instances, each with its own session (``provider=``
            ``"local"``, ``"docker"`` or ``"ray"``; ``num_servers=K`` servers, which the
            instances take in turn; ``provider="ray", pool=NAME`` attaches to a named
            pool and leaves it running). False: every instance starts its own.
        **make_kwargs: Passed to ``gymnasium.make`` (``base_url=``, ``provider=``,
            ``max_episode_steps=``, ``timeouts=``, ...), but the provider's own
            arguments go to the shared servers' provider (``num_servers=``; Ray's
            ``placement=``, ``num_cpus=``, ``resources=``, ``runtime_env=``,
            ``ray_address=``, ``server_options=``, ``pool=``...; ``docs/scale-out.md``).
            ``protocol`` defaults to ``"json"`` here: each instance makes one call at a
            time, which OpenEnv's JSON protocol serves with less overhead than the
            batched one.

    Raises:
        ConfigurationError: Unknown env id.
    """
    return EnvironmentFactory(
        env_id,
        seed_column=seed_column,
        tool_name=tool_name,
        interface=interface,
        share_server=share_server,
        make_kwargs=make_kwargs,
    )
