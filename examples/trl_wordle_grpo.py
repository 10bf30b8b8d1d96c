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
from dataclasses import dataclass, fields

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROMPT = (
    "You are playing Wordle. Find the secret five-letter word in at most six guesses. "
    "Call the guess tool with one word at a time and use its feedback."
)
LOCKSTEP_PROMPT = "You are playing Wordle. Answer each turn with one guess, like [crane]."


@dataclass
class Args:
    model: str = "Qwen/Qwen3-0.6B"
    """the policy (a Hugging Face model id)"""
    rollout: str = "tools"
    """tools (environment_factory) | lockstep (vector_rollout_func)"""
    steps: int = 200
    """GRPO steps"""
    tasks: int = 1000
    """distinct secret words (the dataset's seed column)"""
    num_generations: int = 8
    """rollouts per GRPO group"""
    batch_size: int = 8
    """per-device train batch size"""
    base_url: str | None = None
    """a running Wordle server; default: start a local one"""
    output_dir: str | None = None
    """where TRL writes (default: a temporary directory)"""
    smoke: bool = False
    """CPU, offline, the tiny random model, 2 steps"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for f in fields(Args):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            parser.add_argument(flag, action="store_true", help=f.name)
        else:
            kind = {"int": int}.get(str(f.type), str)
            parser.add_argument(flag, type=kind, default=f.default)
    args = Args(**vars(parser.parse_args()))
    if args.rollout not in ("tools", "lockstep"):
        parser.error(f"--rollout must be tools or lockstep, got {args.rollout!r}")
    return args


def build(args: Args):
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
        # rows sharing a seed play the same word: the G rollouts of a group are comparable
        factory = environment_factory("openenv/Wordle-v0", **where)
        trainer = GRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=config,
            train_dataset=dataset,
            environment_factory=factory,  # the reward is the game's: get_reward()
        )
    else:
        # the dataset's seed column is not read here: rollout_func sees only prompts, and
        # seeds each GRPO group itself (seed=0: the same tasks on every run)
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
    steps = trainer.state.global_step
    print(f"steps: {steps}  train time: {seconds:.1f} s  steps/s: {steps / seconds:.2f}")
    print(f"reward per step: {', '.join(f'{r:.3f}' for r in rewards)}")
    if args.rollout == "tools":
        calls = [h.get("tools/call_frequency", 0.0) for h in logs]
        print(f"tool calls per rollout: {', '.join(f'{c:.2f}' for c in calls)}")
        factory.close()
    else:
        rollout.close()


if __name__ == "__main__":
    main()
