"""TRL's lockstep ``rollout_func``: every rollout of a generation batch steps together.

:func:`vector_rollout_func` makes a :class:`VectorRolloutFunc`: per call, one
:class:`~openenv_gym.vector.OpenEnvVectorEnv` sub-env per prompt, one batched generation
per turn (vLLM through the trainer, or the policy's own ``generate``), the answers parsed
into actions and stepped at once. Environment turns become chat-template tokens
(``_Template``) masked out of the loss. :func:`env_reward` is the reward function
that reads the episode returns it reports.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.integrations.lockstep import Lockstep
from openenv_gym.integrations.text import TextInterface
from openenv_gym.integrations.trl._ids import env_spec

__all__ = ["GenerateFn", "VectorRolloutFunc", "env_reward", "vector_rollout_func"]


def env_reward(completions: Sequence[Any], env_reward: Sequence[float], **_: Any) -> list[float]:
    """A TRL reward function: the episode return that :func:`vector_rollout_func` reports."""
    return [float(r) for r in env_reward]


GenerateFn = Callable[[list[list[int]], int], list[list[int]]]
"""``generate(prompt_token_ids, max_new_tokens) -> completion_token_ids``."""


class _Template:
    """Token ids of an environment turn, cut out of the chat template.

    A conversation with a marker as the assistant's text and then a user turn holding
    the observation is rendered once; what follows the marker (the assistant turn's end,
    the user turn, the next generation prompt) is the template of every env turn.
    """

    MARK = "\x00OPENENV_GYM_MARK\x00"
    OBS = "\x00OPENENV_GYM_OBS\x00"

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any]) -> None:
        try:
            text = tokenizer.apply_chat_template(
                [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "content": self.MARK},
                    {"role": "user", "content": self.OBS},
                ],
                tokenize=False,
                add_generation_prompt=True,
                **chat_template_kwargs,
            )
        except ValueError as exc:  # transformers: the tokenizer has no chat template
            raise ConfigurationError(f"the tokenizer cannot render a chat: {exc}") from exc
        if self.MARK not in text or self.OBS not in text:
            raise ConfigurationError("the chat template does not render plain user/assistant turns")
        after = text[text.index(self.MARK) + len(self.MARK) :]
        self.before_obs, self.after_obs = after.split(self.OBS, 1)
        self.tokenizer = tokenizer

    def ids(self, observation: str, last: int | None) -> list[int]:
        """The env turn's ids after an answer whose last token is ``last``.

        The template closes the assistant's turn itself (``<|im_end|>``, ``<|eot_id|>``,
        ...); when the answer already ended with that very token, it is not repeated.
        """
        ids: list[int] = self.tokenizer(
            self.before_obs + observation + self.after_obs, add_special_tokens=False
        )["input_ids"]
        if ids and last is not None and ids[0] == last:
            return ids[1:]
        return ids


class VectorRolloutFunc:
    """A TRL ``rollout_func``: every rollout of a generation batch steps in lockstep.

    Made by :func:`vector_rollout_func`; call it as TRL does, ``func(prompts, trainer)``.
    """

    def __init__(
        self,
        env_id: str,
        *,
        max_turns: int,
        max_new_tokens: int | None,
        seed: int | None,
        interface: TextInterface | None,
        generate: GenerateFn | None,
        make_kwargs: Mapping[str, Any],
    ) -> None:
        if max_turns < 1:
            raise ConfigurationError(f"max_turns must be >= 1, got {max_turns}")
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ConfigurationError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        env_spec(env_id)
        self.env_id = env_id
        self.max_turns = max_turns
        self.max_new_tokens = max_new_tokens
        self.interface = interface
        self.generate = generate
        self.make_kwargs = dict(make_kwargs)
        self._rng = np.random.default_rng(seed)
        # one vector env per batch size (training and evaluation batches may differ)
        self._lockstep: dict[int, Lockstep] = {}
        self._finalizers: list[weakref.finalize[Any, Any]] = []
        self._last: Lockstep | None = None
        self._template: tuple[Any, _Template] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_lockstep={}, _finalizers=[], _last=None, _template=None)
        return state

    @property
    def envs(self) -> Any:
        """The vector env of the last batch (None before the first call, or once closed)."""
        return None if self._last is None else self._last.envs

    def close(self) -> None:
        """Close the vector envs (also done when collected, and at exit). Idempotent."""
        for finalizer in self._finalizers:
            finalizer()
        self._finalizers, self._lockstep, self._last = [], {}, None

    # ------------------------------------------------------------------ one batch
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """Roll out one episode per prompt (TRL calls this once per generation batch)."""
        tokenizer = trainer.processing_class
        kwargs = dict(getattr(trainer.args, "chat_template_kwargs", None) or {})
        template = self._turn_template(tokenizer, kwargs)
        lockstep = self._ensure_envs(len(prompts))
        # TRL's own choice: num_generations in training, num_generations_eval in evaluation
        training = bool(getattr(trainer.model, "training", True))
        group = trainer.num_generations if training else trainer.num_generations_eval
        texts = lockstep.reset(self._group_seeds(len(prompts), int(group or 1)))
        prompt_ids = [
            self._prompt_ids(tokenizer, p, t, kwargs) for p, t in zip(prompts, texts, strict=True)
        ]
        budget = int(trainer.max_completion_length)
        n = len(prompts)
        completion: list[list[int]] = [[] for _ in range(n)]
        mask: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        turns = [0] * n
        have_logprobs = True
        active = list(range(n))
        while active:
            room = max(budget - len(completion[i]) for i in active)
            limit = min(room, self.max_new_tokens or room)
            new_ids, new_logprobs = self._generate(
                trainer, [prompt_ids[i] + completion[i] for i in active], limit
            )
            have_logprobs = have_logprobs and new_logprobs is not None
            answers: dict[int, str] = {}
            for k, i in enumerate(active):
                ids = list(new_ids[k])[: min(limit, budget - len(completion[i]))]
                completion[i] += ids
                mask[i] += [1] * len(ids)
                logprobs[i] += list(new_logprobs[k][: len(ids)]) if new_logprobs else []
                answers[i] = tokenizer.decode(ids, skip_special_tokens=True)
            results = lockstep.step(answers)
            still = []
            for i in active:
                turns[i] += 1
                turn = results[i]
                if turn.terminated or turn.truncated or turns[i] >= self.max_turns:
                    continue
                last = completion[i][-1] if completion[i] else None
                feedback = template.ids(turn.text, last)
                if len(completion[i]) + len(feedback) >= budget:
                    continue  # no room left for another answer
                completion[i] += feedback
                mask[i] += [0] * len(feedback)
                logprobs[i] += [0.0] * len(feedback)
                still.append(i)
            active = still
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion,
            "logprobs": logprobs if have_logprobs else None,
            "env_mask": mask,
            "env_reward": list(lockstep.returns),
            "num_turns": turns,
        }

    # ------------------------------------------------------------------ helpers
    def _group_seeds(self, n: int, group: int) -> list[int]:
        """One fresh seed per GRPO group: the G rollouts of a prompt play the same task."""
        group = max(1, group)
        seeds = self._rng.integers(0, 2**31 - 1, size=-(-n // group))
        return [int(seeds[i // group]) for i in range(n)]

    def _ensure_envs(self, n: int) -> Lockstep:
        lockstep = self._lockstep.get(n)
        if lockstep is None:
            kwargs = {"autoreset_mode": "Disabled", **self.make_kwargs}
            envs = gymnasium.make_vec(self.env_id, num_envs=n, **kwargs)
            self._finalizers.append(weakref.finalize(self, envs.close))
            lockstep = self._lockstep[n] = Lockstep(envs, self.interface)
        self._last = lockstep
        return lockstep

    def _turn_template(self, tokenizer: Any, kwargs: Mapping[str, Any]) -> _Template:
        if self._template is None or self._template[0] is not tokenizer:
            self._template = (tokenizer, _Template(tokenizer, kwargs))
        return self._template[1]

    @staticmethod
    def _prompt_ids(
        tokenizer: Any, prompt: Any, observation: str, kwargs: Mapping[str, Any]
    ) -> list[int]:
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
        else:
            messages = [dict(m) for m in prompt]
        last = messages[-1]
        content = last.get("content") or ""
        last["content"] = f"{content}\n\n{observation}" if content.strip() else observation
        ids: list[int] = tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, return_dict=False, **kwargs
        )
        return list(ids)

    def _generate(
        self, trainer: Any, inputs: list[list[int]], max_new_tokens: int
    ) -> tuple[list[list[int]], list[list[float]] | None]:
        if self.generate is not None:
            return self.generate(inputs, max_new_tokens), None
        if getattr(trainer, "use_vllm", False):
            _, completions, logprobs, _ = trainer.vllm_generation.generate(
                prompts=inputs, images=None, num_generations=1
            )
            # top-k per token, the sampled one first; vLLM may give none
            if logprobs is None or any(not lp or lp[0] is None for seq in logprobs for lp in seq):
                return completions, None
            return completions, [[float(lp[0]) for lp in seq] for seq in logprobs]
        return _transformers_generate(trainer, inputs, max_new_tokens), None


def _transformers_generate(
    trainer: Any, inputs: list[list[int]], max_new_tokens: int
) -> list[list[int]]:
    """The policy's own ``generate`` (no vLLM): left-padded batch, trainer's sampling."""
    import torch
    from trl.models import unwrap_model_for_generation

    tokenizer = trainer.processing_class
    pad = tokenizer.pad_token_id
    width = max(len(x) for x in inputs)
    device = trainer.accelerator.device
    input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in inputs], device=device)
    attention = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in inputs], device=device)
    config = copy.deepcopy(trainer.generation_config)
    config.max_new_tokens = max_new_tokens
    eos = set(trainer.eos_token_ids)
    with (
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            generation_kwargs=trainer.generation_kwargs,
        ) as model,
        torch.no_grad(),
    ):
        out = model.generate(
            input_ids=input_ids, attention_mask=attention, generation_config=config
        )
    completions = []
    for row in out[:, width:].tolist():
        cut = next((k + 1 for k, t in enumerate(row) if t in eos), len(row))
        completions.append(row[:cut])
    return completions


def vector_rollout_func(
    env_id: str,
    *,
    max_turns: int = 6,
    max_new_tokens: int | None = None,
    seed: int | None = None,
    interface: TextInterface | None = None,
    generate: GenerateFn | None = None,
    **make_kwargs: Any,
) -> VectorRolloutFunc:
    """A TRL ``rollout_func`` stepping every rollout of a batch in lockstep.

    Per call: one :class:`~openenv_gym.vector.OpenEnvVectorEnv` sub-env per prompt (made
    once, reused while the batch size holds), reset with one seed per GRPO group; then per
    turn one batched generation for the rollouts still playing (``trainer.vllm_generation``
    when ``use_vllm``, else the policy's ``generate``), their answers parsed into actions
    and stepped together. Environment turns are appended as chat-template tokens with
    ``env_mask`` 0 (and logprob 0.0).

    Returns (per rollout): ``prompt_ids``, ``completion_ids``, ``logprobs`` (vLLM only, else
    None), ``env_mask``, ``env_reward`` (the episode return; see :func:`env_reward`) and
    ``num_turns``.

    Args:
        env_id: A registered id with a vector entry point (``openenv/Wordle-v0``, ...).
        max_turns: Most model turns per rollout.
        max_new_tokens: Most tokens per turn (default: what is left of the trainer's
            ``max_completion_length``, which bounds the whole rollout).
        seed: Seeds the per-group task seeds (reproducible runs).
        interface: Your own text interface (default: the env's).
        generate: ``generate(prompt_ids, max_new_tokens) -> completion_ids`` instead of
            the trainer's model (a scripted policy, a remote server).
        **make_kwargs: Passed to ``gymnasium.make_vec``.
    """
    return VectorRolloutFunc(
        env_id,
        max_turns=max_turns,
        max_new_tokens=max_new_tokens,
        seed=seed,
        interface=interface,
        generate=generate,
        make_kwargs=make_kwargs,
    )
