"""``OpenEnvVectorEnv``: N remote environments stepped in lockstep as a Gymnasium VectorEnv.

The N sub-environments are spread over K servers (with the local provider: K server
processes). Each vector step sends **one batched frame per server** (two when some
sub-envs auto-reset), all servers driven concurrently from the one event-loop thread;
the replies are assembled into batched arrays. A server without the batched protocol is
driven over OpenEnv's JSON ``/ws`` instead: one session per sub-env, all concurrent, with
the same API and semantics.

>>> import gymnasium, openenv_gym
>>> envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=4)
>>> obs, infos = envs.reset(seed=0)
>>> obs.shape
(4, 50)
>>> obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
>>> envs.close()

EnvPool-style partial batches: :meth:`OpenEnvVectorEnv.send` and
:meth:`OpenEnvVectorEnv.recv` (``info["env_id"]`` says which sub-envs came back).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from openenv_gym.config import Timeouts
from openenv_gym.env import check_episode_args, choose_codec, fetch_schema, local_server, reply_info
from openenv_gym.exceptions import (
    ConfigurationError,
    EnvErrorGroup,
    InvalidActionError,
    OpenEnvGymError,
    UsageError,
    WaitTimeoutError,
)
from openenv_gym.providers import Provider, make_provider
from openenv_gym.spaces import Codec, FieldSpaces, codec_from_schema
from openenv_gym.transport import loop
from openenv_gym.transport.session import StepReply, resolve_protocol
from openenv_gym.transport.shards import Shard, connect_shards

__all__ = ["OpenEnvVectorEnv"]

logger = logging.getLogger("openenv_gym.vector")


class _Out(NamedTuple):
    """One sub-env's share of a vector step."""

    obs: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class OpenEnvVectorEnv(VectorEnv[Any, Any, Any]):
    """N OpenEnv sessions as one ``gymnasium.vector.VectorEnv``.

    Args:
        env: ``"wordle"``, ``"echo"``, ``"catch"``: the spaces and the local server; or
            ``"generic"``: any OpenEnv server, with spaces built from its ``GET /schema``
            (read from the first server; ``docs/spaces.md``).
        num_envs: Number of sub-environments N.
        base_url: One server URL or a list (sub-envs are spread over them in order).
            Default: start local server processes.
        provider: ``"local"``, ``"docker"``, ``"url"`` or a
            :class:`~openenv_gym.providers.Provider`.
        num_servers: Server processes K, local or one per container (default 1, or from
            ``envs_per_server``).
        envs_per_server: Sub-envs per server; K = ceil(N / envs_per_server).
        envs_per_container: Another name for ``envs_per_server`` (with ``provider="docker"``
            each container runs one server).
        protocol: ``"auto"`` (batched where offered, else JSON ``/ws``), ``"batch"``, ``"json"``.
        timeouts: :class:`~openenv_gym.config.Timeouts` or a mapping of its fields.
        max_episode_steps: Truncate episodes after this many steps.
        autoreset_mode: :class:`gymnasium.vector.AutoresetMode` (default NEXT_STEP).
        batch_size: Default number of sub-envs :meth:`recv` waits for (default N).
        frame_size: Most sub-envs per batched frame. A server's share of a step is split
            into frames of this size, so the client assembles the first replies while the
            server computes the next ones (default 64; None: one frame per server).
        render_mode: ``None`` or ``"ansi"``.
        codec: Your own spaces and conversions.
        headers: Extra HTTP headers for the WebSocket upgrades and ``GET /schema``.
        server: The server class local servers run, ``"package.module:Class"`` (default:
            the env's own).
        action_fields: ``env="generic"``: per action field, the space to use instead of
            the schema's, or None to leave a field with a default out.
        observation_fields: ``env="generic"``: per observation field, the space to use
            instead of the schema's, or None to move the field to ``info``.
    """

    def __init__(
        self,
        env: str = "wordle",
        num_envs: int = 1,
        *,
        base_url: str | list[str] | None = None,
        provider: str | Provider | None = None,
        num_servers: int | None = None,
        envs_per_server: int | None = None,
        envs_per_container: int | None = None,
        protocol: str | None = None,
        timeouts: Timeouts | Mapping[str, float | None] | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        batch_size: int | None = None,
        frame_size: int | None = 64,
        render_mode: str | None = None,
        codec: Codec | None = None,
        headers: Mapping[str, str] | None = None,
        server: str | None = None,
        action_fields: FieldSpaces | None = None,
        observation_fields: FieldSpaces | None = None,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ConfigurationError(f"num_envs must be a positive integer, got {num_envs!r}")
        check_episode_args(max_episode_steps, render_mode)
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ConfigurationError(f"unknown autoreset_mode {autoreset_mode!r}") from None
        chosen = choose_codec(env, codec, action_fields, observation_fields)
        name = local_server(chosen, server, provider, base_url)
        self.num_envs = num_envs
        self.metadata = {"render_modes": ["ansi"], "render_fps": 4, "autoreset_mode": mode}
        self.render_mode = render_mode
        self.autoreset_mode = mode
        self.max_episode_steps = max_episode_steps
        self.batch_size = self._check_batch_size(batch_size or num_envs)
        if frame_size is not None and frame_size < 1:
            raise ConfigurationError(f"frame_size must be >= 1 or None, got {frame_size}")
        self.frame_size = frame_size
        self._timeouts = Timeouts.of(timeouts)
        if envs_per_container is not None:
            if envs_per_server is not None:
                raise ConfigurationError("give envs_per_server or envs_per_container, not both")
            envs_per_server = envs_per_container
        servers = self._count_servers(num_envs, num_servers, envs_per_server, base_url)
        self._provider = make_provider(
            name, provider=provider, base_url=base_url, num_servers=servers
        )
        self._shards: list[Shard] = []
        try:
            urls = self._provider.start()
            if chosen is None:
                schema = fetch_schema(urls[0], timeout=self._timeouts.connect, headers=headers)
                chosen = codec_from_schema(
                    schema, action_fields=action_fields, observation_fields=observation_fields
                )
            self._shards = loop.run(
                connect_shards(urls, num_envs, resolve_protocol(protocol), self._timeouts, headers)
            )
        except BaseException:
            self._provider.close()
            raise
        self.codec = chosen
        self.single_observation_space = chosen.observation_space
        self.single_action_space = chosen.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._where = [(shard, pos) for shard in self._shards for pos in range(len(shard.indices))]
        self.protocols = tuple(shard.protocol for shard in self._shards)
        """Per server: ``"batch"`` or ``"json"``."""
        self._decode_obs = self.codec.decode_observation
        self._observed = self.codec.observed
        self._last_obs: list[Any] = [None] * num_envs
        self._last_raw: list[StepReply | None] = [None] * num_envs
        # per-env bookkeeping in plain lists: numpy scalar access is slow in loops
        self._elapsed = [0] * num_envs
        self._autoreset = [False] * num_envs
        self._started = [False] * num_envs
        self._pending: dict[concurrent.futures.Future[Any], list[int]] = {}
        self._ready: list[tuple[int, _Out | BaseException]] = []
        self._step_started = False

    # ------------------------------------------------------------------ set-up
    def _check_batch_size(self, batch_size: int) -> int:
        if not 1 <= batch_size <= self.num_envs:
            raise ConfigurationError(
                f"batch_size must be in [1, {self.num_envs}], got {batch_size}"
            )
        return batch_size

    @staticmethod
    def _count_servers(
        num_envs: int,
        num_servers: int | None,
        envs_per_server: int | None,
        base_url: str | list[str] | None,
    ) -> int:
        if base_url is not None and (num_servers or envs_per_server):
            raise ConfigurationError("num_servers / envs_per_server apply to local servers only")
        if num_servers is not None and envs_per_server is not None:
            raise ConfigurationError("give num_servers or envs_per_server, not both")
        if envs_per_server is not None:
            if envs_per_server < 1:
                raise ConfigurationError(f"envs_per_server must be >= 1, got {envs_per_server}")
            return math.ceil(num_envs / envs_per_server)
        servers = num_servers or 1
        if servers < 1 or servers > num_envs:
            raise ConfigurationError(
                f"num_servers must be in [1, num_envs={num_envs}], got {servers}"
            )
        return servers

    @property
    def base_urls(self) -> list[str]:
        """The servers' URLs, one per shard."""
        return [shard.url for shard in self._shards]

    # ------------------------------------------------------------------ helpers
    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                f"but got length={len(seeds)}."
            )
        return seeds

    def _reset_mask(self, options: dict[str, Any]) -> np.ndarray[Any, np.dtype[np.bool_]] | None:
        if "reset_mask" not in options:
            return None
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(
                f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}"
            )
        if mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
        if not np.any(mask):
            raise ValueError(
                "`options['reset_mask']` must contain a boolean array with at least one True "
                f"value, got reset_mask={mask}"
            )
        return mask

    def _split_actions(self, actions: Any, env_ids: Sequence[int]) -> list[Any]:
        count = _length(actions)
        if count != len(env_ids):
            raise ValueError(
                f"got {count} actions for {len(env_ids)} sub-environments "
                f"(num_envs={self.num_envs}); pass exactly one action per sub-environment"
            )
        if len(env_ids) == self.num_envs:
            per_env = list(iterate(self.action_space, actions))
        else:
            per_env = list(actions)
        contains = self.codec.contains_action or self.single_action_space.contains
        autoreset = self._autoreset
        bad = {
            i: InvalidActionError(f"action {a!r} is not in {self.single_action_space}")
            for i, a in zip(env_ids, per_env, strict=True)
            if not autoreset[i] and not contains(a)
        }
        if bad:
            raise EnvErrorGroup(f"{len(bad)} action(s) outside the action space", bad)
        return per_env

    def _out(self, i: int, reply: StepReply, *, reset: bool) -> _Out:
        """Decode one sub-env's reply and update its episode bookkeeping."""
        self._last_raw[i] = reply
        obs = self._decode_obs(reply.observation)
        self._last_obs[i] = obs
        info = reply_info(reply, self._observed)
        if reset:
            self._elapsed[i] = 0
            self._autoreset[i] = False
            self._started[i] = True
            return _Out(obs, 0.0, False, False, info)
        elapsed = self._elapsed[i] = self._elapsed[i] + 1
        terminated = reply.done
        limit = self.max_episode_steps
        truncated = limit is not None and elapsed >= limit  # as gymnasium's TimeLimit
        self._autoreset[i] = terminated or truncated
        reward = reply.reward
        return _Out(obs, 0.0 if reward is None else float(reward), terminated, truncated, info)

    def _plan(
        self, env_ids: Sequence[int], ops: Sequence[str], args: Sequence[Mapping[str, Any]]
    ) -> list[tuple[Shard, list[int], list[str], list[Mapping[str, Any]], list[int]]]:
        """Group per-env requests by shard (env order kept), at most ``frame_size`` per group."""
        grouped: dict[
            int, tuple[Shard, list[int], list[str], list[Mapping[str, Any]], list[int]]
        ] = {}
        where = self._where
        for i, op_, arg in zip(env_ids, ops, args, strict=True):
            shard, pos = where[i]
            entry = grouped.get(id(shard))
            if entry is None:
                entry = grouped[id(shard)] = (shard, [], [], [], [])
            entry[1].append(pos)
            entry[2].append(op_)
            entry[3].append(arg)
            entry[4].append(i)
        size = self.frame_size
        plans = []
        for shard, positions, shard_ops, shard_args, ids in grouped.values():
            if size is None or len(ids) <= size:
                plans.append((shard, positions, shard_ops, shard_args, ids))
                continue
            for start in range(0, len(ids), size):
                end = start + size
                plans.append(
                    (
                        shard,
                        positions[start:end],
                        shard_ops[start:end],
                        shard_args[start:end],
                        ids[start:end],
                    )
                )
        return plans

    def _batch(self, env_ids: Sequence[int], outs: Mapping[int, _Out]) -> tuple[Any, ...]:
        n = len(env_ids)
        space = self.single_observation_space
        obs = concatenate(space, [outs[i].obs for i in env_ids], _empty(space, n))
        rewards = np.fromiter((outs[i].reward for i in env_ids), np.float64, n)
        terminations = np.fromiter((outs[i].terminated for i in env_ids), np.bool_, n)
        truncations = np.fromiter((outs[i].truncated for i in env_ids), np.bool_, n)
        infos = batch_infos([outs[i].info for i in env_ids])
        return obs, rewards, terminations, truncations, infos

    def _check_open(self) -> None:
        if self.closed:
            raise UsageError("the vector environment is closed")

    # ------------------------------------------------------------------ Gymnasium API
    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``).

        ``seed``: int -> ``seed + i``; list -> one per sub-env. Other ``options`` are
        reset kwargs sent to every reset sub-env. The caller's dict is not modified.
        """
        self._check_open()
        if self._pending or self._ready:
            raise UsageError("a step is pending (step_async / send): collect it first")
        if seed is not None:
            super().reset(seed=seed if isinstance(seed, int) else None)
        seeds = self._seeds(seed)
        opts = dict(options or {})
        mask = self._reset_mask(opts)
        env_ids = (
            list(range(self.num_envs)) if mask is None else [int(i) for i in np.flatnonzero(mask)]
        )
        started = self._started
        never = [] if mask is None else [i for i, m in enumerate(mask) if not m and not started[i]]
        if never:  # their observations would be missing from the batch
            raise UsageError(f"sub-envs {never} were never reset: reset all (no reset_mask) first")
        args = []
        for i in env_ids:
            kwargs = dict(opts)
            if seeds[i] is not None:
                kwargs["seed"] = seeds[i]
            args.append(kwargs)
        results = self._run_plan(self._plan(env_ids, ["reset"] * len(env_ids), args))
        errors = {i: r for i, r in results.items() if isinstance(r, BaseException)}
        if errors:
            raise EnvErrorGroup(f"reset failed in {len(errors)} sub-environment(s)", errors)
        outs = {i: self._out(i, r, reset=True) for i, r in results.items()}
        if mask is None:
            self._autoreset = [False] * self.num_envs
            obs, *_, infos = self._batch(env_ids, outs)
            return obs, infos
        all_obs = concatenate(
            self.single_observation_space,
            list(self._last_obs),
            _empty(self.single_observation_space, self.num_envs),
        )
        return all_obs, batch_infos(
            [outs[i].info if i in outs else {} for i in range(self.num_envs)]
        )

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env with its action (ignored for auto-resetting sub-envs)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Send the actions of every sub-env; collect with :meth:`step_wait`."""
        self._check_open()
        if self._step_started:
            raise UsageError("a step is already pending: call step_wait() first")
        if self._pending or self._ready:
            raise UsageError("steps sent with send() are not all received: call recv() first")
        self._send(actions, list(range(self.num_envs)), lockstep=True)
        self._step_started = True

    def step_wait(self, timeout: float | None = None) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Wait for the step sent by :meth:`step_async` (``timeout`` in seconds).

        Raises:
            WaitTimeoutError: Not done within ``timeout``; the step stays pending (call
                again). Server-side limits are ``timeouts.step``.
            EnvErrorGroup: Some sub-envs failed; ``errors`` maps each index to its error.
        """
        if not self._step_started:
            raise UsageError("no step pending: call step_async() first")
        try:
            outs = self._collect(self.num_envs, timeout)
        except EnvErrorGroup:  # every sub-env's reply was consumed: the step is over
            self._step_started = False
            raise
        self._step_started = False
        return self._batch(list(range(self.num_envs)), outs)

    # ------------------------------------------------------------------ send / recv
    def send(
        self, actions: Any, env_ids: Sequence[int] | np.ndarray[Any, Any] | None = None
    ) -> None:
        """Send actions for some sub-envs (EnvPool style) without waiting.

        Args:
            actions: One action per id in ``env_ids``.
            env_ids: Sub-env indices (default: all). None of them may have a pending step.
        """
        self._check_open()
        if self._step_started:
            raise UsageError("step_async() is pending: call step_wait() first")
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        if len(set(ids)) != len(ids) or any(not 0 <= i < self.num_envs for i in ids):
            raise ValueError(f"env_ids must be distinct indices in [0, {self.num_envs}), got {ids}")
        busy = {i for pending in self._pending.values() for i in pending}.intersection(ids)
        busy.update(i for i, _ in self._ready if i in ids)
        if busy:
            raise UsageError(f"sub-envs {sorted(busy)} already have a step pending")
        self._send(actions, ids)

    def recv(
        self, batch_size: int | None = None, timeout: float | None = None
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Return the first ``batch_size`` sub-envs whose step finished.

        ``infos["env_id"]`` holds their indices (in the order of the returned arrays).

        Raises:
            WaitTimeoutError: Fewer than ``batch_size`` finished within ``timeout``.
            EnvErrorGroup: Some of the returned sub-envs failed.
        """
        want = self._check_batch_size(batch_size or self.batch_size)
        outstanding = sum(len(v) for v in self._pending.values()) + len(self._ready)
        if outstanding == 0:
            raise UsageError("nothing pending: call send() first")
        outs = self._collect(min(want, outstanding), timeout)
        env_ids = list(outs)
        obs, rewards, terminations, truncations, infos = self._batch(env_ids, outs)
        infos["env_id"] = np.asarray(env_ids, dtype=np.int64)
        return obs, rewards, terminations, truncations, infos

    def _send(self, actions: Any, env_ids: list[int], *, lockstep: bool = False) -> None:
        per_env = self._split_actions(actions, env_ids)
        not_started = [i for i in env_ids if not self._started[i]]
        if not_started:
            raise UsageError(f"sub-envs {not_started} were never reset: call reset() first")
        if self.autoreset_mode is AutoresetMode.DISABLED:
            finished = [i for i in env_ids if self._autoreset[i]]
            if finished:
                raise UsageError(
                    f"sub-envs {finished} finished their episode and autoreset is DISABLED: "
                    "call reset(options={'reset_mask': ...}) first"
                )
        ops: list[str] = []
        args: list[Mapping[str, Any]] = []
        for i, action in zip(env_ids, per_env, strict=True):
            if self._autoreset[i] and self.autoreset_mode is AutoresetMode.NEXT_STEP:
                ops.append("reset")
                args.append({})
            else:
                ops.append("step")
                args.append(self.codec.encode_action(action))
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        limit = self.max_episode_steps
        runs = []
        for shard, positions, shard_ops, shard_args, ids in self._plan(env_ids, ops, args):
            # SAME_STEP resets in the same request: tell the shard which steps truncate
            reset_after = (
                [limit is not None and self._elapsed[i] + 1 >= limit for i in ids]
                if same_step
                else None
            )
            runs.append((shard.run(positions, shard_ops, shard_args, reset_after), ids))
        event_loop = loop.get_loop()
        if lockstep:  # one hand-off for the whole step; frames are absorbed as they arrive
            future = asyncio.run_coroutine_threadsafe(self._absorb_all(runs), event_loop)
            self._pending[future] = env_ids
            return
        for run, ids in runs:  # send/recv: each frame is its own future
            self._pending[
                asyncio.run_coroutine_threadsafe(self._absorb_all([(run, ids)]), event_loop)
            ] = ids

    async def _absorb_all(self, runs: list[tuple[Any, list[int]]]) -> list[tuple[int, Any]]:
        """On the loop thread: await the frames, decode each as soon as it arrives.

        Decoding a frame's replies overlaps with the servers computing the next frames,
        and the caller's thread wakes once per step, not once per frame.
        """

        async def settle(run: Any, ids: list[int]) -> tuple[list[int], Any]:
            try:
                return ids, await run
            except Exception as exc:  # a bug below the shard: fail these envs, typed
                error = (
                    exc if isinstance(exc, OpenEnvGymError) else UsageError(f"step failed: {exc!r}")
                )
                return ids, error

        outs: list[tuple[int, Any]] = []
        for arrival in asyncio.as_completed([settle(run, ids) for run, ids in runs]):
            ids, results = await arrival
            outs.extend(self._absorb(ids, results))
        return outs

    def _collect(self, want: int, timeout: float | None) -> dict[int, _Out]:
        """Gather finished sub-envs until at least ``want`` are ready; consume them."""
        while len(self._ready) < want and self._pending:
            done, _ = concurrent.futures.wait(
                list(self._pending), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
            )
            if not done:
                raise WaitTimeoutError(
                    f"{len(self._ready)} of {want} sub-envs finished within {timeout} s; "
                    "the step is still pending"
                )
            for future in done:
                ids = self._pending.pop(future)
                try:
                    self._ready.extend(future.result())
                except BaseException as exc:  # cancelled: fail these envs, typed
                    error = UsageError(f"step was cancelled: {exc!r}")
                    self._ready.extend((i, error) for i in ids)
        taken, self._ready = self._ready[:want], self._ready[want:]
        errors = {i: out for i, out in taken if isinstance(out, BaseException)}
        if errors:
            succeeded = {i: tuple(out) for i, out in taken if not isinstance(out, BaseException)}
            raise EnvErrorGroup(f"{len(errors)} sub-environment(s) failed", errors, succeeded)
        return {i: out for i, out in taken if isinstance(out, _Out)}

    def _absorb(self, ids: list[int], results: Any) -> list[tuple[int, Any]]:
        """Turn one frame's per-env results into step outputs (or errors), in ``ids`` order."""
        if isinstance(results, BaseException):
            return [(i, results) for i in ids]
        outs: list[tuple[int, Any]] = []
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        autoreset, out_of = self._autoreset, self._out
        for i, result in zip(ids, results, strict=True):
            if result.__class__ is not tuple:  # an exception for this sub-env
                outs.append((i, result))
                continue
            first, second = result
            if next_step and autoreset[i]:
                outs.append((i, out_of(i, first, reset=True)))
                continue
            out = out_of(i, first, reset=False)
            if second is not None:  # SAME_STEP: reset within the same step
                if isinstance(second, BaseException):
                    outs.append((i, second))
                    continue
                fresh = out_of(i, second, reset=True)
                info = {"final_obs": out.obs, "final_info": out.info, **fresh.info}
                out = _Out(fresh.obs, out.reward, out.terminated, out.truncated, info)
            outs.append((i, out))
        return outs

    def _run_plan(
        self, plans: list[tuple[Shard, list[int], list[str], list[Mapping[str, Any]], list[int]]]
    ) -> dict[int, Any]:
        async def run_all() -> list[Any]:
            return await asyncio.gather(  # type: ignore[no-any-return]
                *(shard.run(pos, ops, args) for shard, pos, ops, args, _ in plans),
                return_exceptions=True,
            )

        results: dict[int, Any] = {}
        for (_, _, _, _, ids), outcome in zip(plans, loop.run(run_all()), strict=True):
            for k, i in enumerate(ids):
                if isinstance(outcome, BaseException):
                    results[i] = outcome
                elif isinstance(outcome[k], BaseException):
                    results[i] = outcome[k]
                else:
                    results[i] = outcome[k][0]
        return results

    # ------------------------------------------------------------------ extras
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method on every sub-env; supported: ``state``, ``render``."""
        self._check_open()
        if name == "state":
            every = list(range(self.num_envs))
            results = self._run_plan(self._plan(every, ["state"] * len(every), [{}] * len(every)))
            errors = {i: r for i, r in results.items() if isinstance(r, BaseException)}
            if errors:
                raise EnvErrorGroup("state failed", errors)
            return tuple(results[i] for i in range(self.num_envs))
        if name == "render":
            return self._render_all()
        return self.get_attr(name)

    def info_of(self, i: int) -> dict[str, Any]:
        """Sub-env ``i``'s info from its latest reply, as a single env's ``info``.

        What the batched ``infos`` of ``step`` / ``recv`` hold for it, without unbatching
        them (empty before its first reset).
        """
        reply = self._last_raw[i]
        return {} if reply is None else reply_info(reply, self._observed)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Return one value per sub-env.

        Known names: ``base_url``, ``protocol``, ``elapsed_steps``; any other public
        attribute of the vector env itself is repeated N times.
        """
        if name == "base_url":
            return tuple(self._where[i][0].url for i in range(self.num_envs))
        if name == "protocol":
            return tuple(self._where[i][0].protocol for i in range(self.num_envs))
        if name == "elapsed_steps":
            return tuple(self._elapsed)
        if name.startswith("_") or not hasattr(self, name):
            raise AttributeError(f"sub-environments have no attribute {name!r}")
        return (getattr(self, name),) * self.num_envs

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``max_episode_steps`` (the only settable sub-env attribute)."""
        if name != "max_episode_steps":
            raise AttributeError(f"cannot set {name!r} on remote sub-environments")
        if isinstance(values, list | tuple):
            if len(values) != self.num_envs or len(set(values)) != 1:
                raise ValueError("max_episode_steps must be one value for every sub-env")
            values = values[0]
        self.max_episode_steps = values

    def _render_all(self) -> tuple[Any, ...]:
        return tuple(
            None if raw is None else self.codec.render(raw.observation) for raw in self._last_raw
        )

    def render(self) -> tuple[Any, ...] | None:
        """``render_mode="ansi"``: one text per sub-env."""
        if self.render_mode != "ansi":
            return None
        return self._render_all()

    def close_extras(self, **kwargs: Any) -> None:
        """Close every connection and stop local servers."""
        shards, self._shards = self._shards, []
        for future in self._pending:
            future.cancel()
        self._pending.clear()

        async def close_all() -> None:
            await asyncio.gather(*(s.aclose() for s in shards), return_exceptions=True)

        try:
            if shards:
                loop.run(close_all())
        finally:
            self._provider.close()

    def __repr__(self) -> str:
        return (
            f"OpenEnvVectorEnv({self.codec.name!r}, num_envs={self.num_envs}, "
            f"protocols={self.protocols})"
        )


def _empty(space: Any, n: int) -> Any:
    """A fresh batch buffer (``concatenate`` fills it; Text spaces give a tuple)."""
    return create_empty_array(space, n)


def _length(actions: Any) -> int:
    if isinstance(actions, np.ndarray):
        return int(actions.shape[0]) if actions.ndim else 1
    if isinstance(actions, str | bytes) or not isinstance(actions, Sequence):
        return 1
    return len(actions)


def _fits(kind: type, value: Any) -> bool:
    """Whether ``value`` goes into a ``kind`` column without loss."""
    if value is None:
        return False
    if issubclass(kind, bool | np.bool_):
        return isinstance(value, bool | np.bool_)
    if issubclass(kind, int | np.integer):
        return isinstance(value, int | np.integer)
    return isinstance(value, int | float | np.number)


def _numeric_column(n: int, kind: type, rows: list[int], values: list[Any], full: bool) -> Any:
    """A column typed by its first value, as Gymnasium's ``_add_info`` types it.

    Where a later value does not fit, Gymnasium raises (``None`` in a number column) or
    silently truncates (``0.75`` in an int column); here the column widens instead: to
    float64 when every value is a number, else to an object array.
    """
    if full and all(type(v) is kind for v in values):
        return np.array(values, dtype=kind)
    if all(_fits(kind, v) for v in values):
        column: np.ndarray[Any, Any] = np.zeros(n, dtype=kind)
        column[rows] = values
        return column
    numbers = all(isinstance(v, int | float | np.number) for v in values) and not any(
        isinstance(v, bool) for v in values
    )
    array = np.zeros(n, dtype=np.float64) if numbers else np.full(n, None, dtype=object)
    for i, value in zip(rows, values, strict=True):
        array[i] = value
    return array


def _same_keys(infos: Sequence[Mapping[str, Any]]) -> bool:
    keys = infos[0].keys()
    return all(info.keys() == keys for info in infos)


def _batch_uniform(infos: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """Batch infos that all have the same keys (the usual case).

    Whole columns at once, no masks to fill; odd columns go through the general path.
    """
    out: dict[str, Any] = {}
    for key in infos[0]:
        values = [info[key] for info in infos]
        first = values[0]
        kinds = set(map(type, values))
        array: Any
        if key == "final_obs":
            array = np.fromiter(values, dtype=object, count=n)
        elif kinds == {dict}:
            array = batch_infos(values)
        elif len(kinds) == 1 and (
            first.__class__ in (int, float, bool) or isinstance(first, np.number)
        ):
            array = np.array(values, dtype=first.__class__)
        elif not isinstance(first, int | float | bool | dict | np.ndarray | np.generic):
            # the first value is an object (str, list, None...): an object column, as
            # Gymnasium types a column by its first value
            array = np.fromiter(values, dtype=object, count=n)
        else:  # mixed numbers, arrays: the general path decides
            array = _batch_general([{key: v} for v in values])[key]
        out[key] = array
        out[f"_{key}"] = np.ones(n, dtype=np.bool_)
    return out


def batch_infos(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Batch per-env info dicts exactly as ``VectorEnv._add_info`` does, column by column.

    Every key becomes an array of length N with a bool mask ``_key``; dicts recurse;
    numbers get the dtype of the first env reporting them; ``final_obs`` and other
    objects become object arrays.
    """
    n = len(infos)
    if n and _same_keys(infos):
        return _batch_uniform(infos, n)
    return _batch_general(infos)


