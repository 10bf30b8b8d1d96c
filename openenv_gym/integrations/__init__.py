"""Integrations with LLM training and inference stacks.

* :mod:`openenv_gym.integrations.trl`: ``environment_factory`` and a lockstep
  ``rollout_func`` for TRL's ``GRPOTrainer``.
* :mod:`openenv_gym.integrations.vllm`: a vectorized generate -> act loop for vLLM (or any
  ``generate(prompts) -> texts``).
* :mod:`openenv_gym.integrations.text`: how an env maps to tools, text actions and text
  observations.

None of them imports TRL, transformers, torch or vLLM at import time.
"""
