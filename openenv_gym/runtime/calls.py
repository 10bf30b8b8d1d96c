"""Calling one environment class: instances made, actions validated, calls run, replies built.

What both WebSocket channels and the HTTP API need of the class they host, in one place
(:class:`EnvCalls`): making instances (on a thread of their own, :meth:`EnvCalls.build`),
validating actions (one pydantic call for a whole
batched request), calling ``step`` / ``reset`` per slot, through the class's batched hooks
(``step_batch`` / ``reset_batch``, ``docs/protocol.md`` section 3.9.6) or its own
coroutines (``step_async`` / ``reset_async``), and turning what it returns into the wire's
forms. An exception of the environment fails its slot alone (``EXECUTION_ERROR``). The
capacity the instances share over every endpoint is :class:`Capacity`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from openenv_gym.exceptions import LocalProtocolError
from openenv_gym.protocol import batch as bp
from openenv_gym.protocol import openenv as op
from openenv_gym.protocol.openenv.messages import MAX_ERRORS, cut, more_errors
from openenv_gym.runtime.columns import batch_table, result_table
from openenv_gym.runtime.environment import ObservationBatch
from openenv_gym.runtime.errors import (
    describe,
    execution_error,
    validation_error,
    validation_errors,
    wire_safe,
)
from openenv_gym.runtime.loader import EnvModels
from openenv_gym.runtime.mcp import close_env, hold_mcp

__all__ = [
    "BUILDER_THREADS",
    "Capacity",
    "EnvCalls",
    "EpisodeOutcome",
    "FactoryFailed",
    "no_such_slot",
    "state_result",
]

logger = logging.getLogger("openenv_gym.runtime")

EpisodeOutcome = tuple[list[Any], ObservationBatch | None, list[int]]
"""What ``step`` / ``reset`` of a request gave (:meth:`EnvCalls.run_episode_op`)."""

BUILDER_THREADS = 4
"""Threads that build instances (:meth:`EnvCalls.build`): a server builds for this many
connections at once; one request's instances are built one after another on one thread."""


