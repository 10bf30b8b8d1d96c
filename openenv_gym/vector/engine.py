"""The stepping engine under every facade: the single env, the vector env, the asyncio envs.

An :class:`Engine` holds N sub-environments on K servers: their shards (the transport),
their episodes (:class:`~openenv_gym.vector.episodes.Episodes`), the call state
(:class:`~openenv_gym.vector.state.CallState`), and what a call has sent and not yet
returned. Each operation (``reset``, ``step_async``, ``step_wait``, ``send``, ``recv``,
``state``; for one sub-env ``reset_one``, ``step_one``, ``state_one``) is written once, as
a generator that yields what it waits for (:mod:`openenv_gym.vector.drive`): a driver
runs it, :func:`~openenv_gym.vector.drive.run` on the caller's thread (the sync envs) and
:mod:`openenv_gym.aio` on an event loop. The engine never blocks and never touches a
socket or a loop, so both drivers share every rule: autoreset, time limits, lost servers
(:mod:`openenv_gym.vector.recovery`), errors per sub-env, and the arrays and infos the
vector facades return (:class:`~openenv_gym.vector.batching.Batcher`).

A call interrupted while it waits (``KeyboardInterrupt``, a cancelled task) leaves its
requests behind; the next call takes their replies first (bookkeeping applied, results
dropped), so no reply is ever taken for another request's.
"""

from __future__ import annotations

import collections
import reprlib
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
from gymnasium.vector import AutoresetMode

from openenv_gym.assemble import Assembly, assemble, headers_for_server, wrong_id_hint
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    ConnectionLostError,
    EnvClosedError,
    EnvErrorGroup,
    InvalidActionError,
    PendingCallError,
    RemoteProtocolError,
    RequestTimeoutError,
    ResetNeededError,
    ServerValidationError,
    UsageError,
    WaitTimeoutError,
    server_error,
)
from openenv_gym.options import Settings, check_batch_size
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.spaces import Codec, action_error
from openenv_gym.transport.dispatch import Dispatcher, Pending, Request
from openenv_gym.transport.session import Session, session_of
from openenv_gym.transport.shards import Outcome, Shard, connect_shards
from openenv_gym.vector.actions import Planner
from openenv_gym.vector.batching import Batcher, Step, Taken, merge_outcomes, place
from openenv_gym.vector.drive import Collect, One, OneStep, Op, run
from openenv_gym.vector.episodes import Bool, Episodes, Int, Received
from openenv_gym.vector.recovery import LOST, recover, recover_single
from openenv_gym.vector.state import LEFT_OVER, Call, CallState, fire

__all__ = ["Engine"]