def _batch_general(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`batch_infos` for infos whose keys differ between envs."""
    n = len(infos)
    columns: dict[str, tuple[list[int], list[Any]]] = {}
    for i, info in enumerate(infos):
        for key, value in info.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            column[0].append(i)
            column[1].append(value)
    out: dict[str, Any] = {}
    for key, (rows, values) in columns.items():
        full = len(rows) == n
        mask = np.ones(n, dtype=np.bool_) if full else np.zeros(n, dtype=np.bool_)
        if not full:
            mask[rows] = True
        first = values[0]
        kind = type(first)
        array: Any
        if key != "final_obs" and kind is dict:
            nested: list[Mapping[str, Any]] = [{}] * n
            for i, value in zip(rows, values, strict=True):
                if isinstance(value, dict):
                    nested[i] = value
            array = batch_infos(nested)
        elif key != "final_obs" and (kind in (int, float, bool) or isinstance(first, np.number)):
            array = _numeric_column(n, kind, rows, values, full)
        elif key != "final_obs" and isinstance(first, np.ndarray):
            array = np.zeros((n, *first.shape), dtype=first.dtype)
            for i, value in zip(rows, values, strict=True):
                array[i] = value
        else:
            array = np.full(n, None, dtype=object)
            for i, value in zip(rows, values, strict=True):
                array[i] = value
        out[key] = array
        out[f"_{key}"] = mask
    return out
