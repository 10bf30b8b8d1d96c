"""Evaluate a model on N Wordle games at once: one batched vLLM generation per turn.

    pip install "openenv-gym[trl]" vllm
    python examples/vllm_wordle.py --model Qwen/Qwen3-0.6B --num-envs 64

    python examples/vllm_wordle.py --smoke      # CPU, offline, tiny random model

Each turn, every game still running becomes a chat prompt; all of them go to the model in
one ``generate`` call; each answer's ``[word]`` is the guess; the games step together
(``openenv_gym.integrations.vllm.play`` over an ``OpenEnvVectorEnv``). The servers start
locally unless ``--base-url`` points at one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import gymnasium
import tyro

import openenv_gym
from openenv_gym.integrations.vllm import play, transformers_generate, vllm_generate

gymnasium.register_envs(openenv_gym)


@dataclass
class Args:
    """Evaluate a model on N Wordle games at once: one batched generation per turn."""

    model: str = "Qwen/Qwen3-0.6B"
    """The model vLLM serves."""
    num_envs: int = 64
    """Games played at once."""
    seed: int = 0
    """Seed of game 0 (game i uses seed + i)."""
    max_tokens: int = 256
    """Most tokens per answer."""
    base_url: str | None = None
    """A running Wordle server; default: start a local one."""
    torch_threads: int | None = None
    """torch's CPU threads with --smoke (default: the CPUs the local server leaves, >= 1)."""
    smoke: bool = False
    """CPU, offline, the tiny random model, 4 games."""


def torch_threads(requested: int | None, local_servers: int) -> int:
    """Give torch the CPUs the local servers leave free (at least one): on a small machine
    its default (every core) makes training and the servers fight for the same cores."""
    import torch

    threads = requested or max(1, (os.cpu_count() or 1) - local_servers)
    torch.set_num_threads(threads)
    return threads


def main(args: Args) -> None:
    template: dict[str, object] = {}
    if args.smoke:
        from openenv_gym.integrations.tiny import tiny_model, tiny_tokenizer

        threads = torch_threads(args.torch_threads, 0 if args.base_url else 1)
        print(f"torch threads: {threads}")

        tokenizer = tiny_tokenizer()
        generate = transformers_generate(tiny_model(tokenizer), tokenizer, max_new_tokens=16)
        num_envs = 4
    else:
        from vllm import LLM, SamplingParams

        llm = LLM(args.model)
        tokenizer = llm.get_tokenizer()
        params = SamplingParams(max_tokens=args.max_tokens, temperature=0.7)
        generate = vllm_generate(llm, params)
        template = {"enable_thinking": False}
        num_envs = args.num_envs
    where = {"base_url": args.base_url} if args.base_url else {}
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=num_envs, **where)
    try:
        start = time.perf_counter()
        episodes = play(
            envs,
            generate,
            tokenizer=tokenizer,
            seed=list(range(args.seed, args.seed + num_envs)),
            max_turns=12,
            chat_template_kwargs=template,
        )
        seconds = time.perf_counter() - start
    finally:
        envs.close()
    turns = sum(len(e.turns) for e in episodes)
    wins = sum(e.reward == 1.0 for e in episodes)
    print(f"games: {len(episodes)}  finished: {sum(e.done for e in episodes)}  won: {wins}")
    print(f"mean return: {sum(e.reward for e in episodes) / len(episodes):.3f}")
    print(f"env-steps (turns): {turns}  time: {seconds:.1f} s  steps/s: {turns / seconds:.1f}")
    print("first game:")
    for message in episodes[0].messages[-4:]:
        print(f"  {message['role']}: {message['content'][:100]!r}")


if __name__ == "__main__":
    main(tyro.cli(Args))