class Engine:
    """N sub-envs over their shards (see the module docstring). Build with :meth:`start`.

    Args:
        settings: The checked options.
        parts: What :func:`~openenv_gym.assemble.assemble` set up (shards connected).
        single: A single env: errors and lean path of one sub-env.
    """

    def __init__(self, settings: Settings, parts: Assembly[list[Shard]], single: bool) -> None:
        self.settings = settings
        self.single = single
        self.provider = parts.provider
        self.seeded = parts.seeded
        self.tokens = parts.tokens
        self.codec: Codec = parts.codec
        shards = parts.connection
        self.dispatcher = Dispatcher(shards)
        self.urls = [shard.url for shard in shards]
        self.protocols = tuple(shard.protocol for shard in shards)
        n = settings.num_envs
        self.num_envs = n
        self.planner = Planner(parts.codec, n, shards, settings.frame_size)
        self.episodes = Episodes(n, settings.max_episode_steps, settings.autoreset_mode)
        self.batcher = Batcher(parts.codec, n)
        self.state = CallState.DEFAULT
        self.in_flight: list[Pending] = []
        self.ready: collections.deque[tuple[Received, Int]] = collections.deque()
        self.orphans: list[Pending] = []  # sent by interrupted calls: taken by the next
        self.broken: str | None = None  # why every call fails (a timeout, with "raise")
        self.lock = threading.RLock()
        self.session: Session | None = session_of(shards[0]) if single else None
        self.hint = wrong_id_hint(settings.recipe, parts.seeded, self.urls[0])
        self.closed_message = (
            "the environment is closed" if single else "the vector environment is closed"
        )

    @classmethod
    def start(cls, settings: Settings, *, single: bool = False) -> Engine:
        """Set up the servers and sessions of ``settings`` (blocking) and the engine over them.

        Raises:
            OpenEnvGymError: What :func:`~openenv_gym.assemble.assemble` raises; a single
                env's own session error rather than a group of one.
        """
        protocol, timeouts = settings.protocol, settings.timeouts

        def connect(urls: list[str], headers: list[dict[str, str] | None]) -> list[Shard]:
            return connect_shards(urls, settings.num_envs, protocol, timeouts, headers)

        try:
            parts = assemble(settings.recipe, connect)
        except EnvErrorGroup as group:
            if not single:
                raise
            raise group.errors[0]  # noqa: B904 - ``from`` would replace its own __cause__
        return cls(settings, parts, single)

    # ------------------------------------------------------------------ set-up
    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The HTTP headers server ``k`` gets (its bearer token included; current ones)."""
        return headers_for_server(self.provider, k, self.settings.recipe.headers, self.tokens[k])

    def _move(self, state: CallState) -> None:
        """Enter ``state``, unless :meth:`close` (from another thread) closed the env."""
        if self.state is not CallState.CLOSED:
            self.state = state

    def hinted(self, exc: Exception) -> Exception:
        """``exc``, or a copy whose message hints that the id may not match the server.

        For a known env on a server we did not start (:attr:`hint`): the server refusing
        our action (:class:`~openenv_gym.exceptions.ServerValidationError`), or a reply
        the codec cannot read (:class:`~openenv_gym.exceptions.RemoteProtocolError`).
        """
        hint = self.hint
        if hint is None:
            return exc
        if isinstance(exc, ServerValidationError):
            new: Exception = server_error(
                exc.code, f"{exc.message} {hint}", exc.details, session_closed=exc.session_closed
            )
        elif type(exc) is RemoteProtocolError:
            new = RemoteProtocolError(f"{exc} {hint}")
        else:
            return exc
        new.__cause__ = exc
        return new

    def raise_hinted(self, exc: Exception) -> NoReturn:
        """Raise :meth:`hinted` of ``exc`` (``exc`` itself when there is no hint)."""
        hinted = self.hinted(exc)
        if hinted is exc:
            raise exc
        raise hinted from exc

    def check_open(self) -> None:
        """Raise :class:`EnvClosedError` if the env is closed."""
        if self.state is CallState.CLOSED:
            raise EnvClosedError(self.closed_message)

    def closed_meanwhile(self, exc: UsageError) -> UsageError:
        """``exc``, or :class:`EnvClosedError` if it is :meth:`close` interrupting a wait."""
        if self.state is CallState.CLOSED and not isinstance(exc, EnvClosedError):
            closed = EnvClosedError(f"the vector environment was closed: {exc}")
            closed.__cause__ = exc
            return closed
        return exc

    def call_session(self, one: One) -> Any:
        """The sync driver's lean path for :class:`One`: the single session's own call."""
        session = self.session
        if session is None:
            raise EnvClosedError(self.closed_message)
        if one.op == "step":
            return session.step(one.arg)
        if one.op == "reset":
            return session.reset(**one.arg)
        return session.state()

    # ------------------------------------------------------------------ vector calls
    def reset(
        self, seed: int | Sequence[int | None] | None, options: Mapping[str, Any] | None
    ) -> Op[tuple[Any, dict[str, Any]]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``)."""
        yield from self._settle(Call.RESET)
        episodes = self.episodes
        seeds = episodes.seeds(seed)
        opts = dict(options or {})
        mask = self._reset_mask(opts)
        env_ids = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        never = [] if mask is None else np.flatnonzero(~mask & ~episodes.started).tolist()
        if never:  # their observations would be missing from the batch
            raise UsageError(f"sub-envs {never} were never reset: reset all (no reset_mask) first")
        episodes.reseed(seeds, env_ids)
        args = []
        for i in env_ids.tolist():
            kwargs = dict(opts)
            if seeds[i] is not None:
                kwargs["seed"] = seeds[i]
            args.append(kwargs)
        self._move(CallState.WAITING_RESET)
        outcomes = yield from self._exchange(self.planner.requests("reset", env_ids, args))
        if self.settings.on_server_loss == "restart":
            lost = (yield from recover(self, outcomes))[0]
            if any(m is not None for m in lost):
                # reconnected: reset again (fresh sessions, the same seeds)
                outcomes = yield from self._exchange(self.planner.requests("reset", env_ids, args))
        episodes.lost[env_ids] = False
        self._move(CallState.DEFAULT)
        received = [episodes.absorb(outcome) for outcome in outcomes]
        errors = {int(r.ids[k]): e for r in received for k, e in r.outcome.errors.items()}
        if errors:
            raise EnvErrorGroup(f"reset failed in {len(errors)} sub-environment(s)", errors)
        taken = [(r, np.arange(len(r.ids))) for r in received]
        if mask is None:
            obs, _, _, _, infos = self._arrays(taken, np.arange(self.num_envs))
            return obs, infos
        _, _, _, _, infos = self._arrays(taken, env_ids)
        return self.last_observations(), place(infos, env_ids, self.num_envs)

    def _reset_mask(self, options: dict[str, Any]) -> Bool | None:
        if "reset_mask" not in options:
            return None
        mask = options.pop("reset_mask")
        n = self.num_envs
        if not isinstance(mask, np.ndarray):
            raise ArgumentTypeError(
                f"`options['reset_mask']` must be a numpy array, got {type(mask)}"
            )
        if mask.shape != (n,):
            raise ConfigurationError(
                f"`options['reset_mask']` must have shape `({n},)`, got {mask.shape}"
            )
        if mask.dtype != np.bool_:
            raise ArgumentTypeError(
                f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}"
            )
        if not np.any(mask):
            raise ConfigurationError(
                "`options['reset_mask']` must contain a boolean array with at least one True "
                f"value, got reset_mask={mask}"
            )
        return mask

    def last_observations(self) -> Any:
        """Every sub-env's latest observation, in env order."""
        episodes, batcher = self.episodes, self.batcher
        return batcher.stack(
            [
                batcher.obs_at(episodes.last[i], int(episodes.last_at[i]))
                for i in range(self.num_envs)
            ]
        )

    def step_async(self, actions: Any) -> Op[None]:
        """Send every sub-env's action (autoresetting ones reset); :meth:`step_wait` next."""
        yield from self._settle(Call.STEP_ASYNC)
        yield from self._send(actions, np.arange(self.num_envs))
        self._move(CallState.WAITING_STEP)

    def step_wait(self, timeout: float | None) -> Op[Step]:
        """The step :meth:`step_async` sent, once every sub-env's reply is in."""
        yield from self._settle(Call.STEP_WAIT)
        taken = yield from self._collect(self.num_envs, timeout)
        self._move(CallState.DEFAULT)  # every sub-env's reply is consumed: the step is over
        return self._finish(taken, np.arange(self.num_envs))

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray[Any, Any] | None) -> Op[None]:
        """Send actions for some sub-envs (EnvPool style); :meth:`recv` takes them."""
        yield from self._settle(Call.SEND)
        n = self.num_envs
        ids = list(range(n)) if env_ids is None else [int(i) for i in env_ids]
        if len(set(ids)) != len(ids) or any(not 0 <= i < n for i in ids):
            raise ConfigurationError(
                f"env_ids must be distinct indices in [0, {n}), got {reprlib.repr(ids)}"
            )
        chosen = np.asarray(ids, dtype=np.intp)
        busy = chosen[self.episodes.busy[chosen]].tolist()
        if busy:
            raise PendingCallError(f"sub-envs {sorted(busy)} already have a step pending", "send")
        yield from self._send(actions, chosen)
        self._move(CallState.WAITING_SEND)

    def recv(self, batch_size: int, timeout: float | None) -> Op[Step]:
        """The first ``batch_size`` sub-envs whose step finished (``infos["env_id"]``)."""
        self.check_open()
        want = check_batch_size(batch_size, self.num_envs)
        yield from self._settle(Call.RECV)
        outstanding = int(self.episodes.busy.sum())
        taken = yield from self._collect(min(want, outstanding), timeout)
        env_ids = np.concatenate([r.ids[sel] for r, sel in taken])
        obs, rewards, terminations, truncations, infos = self._finish(taken, None)
        infos["env_id"] = env_ids.astype(np.int64)
        return obs, rewards, terminations, truncations, infos

    def state_all(self) -> Op[tuple[Any, ...]]:
        """Every sub-env's server state (``call("state")``)."""
        yield from self._settle(Call.STATE)
        self._move(CallState.WAITING_CALL)
        every = np.arange(self.num_envs)
        outcomes = yield from self._exchange(self.planner.requests("state", every, None))
        self._move(CallState.DEFAULT)
        states: dict[int, Any] = {}
        errors: dict[int, BaseException] = {}
        for outcome in outcomes:
            for k, i in enumerate(np.asarray(outcome.ids).tolist()):
                if k in outcome.errors:
                    errors[i] = outcome.errors[k]
                else:
                    states[i] = outcome.observation(k)
        if errors:
            raise EnvErrorGroup("state failed", errors)
        return tuple(states[i] for i in range(self.num_envs))

    # ------------------------------------------------------------------ single env calls
    def reset_one(self, kwargs: dict[str, Any]) -> Op[ObservationReceived]:
        """Reset the one sub-env with ``kwargs`` (seed, options); its reply."""
        if self._unsettled():
            yield from self._settle(Call.RESET)
        try:
            reply = yield One("reset", kwargs)
        except ServerValidationError as exc:
            self.raise_hinted(exc)
        except LOST as exc:
            if self.settings.on_server_loss != "restart":
                self._broken_by([exc])
                raise
            yield from recover_single(self, exc)
            reply = yield One("reset", kwargs)
        self.episodes.absorb_reply(0, "reset", reply)
        return reply  # type: ignore[no-any-return]

    def step_one(self, action: Any) -> Op[OneStep]:
        """Step the one sub-env: :data:`OneStep` (its reply, reward, flags, server lost).

        Raises:
            ResetNeededError: No episode is running.
            InvalidActionError: ``action`` is outside the action space.
        """
        if self._unsettled():
            yield from self._settle(Call.STEP_ASYNC)
        wire = self._wire_one(action)
        try:
            reply = yield One("step", wire)
        except ServerValidationError as exc:
            self.raise_hinted(exc)
        except LOST as exc:
            return (yield from self._lost_one(exc))
        return self._stepped_one(reply)

    def step_one_now(self, action: Any) -> OneStep:
        """:meth:`step_one` on the caller's thread: the single env's lean path.

        One blocking call of the session between the same checks and bookkeeping, with no
        driver in between; anything but the plain case (calls left behind, a closed env,
        a lost server) goes through :meth:`step_one` and :func:`run`.
        """
        session = self.session
        if session is None or self._unsettled():
            return run(self, self.step_one(action))
        wire = self._wire_one(action)
        try:
            reply = session.step(wire)
        except ServerValidationError as exc:
            self.raise_hinted(exc)
        except LOST as exc:
            return run(self, self._lost_one(exc))
        return self._stepped_one(reply)

    def _unsettled(self) -> bool:
        """Whether a single env's call must go through :meth:`_settle` first.

        It must when calls were left behind, or the env is closed or broken (each later
        call says so).
        """
        return bool(self.orphans) or self.state is not CallState.DEFAULT or self.broken is not None

    def _wire_one(self, action: Any) -> Mapping[str, Any]:
        episodes = self.episodes
        if episodes.ended[0] or not episodes.started[0]:
            raise ResetNeededError("the episode is over (or never started): call reset()")
        codec = self.codec
        contains = codec.contains_action or codec.action_space.contains
        if not contains(action):
            raise InvalidActionError(action_error(codec.action_space, action))
        return codec.encode_action(action)

    def _stepped_one(self, reply: ObservationReceived) -> OneStep:
        terminated, truncated = self.episodes.absorb_reply(0, "step", reply)
        reward = 0.0 if reply.reward is None else float(reply.reward)
        return reply, reward, terminated, truncated, False

    def _lost_one(self, lost: ConnectionLostError | RequestTimeoutError) -> Op[OneStep]:
        """The step lost the server: with ``restart``, the last reply, truncated."""
        episodes = self.episodes
        last = episodes.reply_of(0)
        if self.settings.on_server_loss != "restart" or last is None:
            self._broken_by([lost])
            raise lost
        yield from recover_single(self, lost)
        episodes.lost_reply(0)
        return last, 0.0, False, True, True

    def state_one(self) -> Op[dict[str, Any]]:
        """The one sub-env's server state."""
        yield from self._settle(Call.STATE)
        try:
            return (yield One("state"))  # type: ignore[no-any-return]
        except RequestTimeoutError as exc:
            self._broken_by([exc])
            raise

    def one_exchange(self, one: One) -> Op[Any]:
        """:class:`One` over the shard (the asyncio driver's path): its reply, or its error."""
        arg = None if one.arg is None else [one.arg]
        request = Request(0, one.op, [0], [0], arg)
        (outcome,) = yield from self._exchange([request])
        error = outcome.errors.get(0)
        if error is not None:
            raise error
        if one.op == "state":
            return outcome.observation(0)
        return outcome.reply(0)

    # ------------------------------------------------------------------ sending
    def _settle(self, call: Call) -> Op[None]:
        """Take what interrupted calls left (their replies), then check ``call`` is allowed."""
        if self.orphans:
            orphans, self.orphans = self.orphans, []
            done = yield Collect(orphans)
            for pending in done:
                self.episodes.absorb(Dispatcher.take(pending))
        if self.state in LEFT_OVER or (self.single and self.state is not CallState.CLOSED):
            self._move(CallState.DEFAULT)
        if self.broken is not None and self.state is not CallState.CLOSED:
            raise UsageError(self.broken)
        fire(self.state, call, self.closed_message)

    def _broken_by(self, errors: Iterable[BaseException]) -> None:
        """With ``on_server_loss="raise"``, a timeout breaks the env: every later call says so.

        The connection that missed its reply was dropped (its late reply could never be
        matched to a request), so its sub-envs can take no more requests.
        """
        if self.broken is not None or self.settings.on_server_loss == "restart":
            return
        for error in errors:
            if isinstance(error, RequestTimeoutError):
                self.broken = (
                    f"the environment is broken: {error} (its sub-envs can take no more "
                    "requests); close it and make a new one, or use "
                    "on_server_loss='restart' to go on with their episodes truncated"
                )
                return

    def _exchange(self, requests: list[Request]) -> Op[list[Outcome]]:
        """Send ``requests`` and wait for every reply: their outcomes, in request order."""
        pending = self.dispatcher.submit(requests)
        try:
            yield Collect(pending)
        except BaseException:
            self.orphans.extend(pending)  # interrupted: the next call takes their replies
            raise
        outcomes = [Dispatcher.take(p) for p in pending]
        self._broken_by(e for outcome in outcomes for e in outcome.errors.values())
        return outcomes

    def _send(self, actions: Any, env_ids: Int) -> Op[None]:
        episodes = self.episodes
        per_env = self.planner.split(actions, env_ids, episodes.ended)
        not_started = env_ids[~episodes.started[env_ids]].tolist()
        if not_started:
            raise ResetNeededError(f"sub-envs {not_started} were never reset: call reset() first")
        finished = episodes.ended[env_ids]
        mode = self.settings.autoreset_mode
        if mode is AutoresetMode.DISABLED and finished.any():
            raise UsageError(
                f"sub-envs {env_ids[finished].tolist()} finished their episode and autoreset "
                "is DISABLED: call reset(options={'reset_mask': ...}) first"
            )
        self.check_open()
        if episodes.lost.any():
            env_ids, per_env, finished = yield from self._report_lost(env_ids, per_env, finished)
            if not len(env_ids):
                return
        planner = self.planner
        resetting = finished if mode is AutoresetMode.NEXT_STEP else None
        if resetting is None or not resetting.any():
            requests = planner.requests("step", env_ids, planner.encode(per_env))
        else:
            stepping = np.flatnonzero(~resetting).tolist()
            requests = planner.requests("reset", env_ids[resetting], None)
            if stepping:
                acts = [per_env[j] for j in stepping]
                requests += planner.requests("step", env_ids[stepping], planner.encode(acts))
        self.in_flight.extend(self.dispatcher.submit(requests))
        episodes.busy[env_ids] = True

    def _report_lost(
        self, env_ids: Int, per_env: list[Any], finished: Bool
    ) -> Op[tuple[Int, list[Any], Bool]]:
        """Sub-envs whose server was lost while idle: their step is the loss, now.

        Those about to autoreset just do (on the new server). The others are not sent:
        their result is ready at once (truncated, ``info["server_lost"]``). Returns the
        sub-envs still to send, their actions and their ``finished`` flags.
        """
        episodes = self.episodes
        flagged = episodes.lost[env_ids]
        episodes.lost[env_ids[flagged & finished]] = False
        report = flagged & ~finished
        if not report.any():
            return env_ids, per_env, finished
        lost_ids = env_ids[report]
        received = episodes.lost_while_idle(lost_ids)
        yield from self._reset_now(received)
        self.ready.append((received, np.arange(len(lost_ids))))
        episodes.busy[lost_ids] = True
        keep = np.flatnonzero(~report)
        return env_ids[keep], [per_env[j] for j in keep.tolist()], finished[keep]

    # ------------------------------------------------------------------ receiving
    def _collect(self, want: int, timeout: float | None) -> Op[Taken]:
        """Gather finished sub-envs until at least ``want`` are ready; take exactly ``want``."""
        ready = self.ready
        have = sum(len(sel) for _, sel in ready)
        if have < want:
            self.check_open()  # closed from another thread: nothing more will come
            have += yield from self._gather(want - have, timeout)
            if have < want:
                raise WaitTimeoutError(
                    f"{have} of {want} sub-envs finished within {timeout} s; "
                    "the step is still pending"
                )
        taken: Taken = []
        need = want
        while need:
            received, sel = ready.popleft()
            if len(sel) > need:
                ready.appendleft((received, sel[need:]))
                sel = sel[:need]
            taken.append((received, sel))
            need -= len(sel)
        return taken

    def _gather(self, want: int, timeout: float | None) -> Op[int]:
        """Wait for at least ``want`` more sub-envs (or ``timeout``); how many came back."""
        done: list[Pending] = yield Collect(self.in_flight, want, timeout)
        finished = {id(p) for p in done}
        self.in_flight = [p for p in self.in_flight if id(p) not in finished]
        outcomes = [Dispatcher.take(pending) for pending in done]
        masks: list[Bool | None] = [None] * len(outcomes)
        self._broken_by(e for outcome in outcomes for e in outcome.errors.values())
        if self.settings.on_server_loss == "restart":
            masks, extra = yield from recover(self, outcomes)
            outcomes += extra
            masks += [np.ones(len(o.ids), dtype=np.bool_) for o in extra]
            for outcome in extra:
                outcome.errors.clear()
        have = 0
        for outcome, lost in zip(outcomes, masks, strict=True):
            received = self.episodes.absorb(outcome, lost)
            if outcome.op == "step":
                yield from self._reset_now(received)
            self.ready.append((received, np.arange(len(received.ids))))
            have += len(received.ids)
        return have

    def _reset_now(self, received: Received) -> Op[None]:
        """SAME_STEP: reset the sub-envs whose episode just ended, before returning them."""
        if self.settings.autoreset_mode is not AutoresetMode.SAME_STEP:
            return
        ended = received.ended()
        if not ended.any():
            return
        ids = received.ids[ended]
        outcomes = yield from self._exchange(self.planner.requests("reset", ids, None))
        fresh_at = np.full(len(received.ids), -1, dtype=np.intp)
        combined = merge_outcomes(outcomes, ids)
        for outcome in outcomes:
            self.episodes.absorb(outcome)
        fresh_at[np.flatnonzero(ended)] = np.arange(len(ids))
        received.fresh = (combined, fresh_at)

    def _finish(self, taken: Taken, order: Int | None) -> Step:
        """The arrays of ``taken``; sub-envs returned are no longer busy.

        Raises:
            EnvErrorGroup: Some sub-envs failed; it carries the others' results.
        """
        self.episodes.busy[np.concatenate([r.ids[sel] for r, sel in taken])] = False
        if not self.episodes.busy.any() and self.state is CallState.WAITING_SEND:
            self._move(CallState.DEFAULT)
        errors = {
            int(received.ids[k]): self.hinted(received.outcome.errors[k])  # type: ignore[arg-type]
            for received, sel in taken
            if received.outcome.errors
            for k in sel.tolist()
            if k in received.outcome.errors
        }
        if errors:
            try:
                results = self.batcher.per_env(taken)
            except RemoteProtocolError as exc:  # a reply the codec cannot read
                self.raise_hinted(exc)
            raise EnvErrorGroup(f"{len(errors)} sub-environment(s) failed", errors, results)
        return self._arrays(taken, order)

    def _arrays(self, taken: Taken, order: Int | None) -> Step:
        """The arrays of ``taken`` (a reply the codec cannot read: with :meth:`hinted`)."""
        try:
            return self.batcher.batch(taken, order)
        except RemoteProtocolError as exc:
            self.raise_hinted(exc)

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        """Close every connection and stop local servers (blocking). Idempotent.

        From another thread while a call waits: that call ends with an
        :class:`~openenv_gym.exceptions.EnvClosedError` first.
        """
        if self.state is CallState.CLOSED and not self.dispatcher.shards:
            return
        dispatcher = self.dispatcher
        self.state = CallState.CLOSED
        if not self.lock.acquire(blocking=False):
            dispatcher.interrupt()  # a call is waiting on the sockets: make it return
            self.lock.acquire()
        try:
            self.in_flight.clear()
            self.ready.clear()
            self.orphans.clear()
            session, self.session = self.session, None
            if session is not None:
                session.close()
            dispatcher.close()
        finally:
            self.lock.release()
            self.provider.close()
