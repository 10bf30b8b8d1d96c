"""Play Wordle in N environments stepped in lockstep; print env-steps/s and the win rate.

The sub-environments run on the embedded local server (started for you) unless
``--base-url`` points at another one; the batched protocol is used when the server
offers it. The policy is a small solver that keeps the secret-word candidates
consistent with the feedback so far (memoised, so after a few episodes it costs a dict
lookup). Episode statistics come from ``RecordEpisodeStatistics`` under NEXT_STEP
autoreset. Read top to bottom:

    python examples/wordle_throughput.py                       # 256 envs, 10 s
    python examples/wordle_throughput.py --num-envs 64 --seconds 5
    python examples/wordle_throughput.py --base-url http://127.0.0.1:8000
    python examples/wordle_throughput.py --smoke                # a few seconds
"""

from __future__ import annotations

import functools
import logging
import re
import time
from dataclasses import dataclass
from typing import Literal

import gymnasium
import numpy as np
import tyro
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import openenv_gym
from openenv_gym_servers.wordle.words import score_guess, secret_words

gymnasium.register_envs(openenv_gym)
logger = logging.getLogger("wordle_throughput")


@dataclass
class Args:
    """Play Wordle in N environments stepped in lockstep; print env-steps/s and the win rate."""

    num_envs: int = 256
    """Sub-environments stepped in lockstep."""
    seconds: float = 10.0
    """How long to play (after a warm-up of a few steps)."""
    seed: int = 0
    """Seed of sub-env 0 (sub-env i uses seed + i)."""
    base_url: str | None = None
    """An existing server; default: start a local one."""
    num_servers: int = 1
    """Local server processes."""
    protocol: Literal["auto", "batch", "json"] | None = None
    """The wire protocol (default: batch where the server offers it)."""
    progress_every: float = 2.0
    """Seconds between two progress lines."""
    smoke: bool = False
    """A quick run: 16 envs, 2 seconds."""


FEEDBACK = re.compile(r"^([A-Z](?: [A-Z]){4})\n([GYX](?: [GYX]){4})$", re.MULTILINE)
History = tuple[tuple[str, tuple[str, ...]], ...]


@functools.cache
def candidates(history: History) -> tuple[str, ...]:
    """Secret words consistent with every (guess, feedback) so far."""
    if not history:
        return secret_words()
    *before, (guess, feedback) = history
    return tuple(w for w in candidates(tuple(before)) if score_guess(guess, w) == feedback)


def next_guess(history: History) -> str:
    guessed = {g for g, _ in history}
    remaining = [w for w in candidates(history) if w not in guessed]
    return (remaining or list(secret_words()))[0]


class Player:
    """One sub-env's solver state: the feedback seen in the current episode."""

    def __init__(self) -> None:
        self.history: History = ()
        self.guess = ""

    def act(self, observation: str) -> str:
        match = FEEDBACK.search(observation)
        if match is not None and self.guess:
            self.history = (*self.history, (self.guess, tuple(match.group(2).split())))
        self.guess = next_guess(self.history)
        return f"[{self.guess}]"


def main(args: Args) -> None:
    if args.smoke:
        args.num_envs, args.seconds = min(args.num_envs, 16), min(args.seconds, 2.0)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    where = {"base_url": args.base_url} if args.base_url else {"num_servers": args.num_servers}
    started = time.perf_counter()
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0", num_envs=args.num_envs, protocol=args.protocol, **where
    )
    envs = RecordEpisodeStatistics(envs)
    logger.info(
        "%d Wordle envs ready in %.2f s (protocols: %s)",
        args.num_envs,
        time.perf_counter() - started,
        ", ".join(envs.unwrapped.protocols),
    )
    players = [Player() for _ in range(args.num_envs)]
    steps = episodes = wins = 0
    env_time = 0.0
    try:
        obs, _ = envs.reset(seed=args.seed)
        done = np.zeros(args.num_envs, dtype=bool)
        start = time.perf_counter()
        next_report = start + args.progress_every
        while time.perf_counter() - start < args.seconds:
            if time.perf_counter() >= next_report:  # progress, every few seconds
                next_report += args.progress_every
                logger.info(
                    "%5.1f s: %d env-steps, %d episodes, %d won",
                    time.perf_counter() - start,
                    steps,
                    episodes,
                    wins,
                )
            for i in np.flatnonzero(done):  # NEXT_STEP: this step resets them
                players[i] = Player()
            actions = [p.act(o) for p, o in zip(players, obs, strict=True)]
            t0 = time.perf_counter()
            obs, _, terminations, truncations, infos = envs.step(actions)
            env_time += time.perf_counter() - t0
            steps += args.num_envs
            done = terminations | truncations
            if "episode" in infos:
                finished = infos["_episode"]
                episodes += int(finished.sum())
                wins += int((infos["episode"]["r"][finished] >= 1.0).sum())
        wall = time.perf_counter() - start
    finally:
        envs.close()
    logger.info("episodes: %d  won: %d (%.1f %%)", episodes, wins, 100 * wins / max(episodes, 1))
    logger.info("env-steps: %d in %.2f s", steps, wall)
    logger.info("env-steps/s (wall, policy included): %.0f", steps / wall)
    logger.info("env-steps/s (inside envs.step):      %.0f", steps / env_time)


if __name__ == "__main__":
    main(tyro.cli(Args))
