"""PPO on Catch in one file (cleanrl style) over ``gymnasium.make_vec``; plot the learning curve.

Everything the algorithm needs is here: a small actor-critic MLP, rollouts from a
Gymnasium vector env (``make_vec("openenv/Catch-v0")``: sessions on one local server,
stepped in one batched frame per step), GAE, and the clipped PPO update. The vector env
runs with ``AutoresetMode.SAME_STEP``, so a ``done`` step's observation already starts the
next episode, as the GAE recursion below expects. Read top to bottom:

    python examples/ppo_catch.py                        # 8 envs, 40k steps, catch_ppo.png
    python examples/ppo_catch.py --num-envs 16 --total-steps 60000
    python examples/ppo_catch.py --smoke                # a few seconds, no learning claim

Needs torch and the ``examples`` extra (tyro, matplotlib).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import gymnasium
import numpy as np
import torch
import tyro
from gymnasium.vector import AutoresetMode
from torch import nn

import openenv_gym

gymnasium.register_envs(openenv_gym)


@dataclass
class Args:
    """Train a PPO agent on openenv/Catch-v0."""

    num_envs: int = 8
    """Sub-environments, stepped together in one batched frame."""
    num_steps: int = 128
    """Steps per sub-env in each rollout."""
    total_steps: int = 40_000
    """Environment steps of training (all sub-envs together)."""
    learning_rate: float = 2.5e-3
    """Adam step size."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE's lambda."""
    epochs: int = 4
    """Passes over each rollout."""
    minibatches: int = 4
    """Minibatches per pass."""
    clip: float = 0.2
    """PPO's ratio clip."""
    entropy: float = 0.01
    """Entropy bonus weight."""
    seed: int = 0
    """Seed of torch and of sub-env 0 (sub-env i uses seed + i)."""
    plot: Path | None = Path("catch_ppo.png")
    """Where to write the learning curve (None: no plot)."""
    base_url: str | None = None
    """An existing server; default: start a local one."""
    torch_threads: int | None = None
    """torch's CPU threads (default: the CPUs the local server leaves, at least one)."""
    smoke: bool = False
    """A quick run that only checks everything works: 2 rollouts."""


def torch_threads(requested: int | None, local_servers: int) -> int:
    """Give torch the CPUs the local servers leave free (at least one): on a small machine
    its default (every core) makes training and the servers fight for the same cores."""
    threads = requested or max(1, (os.cpu_count() or 1) - local_servers)
    torch.set_num_threads(threads)
    return threads


