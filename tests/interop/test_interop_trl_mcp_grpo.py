"""TRL's real ``GRPOTrainer`` (CPU, tiny offline model) with the tools of an MCP server.

The server is the two-tool walk of :mod:`openenv_mcp_envs` on OpenEnv's own
``MCPEnvironment`` and ``create_app``; ``environment_factory("openenv/Generic-v0")`` turns
its two MCP tools into two TRL tools. The policy's ``generate`` is scripted (as TRL's own
tests do) so that it calls both tools; the forward, backward and optimizer steps are real.
The interop venvs install the ``trl`` extra for this (``scripts/test``).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from unittest.mock import patch

import pytest

pytest.importorskip("openenv")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from interop_support import Server  # noqa: E402

from openenv_gym.integrations.tiny import (  # noqa: E402
    cpu_grpo_config,
    tiny_model,
    tiny_tokenizer,
)
from openenv_gym.integrations.trl import environment_factory  # noqa: E402

pytestmark = [pytest.mark.openenv, pytest.mark.trl, pytest.mark.timeout(300)]

SEEDS = [0, 0, 1, 1, 2, 2, 3, 3]  # num_generations 2: the two rollouts of a group share one
_LOOKED = re.compile(r"You stand at (-?\d+); the flag is at (-?\d+)\.")


def _call(name: str, arguments: dict[str, Any]) -> str:
    body = json.dumps({"name": name, "arguments": arguments})
    return f"<tool_call>\n{body}\n</tool_call><|im_end|>"


def scripted_generate(tokenizer: Any, log: list[list[str]]) -> Any:
    """Look, then move to the flag, then stop; every second rollout of a batch gives up.

    Rollouts that give up earn 0.0 and the others 1.0, so each GRPO group's rewards differ
    and the update has a signal.
    """

    def answer(index: int, text: str) -> str:
        responses = text.split("<tool_response>")[1:]
        if not responses:
            return "I give up.<|im_end|>" if index % 2 else _call("look", {})
        if "episode is over" in responses[-1] or "no more tool calls" in responses[-1]:
            return "I am done.<|im_end|>"
        looked = _LOOKED.findall(text)
        if not looked:
            return _call("look", {})
        flag = int(looked[-1][1])
        position = int(looked[-1][0])
        for said in responses:
            found = re.search(r'\{"position": ?(-?\d+)\}', said)
            if found:
                position = int(found.group(1))
        gap = flag - position
        direction = "right" if gap > 0 else "left"
        return _call("move", {"direction": direction, "steps": min(3, abs(gap))})

    def generate(input_ids: Any, **_: Any) -> Any:
        rows = [answer(i, tokenizer.decode(row)) for i, row in enumerate(input_ids.tolist())]
        log.append(rows)
        ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rows]
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([r + [pad] * (width - len(r)) for r in ids])
        return torch.cat([input_ids, tail], dim=-1)

    return generate


def test_grpo_trainer_calls_both_mcp_tools(shared_app, tmp_path) -> None:
    app: Server = shared_app("linewalk", max_concurrent_envs=20)  # as test_interop_mcp.py
    tokenizer = tiny_tokenizer()
    factory = environment_factory("openenv/Generic-v0", base_url=app.url)
    dataset = datasets.Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "Walk to the flag."}]] * len(SEEDS), "seed": SEEDS}
    )
    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=cpu_grpo_config(
            str(tmp_path), max_completion_length=1500, max_tool_calling_iterations=8
        ),
        train_dataset=dataset,
        environment_factory=factory,
    )
    try:
        assert sorted(t.__name__ for t in trainer.tools) == ["look", "move"]
        log: list[list[str]] = []
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        with patch.object(trainer.model, "generate", side_effect=scripted_generate(tokenizer, log)):
            trainer.train()
        changed = sum(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
        assert trainer.state.global_step == 2
        assert changed > 0, "no parameter changed: the rewards carried no signal"
        called = {"look": 0, "move": 0}
        rewards = []
        for env in trainer.environments:
            rewards.append(env.get_reward())
            for turn in env.trajectory:
                tool = ("move", "look")[int(turn.action["tool"])]
                called[tool] += 1
                assert "Error" not in turn.text
            if env.trajectory:  # it walked: the server ended the episode at the flag
                assert env.done
                assert env.get_reward() == 1.0
                state = env.env.unwrapped.state()
                assert state["position"] == state["flag"]
        assert called["look"] > 0
        assert called["move"] > 0
        assert sorted(set(rewards)) == [0.0, 1.0]
        logged = trainer.state.log_history[-2]
        assert logged["tools/failure_frequency"] == 0.0
    finally:
        factory.close()
