"""Per sub-env episode bookkeeping: elapsed steps, the time limit, autoreset, lost servers, seeds.

:class:`Episodes` holds one entry per sub-environment, as numpy arrays over the whole
batch, and applies Gymnasium's rules to each reply that comes back
(:meth:`Episodes.absorb`): a reset starts an episode; a step counts, truncates at
``max_episode_steps`` as ``gymnasium.wrappers.TimeLimit`` does (whether or not it also
terminated), and marks the sub-env for autoreset when its episode ended; a sub-env whose
server was lost is reported truncated, from its last reply. A single env is one sub-env:
:meth:`Episodes.absorb_reply` applies the same rules to one reply, without arrays.

Nothing here does I/O: the engine (:mod:`openenv_gym.vector.engine`) feeds it outcomes.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium.error
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

from openenv_gym.exceptions import ArgumentTypeError, ConfigurationError, ConnectionLostError
from openenv_gym.protocol.openenv import ObservationReceived
from openenv_gym.transport.outcome import Outcome

__all__ = ["Episodes", "Lost", "Received", "check_seed"]

Int = np.ndarray[Any, np.dtype[np.intp]]
Bool = np.ndarray[Any, np.dtype[np.bool_]]

_UNDECODED: Any = object()

_SEED_RULE = "a non-negative integer (an int or a numpy integer, not a bool) or None"


def check_seed(seed: Any, name: str = "seed") -> int | None:
    """``seed`` as an ``int``, or None: the one seed rule of every env.

    >>> check_seed(np.int64(3)), check_seed(None)
    (3, None)

    Raises:
        ArgumentTypeError: Not an integer (a float, a str, a bool...).
        ConfigurationError: A negative integer.
    """
    if seed is None:
        return None
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer):
        raise ArgumentTypeError(f"{name} must be {_SEED_RULE}, got {reprlib.repr(seed)}")
    if seed < 0:
        raise ConfigurationError(f"{name} must be {_SEED_RULE}, got {seed}")
    return int(seed)


@dataclass(slots=True)
class Lost:
    """Positions of an outcome whose server was lost: truncated, from their last reply.

    Attributes:
        mask: Which positions.
        final: Position -> the outcome and position of that sub-env's last reply.
    """

    mask: Bool
    final: dict[int, tuple[Outcome, int]]


@dataclass(slots=True)
class Received:
    """One outcome after its sub-envs' bookkeeping: what a step returns for them.

    Attributes:
        outcome: The transport's outcome (columns, rewards, dones, errors).
        ids: Its sub-envs, as an array.
        ok: Which of them succeeded (a lost one counts as ``ok``: it returns a result).
        rewards: Rewards as the step returns them (0.0 for resets and missing rewards).
        terminated, truncated: As the step returns them.
        fresh: SAME_STEP autoreset: the outcome of the reset that followed the step, and
            each position's place in it (-1: not reset).
        lost: Positions whose server was lost, or None.
        piece: The decoded observations of every position (filled on first use).
    """

    outcome: Outcome
    ids: Int
    ok: Bool
    rewards: np.ndarray[Any, np.dtype[np.float64]]
    terminated: Bool
    truncated: Bool
    fresh: tuple[Outcome, Int] | None = None
    lost: Lost | None = None
    piece: Any = field(default=_UNDECODED)

    @property
    def decoded(self) -> bool:
        """Whether :attr:`piece` was worked out (it may be None: no columnar decode)."""
        return self.piece is not _UNDECODED

    def ended(self) -> Bool:
        """Positions whose episode ended with this outcome (and that succeeded)."""
        return (self.terminated | self.truncated) & self.ok


class Episodes:
    """The episodes of ``num_envs`` sub-envs (see the module docstring).

    Args:
        num_envs: How many sub-envs.
        max_episode_steps: The time limit (None: none); settable later.
        autoreset_mode: What an ended episode does at the next step.

    Attributes:
        elapsed: Steps of each sub-env's episode.
        ended: Each sub-env's episode ended (autoreset due, or a reset needed).
        started: Each sub-env was reset at least once.
        busy: Each sub-env has a request out whose result was not returned yet.
        lost: Each sub-env's server was lost while it was idle (its next step says so).
    """

    def __init__(
        self, num_envs: int, max_episode_steps: int | None, autoreset_mode: AutoresetMode
    ) -> None:
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.autoreset_mode = autoreset_mode
        self.elapsed = np.zeros(num_envs, dtype=np.int64)
        self.ended = np.zeros(num_envs, dtype=np.bool_)
        self.started = np.zeros(num_envs, dtype=np.bool_)
        self.busy = np.zeros(num_envs, dtype=np.bool_)
        self.lost = np.zeros(num_envs, dtype=np.bool_)
        # each sub-env's latest reply: an outcome and the position in it (or one reply)
        self.last: np.ndarray[Any, np.dtype[np.object_]] = np.empty(num_envs, dtype=object)
        self.last_at = np.zeros(num_envs, dtype=np.intp)
        # per sub-env: (np_random, its seed), as each of SyncVectorEnv's envs holds them
        self.rngs: list[tuple[np.random.Generator, int] | None] = [None] * num_envs

    # ------------------------------------------------------------------ seeds
    def seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """One seed per sub-env: ``seed + i`` from an int, a list as it is, or None.

        Raises:
            ArgumentTypeError: Not an integer, a list of them (or None) or None.
            ConfigurationError: A negative seed, or a list of the wrong length.
        """
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, int | np.integer) and not isinstance(seed, bool | np.bool_):
            start = check_seed(seed)
            assert start is not None
            return [start + i for i in range(n)]
        if isinstance(seed, str | bytes | Mapping) or not isinstance(seed, Sequence | np.ndarray):
            raise ArgumentTypeError(
                f"seed must be {_SEED_RULE}, or a list of them, one per sub-environment; "
                f"got {reprlib.repr(seed)}"
            )
        seeds = list(seed)
        if len(seeds) != n:
            raise ConfigurationError(
                f"If seeds are passed as a list the length must match num_envs={n} "
                f"but got length={len(seeds)}."
            )
        return [check_seed(s, f"seed[{i}]") for i, s in enumerate(seeds)]

    def reseed(self, seeds: list[int | None], env_ids: Int) -> None:
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
            self.rngs[i] = pair

    def sub_rngs(self) -> list[tuple[np.random.Generator, int]]:
        """Per sub-env, its generator and seed (a random seed on first use if never seeded)."""
        rngs = self.rngs
        made = []
        for i, pair in enumerate(rngs):
            if pair is None:
                pair = rngs[i] = seeding.np_random()
            made.append(pair)
        return made

    # ------------------------------------------------------------------ the rules
    def absorb(self, outcome: Outcome, lost: Bool | None = None) -> Received:
        """Apply the rules to one outcome's sub-envs (numpy over the outcome).

        ``lost``: positions whose server was lost (they have no result: truncated, from
        their last reply).
        """
        ids = np.asarray(outcome.ids, dtype=np.intp)
        n = len(ids)
        ok = np.ones(n, dtype=np.bool_)
        if outcome.errors or lost is not None:
            ok[list(outcome.errors)] = False
            if lost is not None:
                ok &= ~lost
            good = ids[ok]
            self.last_at[good] = np.flatnonzero(ok)
        else:
            good = ids
            self.last_at[ids] = np.arange(n)
        final: dict[int, tuple[Outcome, int]] = {}
        if lost is not None:  # their last reply, before a SAME_STEP reset replaces it
            final = {
                k: (self.last[i], int(self.last_at[i]))
                for k, i in zip(np.flatnonzero(lost).tolist(), ids[lost].tolist(), strict=True)
            }
        self.last[good] = outcome
        if outcome.op == "reset":
            self.elapsed[good] = 0
            self.ended[good] = False
            self.started[good] = True
            zeros = np.zeros(n, dtype=np.bool_)
            received = Received(outcome, ids, ok, np.zeros(n), zeros, zeros)
            return received if lost is None else self._with_lost(received, Lost(lost, final))
        elapsed = self.elapsed[ids] + 1
        limit = self.max_episode_steps
        # as gymnasium's TimeLimit: the limit truncates, whether or not the step terminated
        if not ok.all():
            self.elapsed[good] = elapsed[ok]
            terminated = outcome.dones & ok
            truncated = (elapsed >= limit) & ok if limit is not None else np.zeros(n, np.bool_)
            self.ended[good] = (terminated | truncated)[ok]
        else:
            self.elapsed[ids] = elapsed
            terminated = outcome.dones
            truncated = elapsed >= limit if limit is not None else np.zeros(n, np.bool_)
            self.ended[ids] = terminated | truncated if limit is not None else terminated
        rewards = outcome.rewards
        if np.isnan(rewards).any():
            rewards = np.where(np.isnan(rewards), 0.0, rewards)
        received = Received(outcome, ids, ok, rewards, terminated, truncated)
        return received if lost is None else self._with_lost(received, Lost(lost, final))

    def _with_lost(self, received: Received, lost: Lost) -> Received:
        """Mark ``lost`` positions: truncated (reward 0) from their last reply; autoreset."""
        mask = lost.mask
        received.ok = received.ok | mask
        received.terminated = received.terminated & ~mask
        received.truncated = received.truncated | mask
        received.rewards = np.where(mask, 0.0, received.rewards)
        received.lost = lost
        self.ended[received.ids[mask]] = True
        return received

    def lost_while_idle(self, ids: Int) -> Received:
        """The result of sub-envs whose server was lost while they were idle: truncated."""
        self.lost[ids] = False
        gone = Outcome.failed(ids, "step", ConnectionLostError("server lost"))
        gone.errors.clear()
        return self.absorb(gone, np.ones(len(ids), dtype=np.bool_))

    def absorb_reply(self, i: int, op: str, reply: ObservationReceived) -> tuple[bool, bool]:
        """The rules for one reply of sub-env ``i`` (a single env): ``(terminated, truncated)``.

        A reset starts the episode (a reset that says ``done`` leaves it ended); a step
        counts and truncates as :meth:`absorb` does.
        """
        self.last[i] = reply  # a reply needs no position (last_at)
        if op == "reset":
            self.elapsed[i] = 0
            self.started[i] = True
            self.ended[i] = reply.done
            return False, False
        elapsed = self.elapsed.item(i) + 1
        self.elapsed[i] = elapsed
        terminated = bool(reply.done)
        limit = self.max_episode_steps
        truncated = limit is not None and elapsed >= limit
        if terminated or truncated:
            self.ended[i] = True
        return terminated, truncated

    def lost_reply(self, i: int) -> ObservationReceived | None:
        """Sub-env ``i`` lost its server: its episode ended; its last reply (None: none)."""
        self.ended[i] = True
        return self.reply_of(i)

    # ------------------------------------------------------------------ reading
    def reply_of(self, i: int) -> ObservationReceived | None:
        """Sub-env ``i``'s latest reply as one OpenEnv reply (None before its first)."""
        last = self.last[i]
        if last is None or isinstance(last, ObservationReceived):
            return last
        assert isinstance(last, Outcome)
        return last.reply(int(self.last_at[i]))