class Agent(nn.Module):
    """Actor and critic: two small MLPs over the 50-cell board."""

    def __init__(self, obs_size: int, actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_size, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(obs_size, 64), nn.Tanh(), nn.Linear(64, actions))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(
        self, obs: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


def train(args: Args) -> tuple[list[tuple[int, float]], float]:
    """Train; returns (timestep, episode return) of every episode, and the env-steps/s."""
    torch.manual_seed(args.seed)
    kwargs = {} if args.base_url is None else {"base_url": args.base_url}
    envs = gymnasium.make_vec(
        "openenv/Catch-v0",
        num_envs=args.num_envs,
        autoreset_mode=AutoresetMode.SAME_STEP,
        **kwargs,
    )
    n, steps = args.num_envs, args.num_steps
    obs_size = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_size, int(envs.single_action_space.n))
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    buf_obs = torch.zeros((steps, n, obs_size))
    buf_actions = torch.zeros((steps, n), dtype=torch.long)
    buf_logp, buf_rewards, buf_dones, buf_values = (torch.zeros((steps, n)) for _ in range(4))
    points: list[tuple[int, float]] = []
    running = np.zeros(n)
    timestep, env_seconds = 0, 0.0
    try:
        obs_np, _ = envs.reset(seed=args.seed)
        obs = torch.as_tensor(obs_np, dtype=torch.float32)
        done = torch.zeros(n)
        iterations = max(1, args.total_steps // (n * steps))
        began = time.perf_counter()
        for iteration in range(iterations):
            for t in range(steps):  # ---- rollout
                buf_obs[t], buf_dones[t] = obs, done
                with torch.no_grad():
                    action, logp, _, value = agent.act(obs)
                buf_actions[t], buf_logp[t], buf_values[t] = action, logp, value
                started = time.perf_counter()
                obs_np, reward, terminated, truncated, _ = envs.step(action.numpy())
                env_seconds += time.perf_counter() - started
                ended = np.logical_or(terminated, truncated)
                buf_rewards[t] = torch.as_tensor(reward, dtype=torch.float32)
                obs = torch.as_tensor(obs_np, dtype=torch.float32)
                done = torch.as_tensor(ended, dtype=torch.float32)
                timestep += n
                running += reward
                for i in np.flatnonzero(ended):
                    points.append((timestep, float(running[i])))
                    running[i] = 0.0
            with torch.no_grad():  # ---- GAE (a done step's next obs starts a new episode)
                next_value = agent.value(obs)
                advantages = torch.zeros((steps, n))
                gae = torch.zeros(n)
                for t in reversed(range(steps)):
                    after = next_value if t == steps - 1 else buf_values[t + 1]
                    live = 1.0 - (done if t == steps - 1 else buf_dones[t + 1])
                    delta = buf_rewards[t] + args.gamma * after * live - buf_values[t]
                    gae = delta + args.gamma * args.gae_lambda * live * gae
                    advantages[t] = gae
                returns = advantages + buf_values
            b_obs, b_actions = buf_obs.reshape(-1, obs_size), buf_actions.reshape(-1)
            b_logp, b_adv, b_ret = buf_logp.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
            size = n * steps
            mini = size // args.minibatches
            for _ in range(args.epochs):  # ---- clipped PPO update
                order = torch.randperm(size)
                for start in range(0, size, mini):
                    idx = order[start : start + mini]
                    _, logp, entropy, value = agent.act(b_obs[idx], b_actions[idx])
                    ratio = (logp - b_logp[idx]).exp()
                    adv = b_adv[idx]
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    policy_loss = torch.max(
                        -adv * ratio, -adv * ratio.clamp(1 - args.clip, 1 + args.clip)
                    ).mean()
                    value_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                    loss = policy_loss + 0.5 * value_loss - args.entropy * entropy.mean()
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                    optimizer.step()
            recent = [r for _, r in points[-100:]]  # ---- progress, one line per rollout
            print(
                f"rollout {iteration + 1}/{iterations}: step {timestep:,}, mean return of the "
                f"last {len(recent)} episodes {np.mean(recent) if recent else 0.0:+.2f}, "
                f"{timestep / (time.perf_counter() - began):,.0f} env-steps/s (with training)",
                flush=True,
            )
    finally:
        envs.close()
    return points, timestep / env_seconds if env_seconds else 0.0


def plot(points: list[tuple[int, float]], path: Path) -> None:
    """A moving average of the episode returns against timesteps."""
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
    ax.set_title("PPO (single file) on openenv/Catch-v0")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args) -> None:
    if args.smoke:
        args.total_steps = 2 * args.num_envs * args.num_steps
    threads = torch_threads(args.torch_threads, 0 if args.base_url else 1)
    print(f"torch threads: {threads}")
    points, rate = train(args)
    tenth = max(1, len(points) // 10)
    print(f"episodes: {len(points)}  env-steps/s inside envs.step: {rate:,.0f}")
    print(f"first-tenth mean return: {np.mean([r for _, r in points[:tenth]]):+.2f}")
    print(f"last-tenth mean return: {np.mean([r for _, r in points[-tenth:]]):+.2f}")
    if args.plot is not None and points:
        plot(points, args.plot)
        print(f"learning curve: {args.plot}")


if __name__ == "__main__":
    main(tyro.cli(Args))
