"""Play Wordle through Gymnasium against the embedded local server; print env-steps/s.

The policy is a small solver: it keeps the secret-word candidates consistent with the
feedback so far and guesses the first one. Read top to bottom:

    python examples/wordle_throughput.py                 # starts its own local server
    python examples/wordle_throughput.py --base-url http://127.0.0.1:8000
    python examples/wordle_throughput.py --smoke          # a few seconds
"""

from __future__ import annotations

import argparse
import logging
import re
import time
from dataclasses import dataclass, fields

import gymnasium

import openenv_gym
from openenv_gym_servers.wordle.words import score_guess, secret_words

gymnasium.register_envs(openenv_gym)
logger = logging.getLogger("wordle_throughput")


@dataclass
class Args:
    episodes: int = 200
    """episodes to play"""
    seed: int = 0
    """seed of the first episode (episode i uses seed + i)"""
    base_url: str | None = None
    """an existing server; default: start a local one"""
    protocol: str | None = None
    """auto | batch | json"""
    smoke: bool = False
    """a quick run (20 episodes)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, action="store_true")
        else:
            kind = int if f.type == "int" else str
            parser.add_argument(flag, type=kind, default=f.default)
    return Args(**vars(parser.parse_args()))


FEEDBACK = re.compile(r"^([A-Z](?: [A-Z]){4})\n([GYX](?: [GYX]){4})$", re.MULTILINE)


class Solver:
    """Guess the first candidate consistent with every feedback seen."""

    def __init__(self) -> None:
        self.candidates = list(secret_words())
        self.guess = ""

    def act(self, observation: str) -> str:
        match = FEEDBACK.search(observation)
        if match and self.guess:
            feedback = tuple(match.group(2).split())
            guessed = match.group(1).replace(" ", "").lower()
            self.candidates = [w for w in self.candidates if score_guess(guessed, w) == feedback]
        remaining = [w for w in self.candidates if w != self.guess] or list(secret_words())
        self.guess = remaining[0]
        return f"[{self.guess}]"


def main() -> None:
    args = parse_args()
    if args.smoke:
        args.episodes = min(args.episodes, 20)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    kwargs = {"base_url": args.base_url} if args.base_url else {}
    env = gymnasium.make("openenv/Wordle-v0", protocol=args.protocol, **kwargs)
    env = gymnasium.wrappers.RecordEpisodeStatistics(env)
    wins = steps = 0
    env_time = 0.0
    start = time.perf_counter()
    try:
        for episode in range(args.episodes):
            t0 = time.perf_counter()
            obs, _ = env.reset(seed=args.seed + episode)
            env_time += time.perf_counter() - t0
            solver = Solver()
            done = False
            while not done:
                action = solver.act(obs)
                t0 = time.perf_counter()
                obs, _reward, terminated, truncated, info = env.step(action)
                env_time += time.perf_counter() - t0
                steps += 1
                done = terminated or truncated
            wins += info["episode"]["r"] >= 1.0
    finally:
        env.close()
    wall = time.perf_counter() - start
    logger.info("protocol: %s", env.unwrapped.protocol)
    logger.info("episodes: %d  wins: %d (%.0f %%)", args.episodes, wins, 100 * wins / args.episodes)
    logger.info("env-steps: %d  wall: %.2f s", steps, wall)
    logger.info("env-steps/s (wall, incl. the solver): %.0f", steps / wall)
    logger.info("env-steps/s (time inside reset/step): %.0f", steps / env_time)


if __name__ == "__main__":
    main()
