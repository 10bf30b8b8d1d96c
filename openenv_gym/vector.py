"""``OpenEnvVectorEnv``: N remote environments stepped in lockstep as a Gymnasium VectorEnv.

The N sub-environments are spread over K servers (with the local provider: K server
processes). A vector step hands the transport **one plan** -- one batched frame per server
and operation, split into frames of ``frame_size`` sub-envs (more when some sub-envs
auto-reset) -- and gets back one **columnar** outcome per frame: rewards, dones and
observations arrive as columns and stay columns until they are the step's arrays.
Episode bookkeeping (elapsed steps, autoreset) is numpy over the whole batch, on the
caller's thread. A server without the batched protocol is driven over OpenEnv's JSON
``/ws`` instead: one session per sub-env, all in flight at once, same API and semantics.

>>> import gymnasium, openenv_gym
>>> envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=4)
>>> obs, infos = envs.reset(seed=0)
>>> obs.shape
(4, 50)
>>> obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
>>> envs.close()

EnvPool-style partial batches: :meth:`OpenEnvVectorEnv.send` and
:meth:`OpenEnvVectorEnv.recv` (``info["env_id"]`` says which sub-envs came back).

One cohesive concern, over 600 lines: :class:`OpenEnvVectorEnv`, Gymnasium's vector
contract over the transport (its calls, autoreset, time limits, errors per sub-env and
assembly of the batch). Set-up is :mod:`openenv_gym.assemble`'s, info batching
:mod:`openenv_gym.infos`'s, sockets the transport's.
"""

from __future__ import annotations

import collections
import logging
import math
import reprlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium.error
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from openenv_gym.assemble import (
    Recipe,
    assemble,
    check_episode_args,
    check_on_server_loss,
    headers_for_server,
    marked_spec,
    render_modes,
)
from openenv_gym.config import (
    AutoresetModeName,
    OnServerLoss,
    ProtocolName,
    Timeouts,
    check_count,
)
from openenv_gym.exceptions import (
    ActionBatchError,
    ArgumentTypeError,
    ConfigurationError,
    ConnectionLostError,
    EnvClosedError,
    EnvErrorGroup,
    InvalidActionError,
    NoPendingCallError,
    OpenEnvGymError,
    PendingCallError,
    ResetNeededError,
    UsageError,
    WaitTimeoutError,
)
from openenv_gym.infos import InfoColumns, Nested, batch_info_columns, batch_infos
from openenv_gym.providers import Provider
from openenv_gym.replies import reply_info, wire_observation
from openenv_gym.spaces import Codec, FieldSpaces, action_error
from openenv_gym.transport.dispatch import Dispatcher, Pending, Request
from openenv_gym.transport.session import resolve_protocol
from openenv_gym.transport.shards import Outcome, Shard, connect_shard, connect_shards

__all__ = ["OpenEnvVectorEnv", "batch_infos", "parse_autoreset_mode"]

logger = logging.getLogger("openenv_gym.vector")

_Int = np.ndarray[Any, np.dtype[np.intp]]
_Bool = np.ndarray[Any, np.dtype[np.bool_]]


@dataclass(slots=True)
class _Received:
    """One outcome, after its sub-envs' bookkeeping: what a step returns for them.

    Attributes:
        outcome: The transport's outcome (columns, rewards, dones, errors).
        ids: Its sub-envs, as an array.
        ok: Which of them succeeded.
        rewards: Rewards as the step returns them (0.0 for resets and missing rewards).
        terminated, truncated: As the step returns them.
        fresh: For SAME_STEP autoreset: the outcome of the reset that followed the step,
            with the position of each of this outcome's sub-envs in it (-1: no reset).
        piece: The decoded observations of every position (None until decoded).
        lost: ``on_server_loss="restart"``: the positions whose server was lost (they
            count as ``ok``, truncated, from their last reply: ``final``), or None.
        final: Position -> the outcome and position of its last reply, for ``lost``.
    """

    outcome: Outcome
    ids: _Int
    ok: _Bool
    rewards: np.ndarray[Any, np.dtype[np.float64]]
    terminated: _Bool
    truncated: _Bool
    fresh: tuple[Outcome, _Int] | None = None
    piece: Any = None
    decoded: bool = False
    chunks: list[tuple[_Int, InfoColumns]] = field(default_factory=list)
    lost: _Bool | None = None
    final: dict[int, tuple[Outcome, int]] = field(default_factory=dict)


def parse_autoreset_mode(value: Any) -> AutoresetMode:
    """An :class:`~gymnasium.vector.AutoresetMode` from itself, its value or its name.

    Member names are matched in any case, so ``"SAME_STEP"`` (as Gymnasium's docs spell
    it), ``"same_step"`` and ``"SameStep"`` (the value) all give ``SAME_STEP``.

    >>> parse_autoreset_mode("SAME_STEP") is AutoresetMode.SAME_STEP
    True

    Raises:
        ConfigurationError: Anything else; the message lists the valid values.
    """
    if isinstance(value, AutoresetMode):
        return value
    if isinstance(value, str):
        for mode in AutoresetMode:
            if value.lower() in (mode.name.lower(), mode.value.lower()):
                return mode
    names = ", ".join(repr(mode.name) for mode in AutoresetMode)
    raise ConfigurationError(
        f"unknown autoreset_mode {value!r}: use an AutoresetMode member or one of {names} "
        "(any case)"
    )


