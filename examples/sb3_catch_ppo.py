"""Train Stable-Baselines3 PPO on Catch over one batched vector env; plot the learning curve.

Catch (OpenSpiel's game, as OpenEnv serves it): the ball falls for 9 steps, the paddle
moves left / stays / moves right, and the episode ends +1 if caught, -1 if not. A random
policy scores about -0.6; a trained one +1.0.

SB3 takes its own ``VecEnv``; ``make_sb3_vec_env`` gives one over a single
``OpenEnvVectorEnv``: the sub-envs are sessions on one local server (started for you), all
stepped in one batched frame per step, with SB3's autoreset and ``terminal_observation``
semantics. Read top to bottom:

    python examples/sb3_catch_ppo.py                      # 8 envs, 40k steps, catch.png
    python examples/sb3_catch_ppo.py --num-envs 16 --total-steps 60000
    python examples/sb3_catch_ppo.py --smoke              # a few seconds, no learning claim

Needs the ``sb3`` and ``examples`` extras (stable-baselines3, tyro, matplotlib).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import tyro
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor

from openenv_gym.integrations.sb3 import make_sb3_vec_env


@dataclass
class Args:
    """Train SB3 PPO on openenv/Catch-v0."""

    num_envs: int = 8
    """Sub-environments, stepped together in one batched frame."""
    total_steps: int = 40_000
    """Environment steps of training (all sub-envs together)."""
    seed: int = 0
    """Seed of the policy and of sub-env 0 (sub-env i uses seed + i)."""
    eval_episodes: int = 200
    """Episodes played by the deterministic policy after training."""
    plot: Path | None = Path("catch_sb3.png")
    """Where to write the learning curve (None: no plot)."""
    base_url: str | None = None
    """An existing server; default: start a local one."""
    torch_threads: int | None = None
    """torch's CPU threads (default: the CPUs the local server leaves, at least one)."""
    progress_every: int = 4_096
    """Environment steps between two progress lines."""
    smoke: bool = False
    """A quick run that only checks everything works: 2,048 steps, 20 episodes."""


def torch_threads(requested: int | None, local_servers: int) -> int:
    """Give torch the CPUs the local servers leave free (at least one): on a small machine
    its default (every core) makes training and the servers fight for the same cores."""
    threads = requested or max(1, (os.cpu_count() or 1) - local_servers)
    torch.set_num_threads(threads)
    return threads


class Returns(BaseCallback):
    """Keeps (timestep, episode return) of every finished training episode, and prints a
    progress line every ``every`` steps."""

    def __init__(self, total: int, every: int) -> None:
        super().__init__()
        self.points: list[tuple[int, float]] = []
        self.total, self.every = total, every
        self.next_report = every
        self.started = time.perf_counter()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            episode = info.get("episode")
            if episode is not None:
                self.points.append((self.num_timesteps, float(episode["r"])))
        if self.num_timesteps >= self.next_report:
            self.next_report += self.every
            recent = [r for _, r in self.points[-100:]]
            mean = f"{np.mean(recent):+.2f}" if recent else "n/a"
            seconds = time.perf_counter() - self.started
            print(
                f"step {self.num_timesteps:,}/{self.total:,} "
                f"({100 * self.num_timesteps / self.total:.0f} %): mean return of the last "
                f"{len(recent)} episodes {mean}, {self.num_timesteps / seconds:,.0f} env-steps/s",
                flush=True,
            )
        return True


def evaluate(model: PPO, venv: VecMonitor, episodes: int) -> float:
    """Mean return of the deterministic policy over ``episodes`` episodes."""
    obs = venv.reset()
    returns: list[float] = []
    running = np.zeros(venv.num_envs)
    while len(returns) < episodes:
        actions, _ = model.predict(obs, deterministic=True)
        obs, rewards, dones, _ = venv.step(actions)
        running += rewards
        for i in np.flatnonzero(dones):
            returns.append(float(running[i]))
            running[i] = 0.0
    return float(np.mean(returns[:episodes]))


def plot(points: list[tuple[int, float]], path: Path, title: str) -> None:
    """A moving average of the training returns against timesteps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([p[0] for p in points])
    returns = np.array([p[1] for p in points])
    window = max(1, min(100, len(returns) // 10))
    smooth = np.convolve(returns, np.ones(window) / window, mode="valid")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps[window - 1 :], smooth)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"episode return (mean of {window})")
    ax.set_ylim(-1.05, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args) -> None:
    if args.smoke:
        args.total_steps, args.eval_episodes, args.progress_every = 2_048, 20, 1_024
    threads = torch_threads(args.torch_threads, 0 if args.base_url else 1)
    print(f"torch threads: {threads}")
    kwargs = {} if args.base_url is None else {"base_url": args.base_url}
    venv = VecMonitor(make_sb3_vec_env("openenv/Catch-v0", args.num_envs, seed=args.seed, **kwargs))
    try:
        model = PPO("MlpPolicy", venv, n_steps=128, batch_size=256, seed=args.seed, verbose=0)
        returns = Returns(args.total_steps, args.progress_every)
        started = time.perf_counter()
        model.learn(args.total_steps, callback=returns)
        seconds = time.perf_counter() - started
        print(
            f"trained: {model.num_timesteps} steps in {seconds:.1f} s "
            f"({model.num_timesteps / seconds:,.0f} env-steps/s with training)"
        )
        first = [r for _, r in returns.points[: max(1, len(returns.points) // 10)]]
        print(
            f"training episodes: {len(returns.points)}  first-tenth mean return: "
            f"{np.mean(first):+.2f}"
        )
        print(
            f"eval mean return: {evaluate(model, venv, args.eval_episodes):+.2f} "
            f"over {args.eval_episodes} episodes"
        )
        if args.plot is not None and returns.points:
            plot(returns.points, args.plot, "SB3 PPO on openenv/Catch-v0")
            print(f"learning curve: {args.plot}")
    finally:
        venv.close()


if __name__ == "__main__":
    main(tyro.cli(Args))