class Capacity:
    """The environment instances alive at once over every endpoint, at most ``limit``.

    Args:
        limit: The server's ``max_sessions``.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.active = 0

    def acquire(self, n: int = 1) -> int:
        """Reserve up to ``n`` instances; return how many were granted."""
        granted = max(0, min(n, self.limit - self.active))
        self.active += granted
        return granted

    def release(self, n: int = 1) -> None:
        """Give back ``n`` instances."""
        self.active -= n

    def refusal(self) -> str:
        """The message of a ``CAPACITY_REACHED`` (OpenEnv's words)."""
        return (
            f"Server at capacity: {self.active}/{self.limit} sessions active. "
            "Cannot accept new connections."
        )


class FactoryFailed(Exception):
    """The environment class could not make an instance (``FACTORY_ERROR``)."""

    def __init__(self, factory: str, cause: BaseException) -> None:
        super().__init__(
            wire_safe(f"Environment factory '{factory}' failed to create instance: ")
            + describe(cause)
        )
        self.factory: str = wire_safe(factory)


def no_such_slot(slot: int) -> bp.SlotError:
    """The ``NO_SUCH_SLOT`` error of a slot that is not open."""
    return bp.SlotError(bp.SlotErrorCode.NO_SUCH_SLOT.value, f"slot {slot} is not open")


class EnvCalls:
    """How one environment class is called (see the module docstring).

    Instances are built off the event loop, on a thread of the server's builder pool
    (:data:`BUILDER_THREADS`), so a constructor that takes seconds (a corpus loaded, a
    model read) never stalls the other connections; they are then called on the event
    loop, as always. A class marked ``REQUIRES_SINGLE_THREAD_EXECUTOR`` (OpenEnv's flag for
    libraries bound to the thread that made them) is built on the event loop instead, so
    every call of every instance stays on one thread, as OpenEnv promises such a class.

    Args:
        env_factory: Zero-argument callable (usually the class) making one instance.
        models: Its action / observation / state models.
        name: The environment's name (in a ``FACTORY_ERROR``).
        build_in_thread: Build instances on the builder pool (None: unless the class
            says ``REQUIRES_SINGLE_THREAD_EXECUTOR``). False for a class whose
            constructor is cheap and must run on the loop (a worker process's handle).
    """

    def __init__(
        self,
        env_factory: Callable[[], Any],
        models: EnvModels,
        name: str,
        *,
        build_in_thread: bool | None = None,
    ) -> None:
        self.env_factory = env_factory
        self.models = models
        self.name = name
        if build_in_thread is None:
            build_in_thread = not getattr(env_factory, "REQUIRES_SINGLE_THREAD_EXECUTOR", False)
        self.builds_in_thread: bool = bool(build_in_thread)
        """Whether instances are built on the builder pool (opening one is then awaited)."""
        self._builder: concurrent.futures.ThreadPoolExecutor | None = None
        # a factory function has no reset to read: its first instance's class has
        self._reset_filter: _KwargsFilter | None = (
            _reset_kwargs_filter(env_factory) if hasattr(env_factory, "reset") else None
        )
        accepts: Any = models.accepts or models.action
        self.action: TypeAdapter[Any] = TypeAdapter(accepts)
        """Validates one action."""
        self._actions: TypeAdapter[list[Any]] = TypeAdapter(list[accepts])
        self._keys = _input_keys(accepts)
        self.awaits = {
            name: _is_async_override(env_factory, name) for name in ("step_async", "reset_async")
        }
        """Per method, whether the class's own coroutine is called (not the sync one)."""
        self._awaited_ops = frozenset(
            op_
            for op_, name in ((bp.Op.STEP, "step_async"), (bp.Op.RESET, "reset_async"))
            if self.awaits[name]
        ) | ({bp.Op.OPEN} if self.builds_in_thread else set())

    def create(self) -> Any:
        """A new instance.

        Raises:
            FactoryFailed: The factory raised.
        """
        try:
            env = self.env_factory()
        except Exception as exc:
            raise FactoryFailed(self.name, exc) from exc
        if self._reset_filter is None:
            self._reset_filter = _reset_kwargs_filter(type(env))
        return env

    def create_many(self, count: int) -> list[Any]:
        """``count`` new instances, made here: per instance, it or its :class:`FactoryFailed`."""
        made: list[Any] = []
        for _ in range(count):
            try:
                made.append(self.create())
            except FactoryFailed as exc:
                made.append(exc)
        return made

    async def build(self, count: int, release: Callable[[], None]) -> list[Any]:
        """``count`` new instances, built off the event loop (see the class docstring).

        The caller holds a slot of capacity for each. If it is cancelled meanwhile (its
        connection closed), the instances are closed once built and ``release()`` is
        called once for each: the slots stay held until then.

        Returns:
            Per instance, it or its :class:`FactoryFailed` (whose slot the caller frees).
        """
        if not self.builds_in_thread:
            return self.create_many(count)
        if self._builder is None:
            self._builder = concurrent.futures.ThreadPoolExecutor(
                BUILDER_THREADS, thread_name_prefix="openenv-gym-build"
            )
        pending = asyncio.get_running_loop().run_in_executor(self._builder, self.create_many, count)
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            pending.add_done_callback(lambda done: _abandon(done, count, release))
            raise

    async def build_one(self, release: Callable[[], None]) -> Any:
        """One new instance (:meth:`build`).

        Raises:
            FactoryFailed: The factory raised (the caller frees the slot).
        """
        (made,) = await self.build(1, release)
        if isinstance(made, FactoryFailed):
            raise made
        return made

    def close(self) -> None:
        """Stop the builder pool (builds under way finish on their thread). Idempotent."""
        builder, self._builder = self._builder, None
        if builder is not None:
            builder.shutdown(wait=False, cancel_futures=True)

    def _keep(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The ``reset`` kwargs the instances accept (all, before any instance exists)."""
        keep = self._reset_filter
        return dict(kwargs) if keep is None else keep(kwargs)

    def answer_json(
        self, env: Any, session: op.ServerSession, request: op.Request
    ) -> Coroutine[Any, Any, None] | None:
        """Answer one ``/ws`` request; a coroutine to await when the env's call is async."""
        if isinstance(request, op.CloseRequest):
            return None
        try:
            if isinstance(request, op.StateRequest):
                session.send_state(dump_state(env.state, json_mode=True))
                return None
            if isinstance(request, op.ResetRequest):
                kwargs = self._keep(request.kwargs)
                if self.awaits["reset_async"]:
                    return self._answer_json_later(session, env, lambda: env.reset_async(**kwargs))
                obs = env.reset(**kwargs)
            else:
                if self.is_wide(request.action):
                    errors = self.wide_errors(request.action)
                    session.send_error(
                        op.ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors
                    )
                    return None
                action = self.action.validate_python(request.action)
                if self.awaits["step_async"]:
                    return self._answer_json_later(session, env, lambda: env.step_async(action))
                obs = env.step(action)
            _send_json_observation(session, obs)
        except Exception as exc:
            _send_json_error(session, exc)
        return None

    @staticmethod
    async def _answer_json_later(
        session: op.ServerSession, env: Any, call: Callable[[], Awaitable[Any]]
    ) -> None:
        try:
            await hold_mcp(env)
            _send_json_observation(session, await call())
        except Exception as exc:
            _send_json_error(session, exc)

    def answer_results(
        self,
        conn: bp.BatchServer,
        request: bp.BatchRequestReceived,
        results: list[bp.SlotResult | bp.SlotError | None],
    ) -> None:
        """Answer ``open`` / ``state`` / ``close``; a result msgpack cannot carry fails alone."""
        try:
            conn.send_results(request, results)
        except LocalProtocolError:
            conn.send_results(request, [_encodable(r) for r in results])

    def answer_table(
        self,
        conn: bp.BatchServer,
        request: bp.BatchRequestReceived,
        outcome: EpisodeOutcome,
    ) -> None:
        """Answer ``reset`` / ``step``; a result msgpack cannot carry fails alone."""
        results, batch, ready = outcome
        version = conn.version
        try:
            if batch is None:
                table = result_table(results, version=version)
            else:
                table = batch_table(batch, self.models.observation, results, ready, version)
            conn.send_table(request, table)
        except Exception as exc:
            # some result cannot be encoded: fail only those (all of a batch hook's)
            if batch is not None:
                failed = execution_error(exc)
                results = [failed if r is None else r for r in results]
            checked = [_checked_result(r) for r in results]
            fixed = [
                c if isinstance(c, bp.SlotError) else r
                for r, c in zip(results, checked, strict=True)
            ]
            conn.send_table(request, result_table(fixed, version=1))

    def awaits_op(self, op_: bp.Op) -> bool:
        """Whether ``op`` is awaited (never answered inline).

        ``step`` / ``reset`` when the class has its own coroutine, ``open`` when instances
        are built off the loop.
        """
        return op_ in self._awaited_ops

    def run_episode_op(
        self, request: bp.BatchRequestReceived, slots: dict[int, Any]
    ) -> EpisodeOutcome | Coroutine[Any, Any, EpisodeOutcome]:
        """``step`` / ``reset`` for every slot of a request: the hot path.

        Actions are validated in one call for the whole request. An environment class may
        act on all its instances of the request at once (``step_batch`` / ``reset_batch``,
        see ``docs/protocol.md`` section 3.9). A class with its own ``step_async`` /
        ``reset_async`` (:meth:`awaits_op`) gets a coroutine back, which calls them for every
        slot at once (an MCP environment's tool calls run side by side).

        Returns:
            Per slot, an observation or a SlotError (None where the batch holds it); the
            batch hook's :class:`ObservationBatch`, if it gave one; and the positions of
            the slots it covers.
        """
        envs = list(map(slots.get, request.slots))
        n = len(envs)
        if None in envs:
            results: list[Any] = [
                no_such_slot(slot) if env is None else None
                for slot, env in zip(request.slots, envs, strict=True)
            ]
            live = [k for k, env in enumerate(envs) if env is not None]
        else:
            results, live = [None] * n, list(range(n))
        args = request.args
        one: Callable[[Any, Any], Any]
        if request.op is bp.Op.RESET:
            keep = self._keep
            ready, inputs = live, [keep(args[k]) for k in live]
            name, one = "reset_batch", _reset_one
        else:
            checked, valid = self.validate_actions(
                list(args) if len(live) == n else [args[k] for k in live], request.width
            )
            if valid:
                ready, inputs = live, checked
            else:
                ready, inputs = [], []
                for k, action in zip(live, checked, strict=True):
                    if action.__class__ is bp.SlotError:
                        results[k] = action
                    else:
                        ready.append(k)
                        inputs.append(action)
            name, one = "step_batch", _step_one
        if not ready:
            return results, None, ready
        run = envs if len(ready) == n else [envs[k] for k in ready]
        if request.op in self._awaited_ops:
            return _run_async(results, run, ready, inputs, request.op)
        kinds = set(map(type, run))  # a hook acts on instances of its own class only
        hook = _hook_of(kinds.pop(), name) if len(kinds) == 1 else None
        if hook is not None:
            outcome = _batched(hook, run, inputs)
            if isinstance(outcome, ObservationBatch):
                for j, exc in outcome.errors.items():
                    results[ready[j]] = execution_error(exc)
                return results, outcome, ready
            for k, result in zip(ready, outcome, strict=True):
                results[k] = result
            return results, None, ready
        for k, env, value in zip(ready, run, inputs, strict=True):
            results[k] = _guard(one, env, value)
        return results, None, ready

    def validate_actions(self, args: list[Any], width: int = 0) -> tuple[list[Any], bool]:
        """The action models of ``args`` in one validation call; a SlotError where invalid.

        A validator of the model may raise something else than a validation error: that
        slot gets ``EXECUTION_ERROR``, the others are validated as usual. ``width``: the
        most keys one of ``args`` has; when that is more than the model takes, the slots
        with too many keys are refused from their keys (:meth:`wide_errors`), unvalidated.

        Returns:
            Per entry, the model or the SlotError; and whether every entry is valid.
        """
        wide = self._keys is not None and width > len(self._keys)
        if not wide:
            try:
                return self._actions.validate_python(args), True
            except Exception:
                pass  # some are invalid: find which, one by one
        validate = self.action.validate_python
        out: list[Any] = []
        for arg in args:
            try:
                if wide and self.is_wide(arg):
                    errors = self.wide_errors(arg)
                    code = op.ErrorCode.VALIDATION_ERROR.value
                    out.append(bp.SlotError(code, "Invalid message", {"errors": errors}))
                    continue
                out.append(validate(arg))
            except ValidationError as exc:
                out.append(validation_error(exc))
            except Exception as exc:
                out.append(execution_error(exc))
        return out, False

    def is_wide(self, arg: Any) -> bool:
        """Whether ``arg`` has more keys than the action model takes (it has extra keys).

        Only for a model that forbids extra keys (OpenEnv's ``Action``); such an action is
        answered by :meth:`wide_errors`, not validated key by key.
        """
        keys = self._keys
        return keys is not None and isinstance(arg, Mapping) and len(arg) > len(keys)

    def refuse_wide(self, arg: Any) -> list[Any] | None:
        """:meth:`wide_errors` of ``arg`` if it :meth:`is_wide`, else None (validate it)."""
        return self.wide_errors(arg) if self.is_wide(arg) else None

    def wide_errors(self, arg: Mapping[str, Any]) -> list[Any]:
        """A bounded ``errors`` list for an action with too many keys, as Pydantic's begins.

        The errors of its declared fields (validated alone), then ``extra_forbidden`` for its
        first extra keys, then their count. Costs the model's fields and a few keys, however
        many ``arg`` has.
        """
        keys = self._keys
        assert keys is not None
        declared = {key: arg[key] for key in keys if key in arg}
        errors: list[Any] = []
        try:
            self.action.validate_python(declared)
        except ValidationError as exc:
            errors = [e for e in validation_errors(exc) if e["type"] != "too_many_errors"]
        extra = len(arg) - len(declared)
        count = len(errors) + extra
        extras = ((key, value) for key, value in arg.items() if key not in keys)
        errors += [
            wire_safe(
                {
                    "type": "extra_forbidden",
                    "loc": [cut(key)],
                    "msg": "Extra inputs are not permitted",
                    "input": cut(value),
                }
            )
            for key, value in itertools.islice(extras, max(0, MAX_ERRORS - len(errors)))
        ]
        if count > len(errors):
            errors.append(more_errors(count, len(errors)))
        return errors


def _input_keys(model: Any) -> frozenset[str] | None:
    """The keys an action model that forbids extra keys takes (names and aliases), or None.

    None: the model takes extra keys, is not one plain model (a union...), or names a
    field by something else than a string alias; its actions are always validated whole.
    """
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None
    if model.model_config.get("extra") != "forbid":
        return None
    keys = set()
    for name, info in model.model_fields.items():
        keys.add(name)
        for alias in (info.alias, info.validation_alias):
            if isinstance(alias, str):
                keys.add(alias)
            elif alias is not None:
                return None
    return frozenset(keys)


def _send_json_observation(session: op.ServerSession, obs: Any) -> None:
    fields, reward, done, metadata = _split_observation(obs, keep_metadata=True)
    session.send_observation(fields, reward, done, metadata)


def _send_json_error(session: op.ServerSession, exc: Exception) -> None:
    """Answer the pending request with the error ``exc`` (it never fails to encode)."""
    if isinstance(exc, ValidationError):
        errors = validation_errors(exc)
        session.send_error(op.ErrorCode.VALIDATION_ERROR, "Invalid message", errors=errors)
        return
    logger.debug("environment raised", exc_info=True)
    session.send_error(op.ErrorCode.EXECUTION_ERROR, describe(exc))


def _is_async_override(env_factory: Callable[[], Any], name: str) -> bool:
    """Whether the class has a coroutine ``name`` of its own (``step_async`` ...).

    OpenEnv's base ``Environment`` has ``step_async`` / ``reset_async`` that call the sync
    method; as OpenEnv's server does, only an override is awaited (an MCP environment's
    ``step_async`` calls its tools without a thread of its own).
    """
    method = getattr(env_factory, name, None)
    if not inspect.iscoroutinefunction(method):
        return False
    owner = next((k for k in getattr(env_factory, "__mro__", ()) if name in vars(k)), None)
    if owner is None:
        return False
    return not (owner.__name__ == "Environment" and owner.__module__.startswith("openenv."))


async def _run_async(
    results: list[Any], envs: list[Any], ready: list[int], inputs: list[Any], op_: bp.Op
) -> EpisodeOutcome:
    """``step_async`` / ``reset_async`` of every ready slot, side by side."""

    async def one(env: Any, value: Any) -> Any:
        try:
            await hold_mcp(env)
            if op_ is bp.Op.RESET:
                return await env.reset_async(**value)
            return await env.step_async(value)
        except Exception as exc:
            return execution_error(exc)

    outcomes = await asyncio.gather(
        *(one(env, value) for env, value in zip(envs, inputs, strict=True))
    )
    for k, outcome in zip(ready, outcomes, strict=True):
        results[k] = outcome
    return results, None, ready


def _abandon(done: asyncio.Future[list[Any]], count: int, release: Callable[[], None]) -> None:
    """Close what a build made for a caller that is gone; free the slots it held."""
    made = [] if done.cancelled() or done.exception() is not None else done.result()
    for env in made:
        if not isinstance(env, FactoryFailed):
            close_env(env)
    for _ in range(count):
        release()


def _step_one(env: Any, action: Any) -> Any:
    return env.step(action)


def _reset_one(env: Any, kwargs: Any) -> Any:
    return env.reset(**kwargs)


_HOOKS: dict[tuple[type, str], Callable[..., Any] | None] = {}


def _hook_of(kind: type, name: str) -> Callable[..., Any] | None:
    """The class's batched hook ``name``, if it has a callable one (looked up once)."""
    try:
        return _HOOKS[kind, name]
    except KeyError:
        hook = getattr(kind, name, None)
        found = _HOOKS[kind, name] = hook if callable(hook) else None
        return found


def _batched(
    hook: Callable[..., Any], envs: list[Any], inputs: list[Any]
) -> ObservationBatch | list[Any]:
    """``hook(envs, inputs)``: a batch, or a result per env; an exception fails its env only."""
    try:
        outcome = hook(envs, inputs)
        if isinstance(outcome, ObservationBatch):
            if len(outcome.dones) != len(envs) or len(outcome.rewards) != len(envs):
                raise ValueError(f"the batch does not hold {len(envs)} results")
            return outcome
        outcomes = list(outcome)
    except Exception as exc:
        return [execution_error(exc)] * len(envs)
    if len(outcomes) != len(envs):
        error = ValueError(f"the batched hook returned {len(outcomes)} results for {len(envs)}")
        return [execution_error(error)] * len(envs)
    return [execution_error(o) if isinstance(o, BaseException) else o for o in outcomes]


def _guard(call: Callable[[Any, Any], Any], env: Any, arg: Any) -> Any:
    """``call(env, arg)``; an exception becomes the slot's EXECUTION_ERROR."""
    try:
        return call(env, arg)
    except Exception as exc:
        return execution_error(exc)


_OBS_EXCLUDE_DONE = frozenset({"done"})
_OBS_EXCLUDE_META = frozenset({"reward", "done", "metadata"})


def _split_observation(
    obs: Any, *, keep_metadata: bool
) -> tuple[dict[str, Any], float | None, bool, dict[str, Any] | None]:
    """Observation model -> (fields, reward, done, metadata) as OpenEnv serialises it.

    ``keep_metadata=True`` is the OpenEnv ``/ws`` reply, in Pydantic's JSON mode as
    OpenEnv's ``model_dump_json`` writes it: datetime, UUID and Enum fields become strings,
    an ``int`` reward stays ``1`` (not ``1.0``), a NaN reward becomes null, and
    ``metadata`` stays inside. Otherwise (batched reply): Python mode, so ndarrays reach
    the msgpack codec intact, with ``metadata`` apart and the reward a float.
    """
    if keep_metadata:
        fields = obs.model_dump(mode="json", exclude=_OBS_EXCLUDE_DONE)
        reward = fields.pop("reward", None)
        if isinstance(reward, float) and not math.isfinite(reward):
            reward = None  # model_dump_json writes NaN / inf as null
        return fields, reward, bool(obs.done), fields.get("metadata") or None
    # the model's own serializer: what model_dump runs, without its Python-level overhead
    fields = type(obs).__pydantic_serializer__.to_python(obs, exclude=_OBS_EXCLUDE_META)
    metadata = getattr(obs, "metadata", None) or None
    reward = obs.reward
    return fields, None if reward is None else float(reward), bool(obs.done), metadata


def state_result(env: Any, _: Any) -> bp.SlotResult:
    """``env``'s state as a batched ``state`` result."""
    return bp.SlotResult(observation=dump_state(env.state, json_mode=False))


def _slot_result(obs: Any) -> bp.SlotResult:
    fields, reward, done, metadata = _split_observation(obs, keep_metadata=False)
    return bp.SlotResult(fields, reward, done, metadata)


def _checked_result(result: Any) -> bp.SlotResult | bp.SlotError | None:
    """A slot's outcome as msgpack carries it, or the EXECUTION_ERROR standing for it."""
    if isinstance(result, bp.SlotError):
        return _encodable(result)
    try:
        return _encodable(_slot_result(result))
    except Exception as exc:  # a serializer of the observation model raised
        return execution_error(exc)


def _encodable(result: bp.SlotResult | bp.SlotError | None) -> bp.SlotResult | bp.SlotError | None:
    """The result, or an EXECUTION_ERROR if msgpack cannot carry it (a datetime field...).

    An error's message and details are made safe too (:func:`wire_safe`).
    """
    if isinstance(result, bp.SlotResult):
        try:
            bp.encode_frame({"obs": result.observation, "meta": result.metadata})
        except LocalProtocolError as exc:
            return execution_error(exc)
    elif isinstance(result, bp.SlotError):
        return bp.SlotError(
            wire_safe(str(result.code)),
            wire_safe(str(result.message)),
            wire_safe(dict(result.details)),
        )
    return result


def dump_state(state: Any, *, json_mode: bool) -> dict[str, Any]:
    if isinstance(state, BaseModel):
        return state.model_dump(mode="json" if json_mode else "python")
    return dict(state) if state else {}


_KwargsFilter = Callable[[Mapping[str, Any]], dict[str, Any]]


def _reset_kwargs_filter(env_factory: Callable[[], Any]) -> _KwargsFilter:
    """Keep only the kwargs ``reset`` accepts; drop the rest silently, as OpenEnv does."""
    reset = getattr(env_factory, "reset", None)
    try:
        params = inspect.signature(reset).parameters.values() if reset else ()
    except (TypeError, ValueError):
        params = ()
    if not params or any(p.kind is p.VAR_KEYWORD for p in params):
        return dict
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    names.discard("self")
    return lambda kwargs: {k: v for k, v in kwargs.items() if k in names}
