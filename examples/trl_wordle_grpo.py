"""GRPO on Wordle with TRL: the model plays through a `guess(word)` tool, the game scores it.

Real run (a GPU, vLLM colocated with training, Qwen3):

    pip install "openenv-gym[trl]" vllm
    python examples/trl_wordle_grpo.py --model Qwen/Qwen3-0.6B --steps 200

Smoke run (CPU, offline, a tiny random model, well under a minute; its generation is
scripted to call the tool, since a random model never does):

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

import os
import random
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Literal

import tyro

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROMPT = (
    "You are playing Wordle. Find the secret five-letter word in at most six guesses. "
    "Call the guess tool with one word at a time and use its feedback."
)
LOCKSTEP_PROMPT = "You are playing Wordle. Answer each turn with one guess, like [crane]."


@dataclass
class Args:
    """GRPO on Wordle with TRL: the model plays through a guess(word) tool."""

    model: str = "Qwen/Qwen3-0.6B"
    """The policy (a Hugging Face model id)."""
    rollout: Literal["tools", "lockstep"] = "tools"
    """tools: environment_factory; lockstep: vector_rollout_func."""
    steps: int = 200
    """GRPO steps."""
    tasks: int = 1000
    """Distinct secret words (the dataset's seed column)."""
    num_generations: int = 8
    """Rollouts per GRPO group."""
    batch_size: int = 8
    """Per-device train batch size."""
    base_url: str | None = None
    """A running Wordle server; default: start a local one."""
    output_dir: str | None = None
    """Where TRL writes (default: a temporary directory)."""
    torch_threads: int | None = None
    """torch's CPU threads (default: the CPUs the local server leaves, at least one)."""
    smoke: bool = False
    """CPU, offline, the tiny random model (scripted to call the tool), 2 steps."""


def torch_threads(requested: int | None, local_servers: int) -> int:
    """Give torch the CPUs the local servers leave free (at least one): on a small machine
    its default (every core) makes training and the servers fight for the same cores."""
    import torch

    threads = requested or max(1, (os.cpu_count() or 1) - local_servers)
    torch.set_num_threads(threads)
    return threads


WORDS = ("crane", "slate", "audio", "pious", "mound", "light", "brick", "fjord")


def scripted_generate(tokenizer: Any) -> Any:
    """A generate for the smoke run: each turn calls ``guess`` with a word until the game
    says it is over, then answers without a call. The tiny model's own text never calls a
    tool, so without this the tools path would never step the env."""
    import torch

    rng = random.Random(0)
    response = tokenizer.convert_tokens_to_ids("<tool_response>")

    def answer(row: list[int]) -> str:
        last = tokenizer.decode(row).split("<tool_response>")[-1] if response in row else ""
        if "The episode is over" in last or "no more tool calls" in last:
            return "Done.<|im_end|>"
        word = rng.choice(WORDS)
        call = '{"name": "guess", "arguments": {"word": "' + word + '"}}'
        return f"<tool_call>\n{call}\n</tool_call><|im_end|>"

    def generate(input_ids: Any, **_: Any) -> Any:
        ids = [
            tokenizer(answer(row), add_special_tokens=False)["input_ids"]
            for row in input_ids.tolist()
        ]
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([r + [pad] * (width - len(r)) for r in ids])
        return torch.cat([input_ids, tail], dim=-1)

    return generate


def progress_callback(total: int) -> Any:
    """A line per logged step: reward, tool calls and time (TRL's own bar aside)."""
    from transformers import TrainerCallback

    started = time.perf_counter()

    class Progress(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **_: Any) -> None:
            if logs and "reward" in logs:
                calls = logs.get("tools/call_frequency")
                tools = "" if calls is None else f", tool calls per rollout {calls:.2f}"
                print(
                    f"step {state.global_step}/{total}: reward {logs['reward']:.3f}{tools} "
                    f"({time.perf_counter() - started:.1f} s)",
                    flush=True,
                )

    return Progress()


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


def main(args: Args) -> None:
    from datasets import Dataset
    from trl import GRPOTrainer

    from openenv_gym.integrations.trl import env_reward, environment_factory, vector_rollout_func

    threads = torch_threads(args.torch_threads, 0 if args.base_url else 1)
    print(f"torch threads: {threads}")
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
    trainer.add_callback(progress_callback(config.max_steps))
    if args.smoke and args.rollout == "tools":
        trainer.model.generate = scripted_generate(tokenizer)
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
    main(tyro.cli(Args))
