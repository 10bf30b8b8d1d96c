"""Vectorized LLM play: observations -> chat prompts -> one ``generate`` -> actions -> step.

For custom generation loops (evaluation, rejection sampling, data collection) with vLLM::

    import gymnasium, openenv_gym
    from vllm import LLM, SamplingParams
    from openenv_gym.integrations.vllm import play, vllm_generate

    llm = LLM("Qwen/Qwen3-0.6B")
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=64)
    episodes = play(envs, vllm_generate(llm, SamplingParams(max_tokens=64)),
                    tokenizer=llm.get_tokenizer(), seed=0)
    print(sum(e.reward for e in episodes) / len(episodes))

Each turn renders the chat of every episode still running, makes **one** ``generate``
call for all of them, parses each answer into an action and steps those sub-envs together
(:class:`~openenv_gym.integrations.lockstep.Lockstep`). ``generate`` is any
``(prompts: list[str]) -> list[str]``: :func:`vllm_generate` wraps a ``vllm.LLM``,
:func:`transformers_generate` a Hugging Face model (CPU works).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openenv_gym.exceptions import ConfigurationError, UsageError
from openenv_gym.integrations.lockstep import Lockstep, Turn
from openenv_gym.integrations.text import TextInterface

__all__ = ["Episode", "play", "transformers_generate", "vllm_generate"]

Generate = Callable[[list[str]], Sequence[str]]
"""``generate(prompts) -> texts``: one completion per prompt, in order."""


@dataclass
class Episode:
    """One sub-env's episode, as played by :func:`play`.

    Attributes:
        messages: The chat: system (if any), the first observation, then model answers
            and observations in turn.
        turns: What each answer did (the step's text, reward, ends, action, info).
        reward: The episode return.
        terminated: The env ended the episode.
        truncated: The env cut it short (a step limit).
    """

    messages: list[dict[str, str]]
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def done(self) -> bool:
        """The episode ended (else :func:`play` stopped at ``max_turns``)."""
        return self.terminated or self.truncated


def play(
    envs: Any,
    generate: Generate,
    *,
    tokenizer: Any,
    seed: int | Sequence[int | None] | None = None,
    max_turns: int = 32,
    system_prompt: str | None = None,
    interface: TextInterface | None = None,
    chat_template_kwargs: dict[str, Any] | None = None,
) -> list[Episode]:
    """Play one episode in every sub-env of ``envs``, the model answering in text.

    Args:
        envs: A ``gymnasium.vector.VectorEnv`` (an ``OpenEnvVectorEnv`` steps only the
            sub-envs still playing).
        generate: ``(prompts) -> texts``; see :func:`vllm_generate`,
            :func:`transformers_generate`.
        tokenizer: Renders the chats (``apply_chat_template``).
        seed: Reset seed(s).
        max_turns: Most model turns per episode.
        system_prompt: The system message (default: how to answer, from the env's
            interface; ``""``: none).
        interface: Your own text interface (default: the env's).
        chat_template_kwargs: More ``apply_chat_template`` arguments (e.g.
            ``{"enable_thinking": False}``).

    Raises:
        UsageError: ``generate`` returned the wrong number of texts.
        EnvErrorGroup: Stepping some sub-envs failed.
    """
    if max_turns < 1:
        raise ConfigurationError(f"max_turns must be >= 1, got {max_turns}")
    lockstep = Lockstep(envs, interface)
    system = lockstep.interface.instructions if system_prompt is None else system_prompt
    template_kwargs = dict(chat_template_kwargs or {})
    head = [{"role": "system", "content": system}] if system else []
    episodes = [
        Episode([*head, {"role": "user", "content": text}]) for text in lockstep.reset(seed)
    ]
    active = list(range(len(episodes)))
    for _ in range(max_turns):
        if not active:
            break
        prompts = [
            tokenizer.apply_chat_template(
                episodes[i].messages, tokenize=False, add_generation_prompt=True, **template_kwargs
            )
            for i in active
        ]
        answers = list(generate(prompts))
        if len(answers) != len(prompts):
            raise UsageError(f"generate returned {len(answers)} texts for {len(prompts)} prompts")
        for i, answer in zip(active, answers, strict=True):
            episodes[i].messages.append({"role": "assistant", "content": answer})
        results = lockstep.step(dict(zip(active, answers, strict=True)))
        still = []
        for i in active:
            turn, episode = results[i], episodes[i]
            episode.turns.append(turn)
            episode.reward = lockstep.returns[i]
            episode.terminated, episode.truncated = turn.terminated, turn.truncated
            if not episode.done:
                episode.messages.append({"role": "user", "content": turn.text})
                still.append(i)
        active = still
    return episodes


def vllm_generate(llm: Any, sampling_params: Any = None) -> Generate:
    """A ``generate`` for :func:`play` over a ``vllm.LLM`` (one batched call per turn)."""

    def generate(prompts: list[str]) -> list[str]:
        outputs = llm.generate(prompts, sampling_params, use_tqdm=False)
        return [output.outputs[0].text for output in outputs]

    return generate


def transformers_generate(model: Any, tokenizer: Any, **generate_kwargs: Any) -> Generate:
    """A ``generate`` for :func:`play` over a Hugging Face causal LM (CPU or GPU).

    Prompts are left-padded into one batch; ``generate_kwargs`` go to ``model.generate``
    (default ``max_new_tokens=32``, sampling on).
    """
    kwargs = {"max_new_tokens": 32, "do_sample": True, **generate_kwargs}

    def generate(prompts: list[str]) -> list[str]:
        import torch

        side = tokenizer.padding_side
        tokenizer.padding_side = "left"
        try:
            batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            tokenizer.padding_side = side
        batch = batch.to(model.device)
        with torch.no_grad():
            out = model.generate(**batch, pad_token_id=tokenizer.pad_token_id, **kwargs)
        new = out[:, batch["input_ids"].shape[1] :]
        return list(tokenizer.batch_decode(new, skip_special_tokens=True))

    return generate
