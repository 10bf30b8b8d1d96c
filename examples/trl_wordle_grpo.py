"""GRPO on Wordle with TRL: the model plays through a `guess(word)` tool, the game scores it.

Real run (a GPU, vLLM colocated with training, Qwen3):

    pip install "openenv-gym[trl]" vllm
    python examples/trl_wordle_grpo.py --model Qwen/Qwen3-0.6B --steps 200

Smoke run (CPU, offline, a tiny random model, well under a minute):

    python examples/trl_wordle_grpo.py --smoke

Two ways to roll out, same env:

* ``--rollout tools`` (default): ``environment_factory``. TRL owns the multi-turn loop: it
  generates, parses tool calls, calls ``guess`` on each rollout's own Wordle session and
  trains on the whole exchange (tool results masked out). Rows sharing a ``seed`` play the
  same secret word, so the ``num_generations`` rollouts of one GRPO group are comparable.
* ``--rollout lockstep``: ``vector_rollout_func``. All rollouts of a generation batch step
  together through one ``OpenEnvVectorEnv``: one batched generation per turn, the answers'
  ``[word]`` guesses stepped in one request per server.

The Wordle servers start locally (no Docker, no URL); ``--base-url`` uses a running one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROMPT = (
    "You are playing Wordle. Find the secret five-letter word in at most six guesses. "
    "Call the guess tool with one word at a time and use its feedback."
)
LOCKSTEP_PROMPT = "You are playing Wordle. Answer each turn with one guess, like [crane]."


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="Qwen/Qwen3-0.6B")
    p.add_argument("--rollout", choices=["tools", "lockstep"], default="tools")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--tasks", type=int, default=1000, help="distinct secret words (seeds)")
    p.add_argument("--num-generations", type=int, default=8, help="rollouts per GRPO group")
    p.add_argument("--batch-size", type=int, default=8, help="per-device train batch size")
    p.add_argument("--base-url", default=None, help="a running Wordle server (default: local)")
    p.add_argument("--output-dir", default=None)
    p.add_argument("--smoke", action="store_true", help="CPU, offline, tiny model, 2 steps")
    return p.parse_args()


def build(args: argparse.Namespace):
    """The model, tokenizer and GRPOConfig: Qwen3 + vLLM colocate, or the tiny CPU model."""
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="trl-wordle-")
    if args.smoke:
        from openenv_gym.integrations.tiny import cpu_grpo_config, tiny_model, tiny_tokenizer

        os.environ["HF_HUB_OFFLINE"] = "1"
        tokenizer = tiny_tokenizer()
        config = cpu_grpo_config(
            output_dir,
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=2,
            max_completion_length=128,
            max_tool_calling_iterations=6,
        )
        return tiny_model(tokenizer), tokenizer, config

    from transformers import AutoTokenizer
    from trl import GRPOConfig

    config = GRPOConfig(
        output_dir=output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch_size,
        num_generations=args.num_generations,
        gradient_accumulation_steps=1,
        learning_rate=1e-6,
        max_completion_length=1024,
        max_tool_calling_iterations=6,  # Wordle allows six guesses
        chat_template_kwargs={"enable_thinking": False},
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.3,
        logging_steps=1,
        report_to="none",
        bf16=True,
    )
    return args.model, AutoTokenizer.from_pretrained(args.model), config


def main() -> None:
    args = parse_args()
    from datasets import Dataset
    from trl import GRPOTrainer

    from openenv_gym.integrations.trl import env_reward, environment_factory, vector_rollout_func

    model, tokenizer, config = build(args)
    tasks = 8 if args.smoke else args.tasks
    prompt = PROMPT if args.rollout == "tools" else LOCKSTEP_PROMPT
    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": prompt}]] * tasks, "seed": list(range(tasks))}
    )
    where = {"base_url": args.base_url} if args.base_url else {}
    if args.rollout == "tools":
        factory = environment_factory("openenv/Wordle-v0", **where)
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            environment_factory=factory,  # the reward is the game's: get_reward()
        )
    else:
        rollout = vector_rollout_func("openenv/Wordle-v0", max_turns=6, seed=0, **where)
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            reward_funcs=[env_reward],
            args=config,
            train_dataset=dataset,
            rollout_func=rollout,
        )
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    logs = [h for h in trainer.state.log_history if "reward" in h]
    rewards = [h["reward"] for h in logs]
    print(f"rollout: {args.rollout}")
    print(f"steps: {trainer.state.global_step}  train time: {seconds:.1f} s")
    print(f"reward per step: {', '.join(f'{r:.3f}' for r in rewards)}")
    if args.rollout == "tools":
        calls = [h.get("tools/call_frequency", 0.0) for h in logs]
        print(f"tool calls per rollout: {', '.join(f'{c:.2f}' for c in calls)}")
        factory.close()
    else:
        rollout.close()


if __name__ == "__main__":
    main()