class OpenEnvVectorEnv(VectorEnv[Any, Any, Any]):
    """N OpenEnv sessions as one ``gymnasium.vector.VectorEnv``.

    Args:
        env: ``"wordle"``, ``"echo"``, ``"catch"``: the spaces and the local server; or
            ``"generic"``: any OpenEnv server, with spaces built from its ``GET /schema``
            (read from the first server; ``docs/spaces.md``).
        num_envs: Number of sub-environments N.
        base_url: One server URL or a list (sub-envs are spread over them in order).
            Default: start local server processes.
        provider: ``"local"``, ``"docker"``, ``"ray"``, ``"url"`` or a
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
        frame_size: Most sub-envs per batched frame (default None: one frame per server
            and operation). Smaller frames let the client decode the first replies while
            the server computes the next ones, but each frame costs a round of fixed work
            on both sides; one frame per server is usually the fastest
            (``benchmarks/README.md`` compares them).
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"`` (envs with a picture: Catch);
            ``render()`` gives one frame per sub-env.
        codec: Your own spaces and conversions.
        headers: Extra HTTP headers for the WebSocket upgrades and ``GET /schema``.
        token: The bearer token of servers we did not start (one, or one per
            ``base_url``), sent as ``Authorization: Bearer <token>`` (default:
            ``OPENENV_GYM_TOKEN``). Servers a provider starts get a fresh token each,
            which the env sends without being told.
        on_server_loss: ``"raise"`` (default): the sub-envs of a lost connection fail
            with :class:`~openenv_gym.exceptions.ConnectionLostError` (in an
            :class:`~openenv_gym.exceptions.EnvErrorGroup`). ``"restart"``: the env starts
            the server again if it died (a server its provider started), reconnects all
            its sub-envs, and reports each one's episode as truncated in the step that
            lost it (the last observation, ``truncated=True``,
            ``info["server_lost"] = True``); they then autoreset as usual
            (``docs/reliability.md``).
        server: The server class local servers run, ``"package.module:Class"`` (default:
            the env's own).
        action_fields: ``env="generic"``: per action field, the space to use instead of
            the schema's, or None to leave a field with a default out.
        observation_fields: ``env="generic"``: per observation field, the space to use
            instead of the schema's, or None to move the field to ``info``.
        tool: ``env="generic"`` on an MCP tool server: act with this one tool (the action
            space is its arguments'; default: every tool, ``Dict(tool, arguments)``).
        **provider_options: More arguments of the provider (``provider="ray"``:
            ``placement=``, ``num_cpus=``, ``runtime_env=``...; ``docs/scale-out.md``).
    """

    _spec: EnvSpec | None = None
    _seeded = False
    _closing = False

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
        protocol: ProtocolName | None = None,
        timeouts: Timeouts | Mapping[str, float | None] | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: AutoresetMode | AutoresetModeName = AutoresetMode.NEXT_STEP,
        batch_size: int | None = None,
        frame_size: int | None = None,
        render_mode: Literal["ansi", "rgb_array"] | None = None,
        codec: Codec | None = None,
        headers: Mapping[str, str] | None = None,
        server: str | None = None,
        action_fields: FieldSpaces | None = None,
        observation_fields: FieldSpaces | None = None,
        tool: str | None = None,
        token: str | Sequence[str | None] | None = None,
        on_server_loss: OnServerLoss = "raise",
        **provider_options: Any,
    ) -> None:
        check_count(num_envs, "num_envs", optional=False)
        for arg, count in (
            ("num_servers", num_servers),
            ("envs_per_server", envs_per_server),
            ("envs_per_container", envs_per_container),
            ("batch_size", batch_size),
            ("frame_size", frame_size),
        ):
            check_count(count, arg)
        check_episode_args(max_episode_steps, render_mode, codec, headers, env=env)
        self._on_server_loss = check_on_server_loss(on_server_loss)
        mode = parse_autoreset_mode(autoreset_mode)
        self.num_envs = num_envs
        self.metadata = {
            "render_modes": ["ansi", "rgb_array"],
            "render_fps": 4,
            "autoreset_mode": mode,
        }
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
        self._dispatcher = Dispatcher([])
        self._headers = headers
        recipe = Recipe(
            env,
            codec=codec,
            action_fields=action_fields,
            observation_fields=observation_fields,
            tool=tool,
            server=server,
            provider=provider,
            base_url=base_url,
            provider_options={**provider_options, "num_servers": servers},
            headers=headers,
            token=token,
            timeouts=self._timeouts,
        )
        parts = assemble(
            recipe,
            lambda urls, per_server: connect_shards(
                urls, num_envs, resolve_protocol(protocol), self._timeouts, per_server
            ),
        )
        self._provider = parts.provider
        self._tokens = parts.tokens
        self._seeded = parts.seeded
        shards, chosen = parts.connection, parts.codec
        self._dispatcher = Dispatcher(shards)
        self.codec = chosen
        self.metadata["render_modes"] = render_modes(chosen)
        self.single_observation_space = chosen.observation_space
        self.single_action_space = chosen.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.protocols = tuple(shard.protocol for shard in shards)
        """Per server: ``"batch"`` or ``"json"``."""
        self._urls = [shard.url for shard in shards]
        self._shard_of = np.zeros(num_envs, dtype=np.intp)
        self._position = np.zeros(num_envs, dtype=np.intp)
        for k, shard in enumerate(shards):
            self._shard_of[shard.indices] = k
            self._position[shard.indices] = np.arange(len(shard.indices))
        self._decode_obs = chosen.decode_observation
        self._observed = chosen.observed | {"metadata"}
        self._decode_columns = chosen.decode_columns
        # per sub-env bookkeeping, whole-batch numpy
        self._elapsed = np.zeros(num_envs, dtype=np.int64)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self._started = np.zeros(num_envs, dtype=np.bool_)
        self._busy = np.zeros(num_envs, dtype=np.bool_)  # sent and not yet returned
        self._last: np.ndarray[Any, np.dtype[np.object_]] = np.empty(num_envs, dtype=object)
        self._last_at = np.zeros(num_envs, dtype=np.intp)
        self._in_flight: list[Pending] = []
        self._ready: collections.deque[tuple[_Received, _Int]] = collections.deque()
        self._step_started = False
        self._closing = False
        # per sub-env: (np_random, its seed), as each of SyncVectorEnv's envs holds them
        self._rngs: list[tuple[np.random.Generator, int] | None] = [None] * num_envs
        self._call_lock = threading.RLock()
        # sub-envs whose server was lost while they were idle: their next step says so
        self._lost = np.zeros(num_envs, dtype=np.bool_)

    # ------------------------------------------------------------------ set-up
    def request_headers(self, k: int = 0) -> dict[str, str] | None:
        """The HTTP headers this env sends server ``k`` (its bearer token included).

        A restarted server may have a new token: these are the current ones.
        """
        return headers_for_server(self._provider, k, self._headers, self._tokens[k])

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
    def spec(self) -> EnvSpec | None:
        """The ``EnvSpec`` that ``gymnasium.make_vec`` set.

        ``nondeterministic`` is True when determinism depends on the servers: any server
        but our own Wordle, Echo and Catch started by us
        (:func:`~openenv_gym.assemble.serves_seeded`).
        """
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = marked_spec(value, self._seeded)

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Per sub-env, the generator its last seeded reset made (as ``SyncVectorEnv``).

        A sub-env never reset with a seed gets one from a random seed, on first use.
        """
        return tuple(rng for rng, _ in self._sub_rngs())

    @property
    def np_random_seed(self) -> tuple[int, ...]:  # type: ignore[override]
        """Per sub-env, the seed of :attr:`np_random` (as ``SyncVectorEnv``).

        ``reset(seed=s)`` gives ``(s, s + 1, ...)``; ``reset()`` keeps them.
        """
        return tuple(seed for _, seed in self._sub_rngs())

    def _sub_rngs(self) -> list[tuple[np.random.Generator, int]]:
        rngs = self._rngs
        made = []
        for i, pair in enumerate(rngs):
            if pair is None:
                pair = rngs[i] = seeding.np_random()
            made.append(pair)
        return made

    def _reseed(self, seeds: list[int | None], env_ids: _Int) -> None:
        """Seed the ``np_random`` of the sub-envs at ``env_ids`` that get a seed.

        Raises:
            ConfigurationError: A seed is not a non-negative integer.
        """
        fresh = {}
        for i in env_ids.tolist():
            seed = seeds[i]
            if seed is None:
                continue
            try:
                fresh[i] = seeding.np_random(int(seed) if isinstance(seed, np.integer) else seed)
            except gymnasium.error.Error as exc:
                raise ConfigurationError(f"sub-env {i}: {exc}") from exc
        for i, pair in fresh.items():
            self._rngs[i] = pair

    @property
    def base_urls(self) -> list[str]:
        """The servers' URLs, one per shard."""
        return list(self._urls)

    # ------------------------------------------------------------------ planning
    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ConfigurationError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                f"but got length={len(seeds)}."
            )
        return seeds

    def _reset_mask(self, options: dict[str, Any]) -> _Bool | None:
        if "reset_mask" not in options:
            return None
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray):
            raise ArgumentTypeError(
                f"`options['reset_mask']` must be a numpy array, got {type(mask)}"
            )
        if mask.shape != (self.num_envs,):
            raise ConfigurationError(
                f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}"
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

    def _split_actions(self, actions: Any, env_ids: _Int) -> list[Any]:
        per_env = self._actions_per_env(actions, len(env_ids))
        contain = self.codec.contain_actions
        if contain is not None and contain(per_env):  # the usual case: one pass
            return per_env
        contains = self.codec.contains_action or self.single_action_space.contains
        autoreset = self._autoreset
        bad = {
            int(i): InvalidActionError(action_error(self.single_action_space, a))
            for i, a in zip(env_ids.tolist(), per_env, strict=True)
            if not autoreset[i] and not contains(a)
        }
        if bad:
            raise EnvErrorGroup(f"{len(bad)} action(s) outside the action space", bad)
        return per_env

    def _actions_per_env(self, actions: Any, count: int) -> list[Any]:
        """One action per sub-env from a batch of ``count``.

        A batch is a sequence or array of per-env actions, an array-like (a torch tensor),
        or, for a ``Dict`` action space, Gymnasium's batched form: a mapping of batches
        (what ``action_space.sample()`` gives).

        Raises:
            ActionBatchError: Not a batch of ``count`` actions.
        """
        single = self.single_action_space
        if isinstance(actions, Mapping):
            if not isinstance(single, spaces.Dict):
                raise ActionBatchError(
                    f"got a mapping of actions, but the action space {single} is not a Dict"
                )
            return _dict_rows(single, actions, count)
        if _is_scalar(actions) and hasattr(actions, "__array__"):
            actions = np.asarray(actions)  # a tensor of the policy's
        if _is_scalar(actions):
            raise ActionBatchError(
                f"got the single action {actions!r:.200}, not a batch; pass a sequence or an "
                f"array of {count} action(s), one per sub-environment"
            )
        found = len(actions)
        if found != count:
            raise ActionBatchError(
                f"got {found} actions for {count} sub-environments "
                f"(num_envs={self.num_envs}); pass exactly one action per sub-environment"
            )
        return list(actions)

    def _encode(self, actions: list[Any]) -> Any:
        """The wire actions: columns when the codec can, else one map per action."""
        encode_many = self.codec.encode_actions
        if encode_many is not None:
            columns = encode_many(actions)
            if columns is not None:
                return columns
        encode = self.codec.encode_action
        return [encode(a) for a in actions]

    def _requests(self, op_: str, ids: _Int, args: Any) -> list[Request]:
        """One request per shard and frame, in env order; ``args`` rows or columns."""
        requests: list[Request] = []
        size = self.frame_size
        single = len(self._dispatcher.shards) == 1
        shard_of = None if single else self._shard_of[ids]
        for k in range(len(self._dispatcher.shards)):
            if shard_of is None:
                chosen: Any = slice(None)
                shard_ids = ids
            else:
                chosen = np.flatnonzero(shard_of == k)
                if not len(chosen):
                    continue
                shard_ids = ids[chosen]
            shard_args = _take_args(args, chosen)
            positions = shard_ids if single else self._position[shard_ids]
            count = len(shard_ids)
            if size is None or count <= size:
                requests.append(Request(k, op_, positions.tolist(), shard_ids, shard_args))
                continue
            for start in range(0, count, size):
                window = slice(start, start + size)
                requests.append(
                    Request(
                        k,
                        op_,
                        positions[window].tolist(),
                        shard_ids[window],
                        _take_args(shard_args, window),
                    )
                )
        return requests

    # ------------------------------------------------------------------ receiving
    def _absorb(self, outcome: Outcome, lost: _Bool | None = None) -> _Received:
        """Bookkeeping for one outcome's sub-envs (on the caller's thread, numpy).

        ``lost``: positions whose server was lost (no result: truncated, see
        :meth:`_with_lost`).
        """
        ids = np.asarray(outcome.ids, dtype=np.intp)
        n = len(ids)
        ok = np.ones(n, dtype=np.bool_)
        if outcome.errors or lost is not None:
            ok[list(outcome.errors)] = False
            if lost is not None:
                ok &= ~lost
            good = ids[ok]
            self._last_at[good] = np.flatnonzero(ok)
        else:
            good = ids
            self._last_at[ids] = np.arange(n)
        if lost is not None:  # their last reply, before a SAME_STEP reset replaces it
            final = {
                k: (self._last[i], int(self._last_at[i]))
                for k, i in zip(np.flatnonzero(lost).tolist(), ids[lost].tolist(), strict=True)
            }
        self._last[good] = outcome
        if outcome.op == "reset":
            self._elapsed[good] = 0
            self._autoreset[good] = False
            self._started[good] = True
            zeros = np.zeros(n, dtype=np.bool_)
            received = _Received(outcome, ids, ok, np.zeros(n), zeros, zeros)
            return received if lost is None else self._with_lost(received, lost, final)
        elapsed = self._elapsed[ids] + 1
        limit = self.max_episode_steps
        # as gymnasium's TimeLimit: the limit truncates, whether or not the step terminated
        if not ok.all():
            self._elapsed[good] = elapsed[ok]
            terminated = outcome.dones & ok
            truncated = (elapsed >= limit) & ok if limit is not None else np.zeros(n, np.bool_)
            self._autoreset[good] = (terminated | truncated)[ok]
        else:
            self._elapsed[ids] = elapsed
            terminated = outcome.dones
            truncated = elapsed >= limit if limit is not None else np.zeros(n, np.bool_)
            self._autoreset[ids] = terminated | truncated if limit is not None else terminated
        rewards = outcome.rewards
        if np.isnan(rewards).any():
            rewards = np.where(np.isnan(rewards), 0.0, rewards)
        received = _Received(outcome, ids, ok, rewards, terminated, truncated)
        if lost is not None:
            received = self._with_lost(received, lost, final)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            self._reset_now(received)
        return received

    def _with_lost(
        self, received: _Received, lost: _Bool, final: dict[int, tuple[Outcome, int]]
    ) -> _Received:
        """Mark ``lost`` positions: truncated (reward 0) from their last reply; autoreset."""
        received.ok = received.ok | lost
        received.terminated = received.terminated & ~lost
        received.truncated = received.truncated | lost
        received.rewards = np.where(lost, 0.0, received.rewards)
        received.lost, received.final = lost, final
        self._autoreset[received.ids[lost]] = True
        return received

    # ------------------------------------------------------------------ lost servers
    def _recover(self, outcomes: list[Outcome]) -> tuple[list[_Bool | None], list[Outcome]]:
        """``on_server_loss="restart"``: reconnect the shards that lost a connection.

        Returns, per outcome, its positions now counted as lost (or None), and the
        outcomes of requests abandoned on those shards (every position lost). Every other
        sub-env of a reconnected shard is marked to report the loss at its next step.
        Where a shard cannot be reconnected, its sub-envs keep their error (the reason).
        """
        hit = sorted(
            {
                int(self._shard_of[outcome.ids[k]])
                for outcome in outcomes
                for k, error in outcome.errors.items()
                if isinstance(error, ConnectionLostError)
            }
        )
        masks: list[_Bool | None] = [None] * len(outcomes)
        if not hit:
            return masks, []
        shards = self._dispatcher.shards
        recovered, abandoned = set(), []
        for k in hit:
            old = shards[k]
            try:
                self._reconnect(k)
            except OpenEnvGymError as exc:
                for outcome in outcomes:
                    for pos, error in outcome.errors.items():
                        if (
                            isinstance(error, ConnectionLostError)
                            and self._shard_of[outcome.ids[pos]] == k
                        ):
                            outcome.errors[pos] = exc
                continue
            recovered.add(k)
            abandoned += [p for p in self._in_flight if p.shard is old]
            self._in_flight = [p for p in self._in_flight if p.shard is not old]
            self._lost[old.indices] = self._started[old.indices]  # refined below
        reported: list[int] = []
        for j, outcome in enumerate(outcomes):
            ids = np.asarray(outcome.ids, dtype=np.intp)
            mask = np.zeros(len(ids), dtype=np.bool_)
            for pos, error in list(outcome.errors.items()):
                if isinstance(error, ConnectionLostError) and self._shard_of[ids[pos]] in recovered:
                    mask[pos] = True
                    del outcome.errors[pos]
            if mask.any():
                masks[j] = mask
                reported += ids[mask].tolist()
        extra = []
        for pending in abandoned:
            ids = np.asarray(pending.ids, dtype=np.intp)
            gone = ConnectionLostError("the server was lost with this request in flight")
            extra.append(Outcome.failed(ids, "step", gone))
            reported += ids.tolist()
        self._lost[reported] = False  # reported now: not again at their next step
        return masks, extra

    def _reconnect(self, k: int) -> None:
        """Replace shard ``k``: restart its server if it is gone, reconnect its sub-envs.

        Raises:
            ProviderError: The server is gone and its provider cannot start it again.
            OpenEnvGymError: The new connections failed.
        """
        provider = self._provider
        old = self._dispatcher.shards[k]
        url = old.url if provider.alive(k) else provider.restart(k)
        try:
            shard = self._connect_again(k, url, old)
        except OpenEnvGymError:  # it runs but does not answer (hung), or refuses
            url = provider.restart(k)
            shard = self._connect_again(k, url, old)
        logger.warning(
            "lost server %d (%s): %d sub-envs now on %s", k, old.url, len(old.indices), url
        )
        self._dispatcher.replace(k, shard)
        self._urls[k] = url

    def _connect_again(self, k: int, url: str, old: Shard) -> Shard:
        return connect_shard(
            url, old.indices, old.protocol, self._timeouts, self.request_headers(k)
        )

    def _reset_now(self, received: _Received) -> None:
        """SAME_STEP: reset the sub-envs whose episode just ended, before returning them."""
        ended = (received.terminated | received.truncated) & received.ok
        if not ended.any():
            return
        ids = received.ids[ended]
        outcomes = self._dispatcher.run(self._requests("reset", ids, None))
        fresh_at = np.full(len(received.ids), -1, dtype=np.intp)
        combined = _merge_outcomes(outcomes, ids)
        for outcome in outcomes:
            self._absorb(outcome)
        fresh_at[np.flatnonzero(ended)] = np.arange(len(ids))
        received.fresh = (combined, fresh_at)

    def _gather(self, want: int, timeout: float | None) -> int:
        """Wait for at least ``want`` more sub-envs (or ``timeout``); how many came back."""
        done = self._dispatcher.collect(self._in_flight, want, timeout)
        finished = {id(p) for p in done}
        self._in_flight = [p for p in self._in_flight if id(p) not in finished]
        outcomes = [Dispatcher.take(pending) for pending in done]
        masks: list[_Bool | None] = [None] * len(outcomes)
        if self._on_server_loss == "restart":
            masks, extra = self._recover(outcomes)
            outcomes += extra
            masks += [np.ones(len(o.ids), dtype=np.bool_) for o in extra]
            for outcome in extra:
                outcome.errors.clear()
        have = 0
        for outcome, lost in zip(outcomes, masks, strict=True):
            received = self._absorb(outcome, lost)
            self._ready.append((received, np.arange(len(received.ids))))
            have += len(received.ids)
        return have

    def _collect(self, want: int, timeout: float | None) -> list[tuple[_Received, _Int]]:
        """Gather finished sub-envs until at least ``want`` are ready; take exactly ``want``."""
        ready = self._ready
        have = sum(len(sel) for _, sel in ready)
        if have < want and self._in_flight:
            try:
                have += self._gather(want - have, timeout)
            except UsageError as exc:
                self._closed_meanwhile(exc)
                raise
            if have < want:
                raise WaitTimeoutError(
                    f"{have} of {want} sub-envs finished within {timeout} s; "
                    "the step is still pending"
                )
        taken: list[tuple[_Received, _Int]] = []
        need = want
        while need:
            received, sel = ready.popleft()
            if len(sel) > need:
                ready.appendleft((received, sel[need:]))
                sel = sel[:need]
            taken.append((received, sel))
            need -= len(sel)
        return taken

    # ------------------------------------------------------------------ assembling
    def _batch(
        self, taken: list[tuple[_Received, _Int]], order: _Int | None
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """The step's arrays from received pieces, in piece order or reordered by ``order``.

        Raises:
            EnvErrorGroup: Some sub-envs failed; it carries the others' results.
        """
        errors = {
            int(received.ids[k]): received.outcome.errors[k]
            for received, sel in taken
            if received.outcome.errors
            for k in sel.tolist()
            if k in received.outcome.errors
        }
        if errors:
            self._busy[np.concatenate([r.ids[sel] for r, sel in taken])] = False
            raise EnvErrorGroup(
                f"{len(errors)} sub-environment(s) failed", errors, self._per_env(taken)
            )
        same_step = self.autoreset_mode is AutoresetMode.SAME_STEP and any(
            r.fresh is not None for r, _ in taken
        )
        if same_step or any(r.lost is not None for r, _ in taken):
            return self._batch_per_env(taken, order)
        single = len(taken) == 1
        received, sel = taken[0]
        if single and len(sel) == len(received.ids):  # one whole outcome: no copies
            ids, rewards = received.ids, received.rewards.copy()
            terminations, truncations = received.terminated.copy(), received.truncated.copy()
        else:
            ids = np.concatenate([r.ids[sel] for r, sel in taken])
            rewards = np.concatenate([r.rewards[sel] for r, sel in taken])
            terminations = np.concatenate([r.terminated[sel] for r, sel in taken])
            truncations = np.concatenate([r.truncated[sel] for r, sel in taken])
        self._busy[ids] = False
        obs = self._join([self._obs_piece(r, sel) for r, sel in taken])
        rows: _Int | None = None  # None: row k of the batch is row k of the pieces
        if order is not None and not (len(ids) == len(order) and bool((ids == order).all())):
            where = np.empty(self.num_envs, dtype=np.intp)
            where[order] = np.arange(len(order))
            perm = np.argsort(where[ids], kind="stable")  # back to env order
            rewards, terminations, truncations = (
                rewards[perm],
                terminations[perm],
                truncations[perm],
            )
            obs = _take(self.single_observation_space, obs, perm)
            rows = np.empty(len(ids), dtype=np.intp)
            rows[perm] = np.arange(len(ids))
        elif not single:
            rows = np.arange(len(ids))
        chunks = []
        start = 0
        for received, sel in taken:
            count = len(sel)
            at = None if rows is None else rows[start : start + count]
            chunks.extend(self._info_chunks(received.outcome, sel, at))
            start += count
        infos = batch_info_columns(len(ids), chunks)
        return obs, rewards, terminations, truncations, infos

    def _obs_piece(self, received: _Received, sel: _Int) -> Any:
        """The observations at ``sel`` of one outcome, in batched form."""
        outcome = received.outcome
        full = len(sel) == len(received.ids)
        if not received.decoded:
            received.decoded = True
            decode = self._decode_columns
            if decode is not None and outcome.columns is not None and not outcome.errors:
                received.piece = decode(outcome.columns, outcome.numeric, len(outcome.ids))
        piece = received.piece
        if piece is not None:
            return piece if full else _take(self.single_observation_space, piece, sel)
        items = [self._obs_at(outcome, k) for k in sel.tolist()]
        space = self.single_observation_space
        return concatenate(space, items, _empty(space, len(items)))

    def _join(self, pieces: list[Any]) -> Any:
        return _join(self.single_observation_space, pieces)

    def _info_chunks(self, outcome: Outcome, sel: _Int, rows: _Int | None) -> list[InfoColumns]:
        """The infos of the sub-envs at ``sel``, by column, placed at ``rows`` of the batch.

        ``rows`` None: the batch is exactly these sub-envs, in this order.
        """
        if outcome.columns is None:
            return self._row_info_chunks(outcome, sel, rows)
        full = len(sel) == len(outcome.ids)
        chunks: list[InfoColumns] = []
        observed = self._observed
        columns = {
            key: (column if full else _take_column(column, sel))
            for key, column in outcome.columns.items()
            if key not in observed
        }
        if outcome.meta_columns is not None:
            nested = Nested(
                (key, column if full else [column[k] for k in sel.tolist()])
                for key, column in outcome.meta_columns.items()
            )
            if nested:  # every sub-env reports this metadata: the same chunk
                columns["metadata"] = nested
        if columns:
            chunks.append(InfoColumns(rows, columns, outcome.numeric))
        if outcome.meta_columns is None and outcome.meta_rows is not None:
            at = np.arange(len(sel)) if rows is None else rows
            present = [
                (row, meta)
                for row, k in zip(at.tolist(), sel.tolist(), strict=True)
                if (meta := outcome.meta_rows[k])
            ]
            if present:
                chunks.append(
                    InfoColumns(
                        np.array([row for row, _ in present], dtype=np.intp),
                        {"metadata": [meta for _, meta in present]},
                    )
                )
        return chunks

    def _row_info_chunks(self, outcome: Outcome, sel: _Int, rows: _Int | None) -> list[InfoColumns]:
        infos = [self._info_at(outcome, k) for k in sel.tolist()]
        if rows is None:
            rows = np.arange(len(sel))
        chunks = []
        by_keys: dict[tuple[str, ...], list[int]] = {}
        for j, info in enumerate(infos):
            by_keys.setdefault(tuple(info), []).append(j)
        for keys, members in by_keys.items():
            if not keys:
                continue
            chunks.append(
                InfoColumns(
                    rows[members],
                    {key: [infos[j][key] for j in members] for key in keys},
                )
            )
        return chunks

    def _obs_at(self, outcome: Outcome, k: int) -> Any:
        obs = outcome.observation(k)
        assert obs is not None, "a failed sub-env has no observation"
        if self.codec.reads_metadata:
            return self._decode_obs(wire_observation(self.codec, obs, outcome.meta(k)))
        return self._decode_obs(obs)

    def _info_at(self, outcome: Outcome, k: int) -> dict[str, Any]:
        reply = outcome.reply(k)
        return {} if reply is None else reply_info(reply, self.codec.observed)

    def _per_env(self, taken: list[tuple[_Received, _Int]]) -> dict[int, tuple[Any, ...]]:
        """Each succeeded sub-env's (obs, reward, terminated, truncated, info)."""
        results = {}
        for received, sel in taken:
            outcome = received.outcome
            for k in sel.tolist():
                if k in outcome.errors:
                    continue
                lost = received.lost is not None and bool(received.lost[k])
                last, at = received.final[k] if lost else (outcome, k)
                obs = self._obs_at(last, at)
                info = self._info_at(last, at)
                if received.fresh is not None and received.fresh[1][k] >= 0:
                    fresh, at = received.fresh[0], int(received.fresh[1][k])
                    info = {"final_obs": obs, "final_info": info, **self._info_at(fresh, at)}
                    obs = self._obs_at(fresh, at)
                if lost:
                    info["server_lost"] = True
                results[int(received.ids[k])] = (
                    obs,
                    float(received.rewards[k]),
                    bool(received.terminated[k]),
                    bool(received.truncated[k]),
                    info,
                )
        return results

    def _batch_per_env(
        self, taken: list[tuple[_Received, _Int]], order: _Int | None
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """The general (per-env) assembly: SAME_STEP steps that reset some sub-envs."""
        results = self._per_env(taken)
        ids = [int(r.ids[k]) for r, sel in taken for k in sel.tolist()]
        self._busy[ids] = False
        if order is not None:
            rank = {int(i): r for r, i in enumerate(order.tolist())}
            ids = sorted(ids, key=lambda i: rank[i])
        space = self.single_observation_space
        outs = [results[i] for i in ids]
        obs = concatenate(space, [o[0] for o in outs], _empty(space, len(outs)))
        rewards = np.array([o[1] for o in outs], dtype=np.float64)
        terminations = np.array([o[2] for o in outs], dtype=np.bool_)
        truncations = np.array([o[3] for o in outs], dtype=np.bool_)
        return obs, rewards, terminations, truncations, batch_infos([o[4] for o in outs])

    def _check_open(self) -> None:
        if self.closed or self._closing:
            raise EnvClosedError("the vector environment is closed")

    def _closed_meanwhile(self, exc: UsageError) -> None:
        """Raise :class:`EnvClosedError` if ``exc`` is :meth:`close` interrupting a wait."""
        if self._closing and not isinstance(exc, EnvClosedError):
            raise EnvClosedError(f"the vector environment was closed: {exc}") from exc

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
        if self._in_flight or self._ready:
            raise PendingCallError(
                "a step is pending (step_async / send): collect it first",
                "step" if self._step_started else "send",
            )
        seeds = self._seeds(seed)
        opts = dict(options or {})
        mask = self._reset_mask(opts)
        env_ids = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        never = [] if mask is None else np.flatnonzero(~mask & ~self._started).tolist()
        if never:  # their observations would be missing from the batch
            raise UsageError(f"sub-envs {never} were never reset: reset all (no reset_mask) first")
        self._reseed(seeds, env_ids)
        args = []
        for i in env_ids.tolist():
            kwargs = dict(opts)
            if seeds[i] is not None:
                kwargs["seed"] = seeds[i]
            args.append(kwargs)
        with self._call_lock:
            try:
                outcomes = self._dispatcher.run(self._requests("reset", env_ids, args))
                lost = self._recover(outcomes)[0] if self._on_server_loss == "restart" else []
                if any(mask is not None for mask in lost):
                    # reconnected: reset again (fresh sessions, the same seeds)
                    outcomes = self._dispatcher.run(self._requests("reset", env_ids, args))
            except UsageError as exc:
                self._closed_meanwhile(exc)
                raise
            self._lost[env_ids] = False
        received = [self._absorb(outcome) for outcome in outcomes]
        taken = [(r, np.arange(len(r.ids))) for r in received]
        errors = {int(r.ids[k]): e for r in received for k, e in r.outcome.errors.items()}
        if errors:
            raise EnvErrorGroup(f"reset failed in {len(errors)} sub-environment(s)", errors)
        if mask is None:
            obs, _, _, _, infos = self._batch(taken, np.arange(self.num_envs))
            return obs, infos
        _, _, _, _, infos = self._batch(taken, env_ids)
        return self._all_last_obs(), _place(infos, env_ids, self.num_envs)

    def _all_last_obs(self) -> Any:
        """Every sub-env's latest observation, in env order."""
        space = self.single_observation_space
        items = [self._obs_at(self._last[i], int(self._last_at[i])) for i in range(self.num_envs)]
        return concatenate(space, items, _empty(space, self.num_envs))

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every sub-env with its action (ignored for auto-resetting sub-envs)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        """Send the actions of every sub-env; collect with :meth:`step_wait`."""
        self._check_open()
        if self._step_started:
            raise PendingCallError("a step is already pending: call step_wait() first", "step")
        if self._in_flight or self._ready:
            raise PendingCallError(
                "steps sent with send() are not all received: call recv() first", "send"
            )
        self._send(actions, np.arange(self.num_envs))
        self._step_started = True

    def step_wait(self, timeout: float | None = None) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Wait for the step sent by :meth:`step_async` (``timeout`` in seconds).

        Raises:
            WaitTimeoutError: Not done within ``timeout``; the step stays pending (call
                again). Server-side limits are ``timeouts.step``. Also a
                ``multiprocessing.TimeoutError``, as Gymnasium's ``AsyncVectorEnv`` raises.
            EnvErrorGroup: Some sub-envs failed; ``errors`` maps each index to its error.
            NoPendingCallError: No :meth:`step_async` first.
            EnvClosedError: The vector env is closed (or was closed while waiting).
        """
        self._check_open()
        if not self._step_started:
            raise NoPendingCallError("no step pending: call step_async() first", "step")
        with self._call_lock:
            self._check_open()
            taken = self._collect(self.num_envs, timeout)
        self._step_started = False  # every sub-env's reply is consumed: the step is over
        return self._batch(taken, np.arange(self.num_envs))

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
            raise PendingCallError("step_async() is pending: call step_wait() first", "step")
        ids = list(range(self.num_envs)) if env_ids is None else [int(i) for i in env_ids]
        if len(set(ids)) != len(ids) or any(not 0 <= i < self.num_envs for i in ids):
            raise ConfigurationError(
                f"env_ids must be distinct indices in [0, {self.num_envs}), got {reprlib.repr(ids)}"
            )
        chosen = np.asarray(ids, dtype=np.intp)
        busy = chosen[self._busy[chosen]].tolist()
        if busy:
            raise PendingCallError(f"sub-envs {sorted(busy)} already have a step pending", "send")
        self._send(actions, chosen)

    def recv(
        self, batch_size: int | None = None, timeout: float | None = None
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Return the first ``batch_size`` sub-envs whose step finished.

        ``infos["env_id"]`` holds their indices (in the order of the returned arrays).

        Raises:
            WaitTimeoutError: Fewer than ``batch_size`` finished within ``timeout``.
            EnvErrorGroup: Some of the returned sub-envs failed.
            NoPendingCallError: Nothing was sent.
        """
        self._check_open()
        want = self._check_batch_size(batch_size or self.batch_size)
        outstanding = int(self._busy.sum())
        if outstanding == 0:
            raise NoPendingCallError("nothing pending: call send() first", "send")
        with self._call_lock:
            self._check_open()
            taken = self._collect(min(want, outstanding), timeout)
        env_ids = np.concatenate([r.ids[sel] for r, sel in taken])
        obs, rewards, terminations, truncations, infos = self._batch(taken, None)
        infos["env_id"] = env_ids.astype(np.int64)
        return obs, rewards, terminations, truncations, infos

    def _send(self, actions: Any, env_ids: _Int) -> None:
        per_env = self._split_actions(actions, env_ids)
        not_started = env_ids[~self._started[env_ids]].tolist()
        if not_started:
            raise ResetNeededError(f"sub-envs {not_started} were never reset: call reset() first")
        finished = self._autoreset[env_ids]
        if self.autoreset_mode is AutoresetMode.DISABLED and finished.any():
            raise UsageError(
                f"sub-envs {env_ids[finished].tolist()} finished their episode and autoreset "
                "is DISABLED: call reset(options={'reset_mask': ...}) first"
            )
        with self._call_lock:
            self._check_open()
            if self._lost.any():
                env_ids, per_env, finished = self._report_lost(env_ids, per_env, finished)
                if not len(env_ids):
                    return
            resetting = finished if self.autoreset_mode is AutoresetMode.NEXT_STEP else None
            if resetting is None or not resetting.any():
                requests = self._requests("step", env_ids, self._encode(per_env))
            else:
                stepping = np.flatnonzero(~resetting).tolist()
                requests = self._requests("reset", env_ids[resetting], None)
                if stepping:
                    acts = [per_env[j] for j in stepping]
                    requests += self._requests("step", env_ids[stepping], self._encode(acts))
            self._in_flight.extend(self._dispatcher.submit(requests))
        self._busy[env_ids] = True

    def _report_lost(
        self, env_ids: _Int, per_env: list[Any], finished: _Bool
    ) -> tuple[_Int, list[Any], _Bool]:
        """Sub-envs whose server was lost while idle: their step is the loss, now.

        Those about to autoreset just do (on the new server). The others are not sent:
        their result is ready at once (truncated, ``info["server_lost"]``). Returns the
        sub-envs still to send, their actions and their ``finished`` flags.
        """
        flagged = self._lost[env_ids]
        self._lost[env_ids[flagged & finished]] = False
        report = flagged & ~finished
        if not report.any():
            return env_ids, per_env, finished
        lost_ids = env_ids[report]
        self._lost[lost_ids] = False
        gone = Outcome.failed(lost_ids, "step", ConnectionLostError("server lost"))
        gone.errors.clear()
        received = self._absorb(gone, np.ones(len(lost_ids), dtype=np.bool_))
        self._ready.append((received, np.arange(len(lost_ids))))
        self._busy[lost_ids] = True
        keep = np.flatnonzero(~report)
        return env_ids[keep], [per_env[j] for j in keep.tolist()], finished[keep]

    # ------------------------------------------------------------------ extras
    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call a method on every sub-env; supported: ``state``, ``render``."""
        self._check_open()
        if name == "state":
            if self._step_started:
                raise PendingCallError("a step is pending: call step_wait() first", "step")
            if self._in_flight or self._ready:
                raise PendingCallError(
                    "steps sent with send() are pending: call recv() first", "send"
                )
            every = np.arange(self.num_envs)
            with self._call_lock:
                try:
                    outcomes = self._dispatcher.run(self._requests("state", every, None))
                except UsageError as exc:
                    self._closed_meanwhile(exc)
                    raise
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
        if name == "render":
            return self._render_all()
        return self.get_attr(name)

    def info_of(self, i: int) -> dict[str, Any]:
        """Sub-env ``i``'s info from its latest reply, as a single env's ``info``.

        What the batched ``infos`` of ``step`` / ``recv`` hold for it, without unbatching
        them (empty before its first reset).
        """
        outcome = self._last[i]
        return {} if outcome is None else self._info_at(outcome, int(self._last_at[i]))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Return one value per sub-env.

        Known names: ``base_url``, ``protocol``, ``elapsed_steps``, ``np_random``,
        ``np_random_seed``; any other public attribute of the vector env itself is
        repeated N times.
        """
        self._check_open()
        if name in ("np_random", "np_random_seed"):
            return tuple(getattr(self, name))
        if name == "base_url":
            return tuple(self._urls[k] for k in self._shard_of.tolist())
        if name == "protocol":
            return tuple(self.protocols[k] for k in self._shard_of.tolist())
        if name == "elapsed_steps":
            return tuple(self._elapsed.tolist())
        if name.startswith("_") or not hasattr(self, name):
            raise AttributeError(f"sub-environments have no attribute {name!r}")
        return (getattr(self, name),) * self.num_envs

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``max_episode_steps`` (the only settable sub-env attribute)."""
        self._check_open()
        if name != "max_episode_steps":
            raise AttributeError(f"cannot set {name!r} on remote sub-environments")
        if isinstance(values, list | tuple):
            if len(values) != self.num_envs or len(set(values)) != 1:
                raise ConfigurationError("max_episode_steps must be one value for every sub-env")
            values = values[0]
        self.max_episode_steps = values

    def _render_all(self) -> tuple[Any, ...]:
        picture = self.render_mode == "rgb_array" and self.codec.render_rgb is not None
        draw = self.codec.render_rgb if picture else self.codec.render
        assert draw is not None
        frames: list[Any] = []
        for i in range(self.num_envs):
            outcome = self._last[i]
            at = int(self._last_at[i])
            obs = None if outcome is None else outcome.observation(at)
            if obs is None:
                frames.append(None)
                continue
            frames.append(draw(wire_observation(self.codec, obs, outcome.meta(at))))
        return tuple(frames)

    def __enter__(self) -> OpenEnvVectorEnv:
        """``with gymnasium.make_vec(...) as envs:`` closes the vector env on the way out."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def render(self) -> tuple[Any, ...] | None:
        """One frame per sub-env (None without a render mode).

        A text with ``render_mode="ansi"``, an RGB picture with ``"rgb_array"``.
        """
        if self.render_mode is None:
            return None
        return self._render_all()

    def close_extras(self, **kwargs: Any) -> None:
        """Close every connection and stop local servers.

        From another thread while a call waits: that call ends with an
        :class:`~openenv_gym.exceptions.EnvClosedError` first.
        """
        dispatcher = self._dispatcher
        self._closing = True
        if not self._call_lock.acquire(blocking=False):
            dispatcher.interrupt()  # a call is waiting on the sockets: make it return
            self._call_lock.acquire()
        try:
            self._in_flight.clear()
            self._ready.clear()
            dispatcher.close()
        finally:
            self._call_lock.release()
            self._provider.close()

    def __repr__(self) -> str:
        return (
            f"OpenEnvVectorEnv({self.codec.name!r}, num_envs={self.num_envs}, "
            f"protocols={self.protocols})"
        )


# ---------------------------------------------------------------------- helpers


def _empty(space: spaces.Space[Any], n: int) -> Any:
    """A fresh batch buffer (``concatenate`` fills it; Text spaces give a tuple)."""
    buffer = create_empty_array(space, n)
    assert buffer is not None
    return buffer


def _is_scalar(actions: Any) -> bool:
    """Whether ``actions`` is one action rather than a batch (a sequence, array or dict)."""
    if isinstance(actions, np.ndarray):
        return actions.ndim == 0
    if isinstance(actions, str | bytes):
        return True
    return not isinstance(actions, Sequence | Mapping)


def _dict_rows(space: spaces.Dict, batch: Mapping[str, Any], count: int) -> list[Any]:
    """Per-env dicts from a ``Dict`` space's batched form (keys left out stay out)."""
    rows: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, column in batch.items():
        sub = space.spaces.get(key)
        if sub is None:
            raise ActionBatchError(f"unknown action key {key!r}; the space has {list(space)}")
        if isinstance(column, Mapping) and isinstance(sub, spaces.Dict):
            values = _dict_rows(sub, column, count)
        else:
            if _is_scalar(column) and hasattr(column, "__array__"):
                column = np.asarray(column)
            if _is_scalar(column) or len(column) != count:
                got = "one value" if _is_scalar(column) else f"{len(column)} values"
                raise ActionBatchError(
                    f"action key {key!r}: got {got}, need one per sub-environment ({count})"
                )
            values = list(column)
        for row, value in zip(rows, values, strict=True):
            row[key] = value
    return rows


def _take_args(args: Any, chosen: Any) -> Any:
    """Rows or columns of ``args`` at ``chosen`` (a slice or an index array)."""
    if args is None or (isinstance(chosen, slice) and chosen == slice(None)):
        return args
    if isinstance(args, Mapping):
        return {key: _take_column(column, chosen) for key, column in args.items()}
    if isinstance(chosen, slice):
        return args[chosen]
    return [args[k] for k in chosen.tolist()]


def _take_column(column: Any, chosen: Any) -> Any:
    if isinstance(column, np.ndarray) or isinstance(chosen, slice):
        return column[chosen]
    return [column[k] for k in chosen.tolist()]


def _merge_outcomes(outcomes: list[Outcome], ids: _Int) -> Outcome:
    """One outcome over ``ids`` (in order) from several (SAME_STEP's resets)."""
    if len(outcomes) == 1:
        return outcomes[0]
    rows: list[dict[str, Any] | None] = []
    meta: list[dict[str, Any] | None] = []
    errors: dict[int, BaseException] = {}
    for outcome in outcomes:
        for k in range(len(outcome.ids)):
            if k in outcome.errors:
                errors[len(rows)] = outcome.errors[k]
            rows.append(outcome.observation(k))
            meta.append(outcome.meta(k))
    return Outcome(
        ids.tolist(),
        "reset",
        None,
        rows,
        frozenset(),
        np.concatenate([o.rewards for o in outcomes]),
        np.concatenate([o.dones for o in outcomes]),
        None,
        meta,
        errors,
    )


def _place(infos: dict[str, Any], rows: _Int, n: int) -> dict[str, Any]:
    """Infos batched over ``len(rows)`` sub-envs, spread to the rows of an n-env batch."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if isinstance(value, dict):
            out[key] = _place(value, rows, n)
            continue
        if key.startswith("_") and isinstance(value, np.ndarray) and value.dtype == np.bool_:
            mask = np.zeros(n, dtype=np.bool_)
            mask[rows] = value
            out[key] = mask
            continue
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                array = np.full((n, *value.shape[1:]), None, dtype=object)
            else:
                array = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
            array[rows] = value
            out[key] = array
        else:
            out[key] = value
    return out


def _join(space: spaces.Space[Any], pieces: list[Any]) -> Any:
    """Batched observations of several pieces, one after the other."""
    if len(pieces) == 1:
        piece = pieces[0]
        return tuple(piece) if isinstance(piece, list) else piece
    first = pieces[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(pieces)
    if isinstance(space, spaces.Dict):
        return {key: _join(space[key], [p[key] for p in pieces]) for key in space.spaces}
    if isinstance(space, spaces.Tuple):
        return tuple(_join(sub, [p[j] for p in pieces]) for j, sub in enumerate(space.spaces))
    return tuple(item for piece in pieces for item in piece)


def _take(space: spaces.Space[Any], batch: Any, rows: Any) -> Any:
    """Batched observations at ``rows`` (an index array)."""
    if isinstance(batch, np.ndarray):
        return batch[rows]
    if isinstance(space, spaces.Dict):
        return {key: _take(space[key], batch[key], rows) for key in space.spaces}
    if isinstance(space, spaces.Tuple):
        return tuple(_take(sub, batch[j], rows) for j, sub in enumerate(space.spaces))
    items = [batch[k] for k in rows.tolist()]
    return items if isinstance(batch, list) else tuple(items)
