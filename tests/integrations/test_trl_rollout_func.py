"""The lockstep ``rollout_func`` under TRL's real GRPOTrainer, on CPU, over OpenEnvVectorEnv."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from openenv_gym.exceptions import ConfigurationError
from openenv_gym.integrations.trl import env_reward, vector_rollout_func

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from openenv_gym.integrations.tiny import cpu_grpo_config, tiny_model  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.trl, pytest.mark.timeout(240)]

PROMPT = [{"role": "user", "content": "Play Wordle."}]
BUDGET = 400


def secrets(envs: Any) -> list[str]:
    return [s["raw_state"]["game_state"]["secret_word"] for s in envs.call("state")]


def segments(ids: list[int], mask: list[int]) -> list[tuple[int, list[int]]]:
    """Runs of equal mask values: [(mask value, ids), ...]."""
    runs: list[tuple[int, list[int]]] = []
    for token, m in zip(ids, mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(token)
        else:
            runs.append((m, [token]))
    return runs


def length_reward(completions: list[Any], **_: Any) -> list[float]:
    """Gives GRPO a signal even when every game scores 0 (the random model's case)."""
    return [len(c[0]["content"]) / 100 for c in completions]


@pytest.fixture(scope="module")
def trainer(tokenizer: Any, tmp_path_factory: Any) -> Iterator[Any]:
    """A real GRPOTrainer with the real-generate rollout func; trained for 2 steps."""
    func = vector_rollout_func("openenv/Wordle-v0", max_turns=3, max_new_tokens=12, seed=0)
    calls: list[tuple[list[Any], dict[str, Any]]] = []

    def spy(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = func(prompts, trainer)
        calls.append((prompts, out))
        return out

    dataset = datasets.Dataset.from_dict({"prompt": [PROMPT] * 8})
    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=[env_reward, length_reward],
        args=cpu_grpo_config(str(tmp_path_factory.mktemp("grpo")), max_completion_length=BUDGET),
        train_dataset=dataset,
        rollout_func=spy,
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    trainer.test_calls = calls
    trainer.test_changed = sum(
        not torch.equal(before[n], p) for n, p in trainer.model.named_parameters()
    )
    trainer.test_func = func
    try:
        yield trainer
    finally:
        func.close()


def test_two_grpo_steps_with_the_tiny_models_real_generate(trainer: Any) -> None:
    assert trainer.state.global_step == 2
    assert len(trainer.test_calls) == 2
    assert trainer.test_changed > 0
    envs = trainer.test_func.envs
    assert type(envs.unwrapped).__name__ == "OpenEnvVectorEnv"
    assert envs.num_envs == 4
    logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2


def test_env_mask_zeroes_exactly_the_environment_turns(trainer: Any, tokenizer: Any) -> None:
    for prompts, out in trainer.test_calls:
        assert len(prompts) == 4
        assert out["logprobs"] is None  # the policy's own generate: TRL needs none
        for i in range(4):
            ids, mask = out["completion_ids"][i], out["env_mask"][i]
            assert len(ids) == len(mask) <= BUDGET
            runs = segments(ids, mask)
            assert runs[0][0] == 1, "a completion starts with the model's answer"
            turns = out["num_turns"][i]
            assert 1 <= turns <= 3
            env_runs = [tokenizer.decode(t) for m, t in runs if m == 0]
            # one env turn between consecutive answers, none after the last
            assert len(env_runs) == turns - 1
            assert [m for m, _ in runs] == [1, 0] * (turns - 1) + [1]
            for text in env_runs:
                body = text.removeprefix("<|im_end|>")
                assert body.startswith("\n<|im_start|>user\n")
                assert body.endswith("<|im_end|>\n<|im_start|>assistant\n")


def test_random_answers_end_wordle_games_with_the_servers_verdict(trainer: Any) -> None:
    # the random model writes no [word]: the game judges two invalid moves and ends
    for _, out in trainer.test_calls:
        assert out["env_reward"] == [0.0] * 4
        assert out["num_turns"] == [2] * 4


def test_group_members_share_the_secret_and_groups_differ(trainer: Any) -> None:
    func = trainer.test_func
    prompts = [PROMPT] * 6  # three groups of num_generations=2
    out = func(prompts, trainer)
    words = secrets(func.envs)
    assert func.envs.num_envs == 6, "a new batch size gets a new vector env"
    assert words[0] == words[1]
    assert words[2] == words[3]
    assert words[4] == words[5]
    assert len({words[0], words[2], words[4]}) == 3
    assert len(out["prompt_ids"]) == 6
    # the observation was appended to the prompt's last user message
    assert "You are Playing Wordle." in trainer.processing_class.decode(out["prompt_ids"][0])


def test_scripted_generate_plays_real_games(trainer: Any, tokenizer: Any) -> None:
    guesses = ["[crane]", "[slate]", "[pious]"]

    def generate(prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        replies = []
        for ids in prompt_ids:
            turn = tokenizer.decode(ids).count("<|im_start|>assistant") - 1
            text = guesses[turn % 3] + "<|im_end|>"
            replies.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        return replies

    func = vector_rollout_func(
        "openenv/Wordle-v0", max_turns=3, seed=1, generate=generate, envs_per_server=2
    )
    try:
        out = func([PROMPT] * 4, trainer)
        state = func.envs.call("state")
        for i in range(4):
            history = state[i]["raw_state"]["game_state"]["guess_history"]
            assert [w for w, _ in history] == ["crane", "slate", "pious"]
            assert out["num_turns"][i] == 3
            texts = tokenizer.decode(out["completion_ids"][i])
            assert "You submitted [crane]" in texts
            assert "You submitted [slate]" in texts
        # the same task and the same moves: the same return within a group
        assert out["env_reward"][0] == out["env_reward"][1]
        assert out["env_reward"][2] == out["env_reward"][3]
        assert len(func.envs.unwrapped.base_urls) == 2
    finally:
        func.close()
    assert func.envs is None


def test_budget_bounds_every_rollout(trainer: Any, tokenizer: Any) -> None:
    def chatty(prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        return [[tokenizer.convert_tokens_to_ids("X")] * 500 for _ in prompt_ids]

    func = vector_rollout_func("openenv/Wordle-v0", max_turns=4, generate=chatty)
    try:
        out = func([PROMPT] * 2, trainer)
        assert all(len(ids) == BUDGET for ids in out["completion_ids"])
        assert out["num_turns"] == [1, 1]  # no room for an env turn and another answer
    finally:
        func.close()


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError):
        vector_rollout_func("openenv/Wordle-v0", max_turns=0)
    with pytest.raises(ConfigurationError):
        vector_rollout_func("openenv/Wordle-v0", max_new_tokens=0)
    with pytest.raises(ConfigurationError, match="unknown env id"):
        vector_rollout_func("openenv/Nope-v0")


def test_evaluation_groups_by_num_generations_eval(trainer: Any) -> None:
    func = trainer.test_func
    trainer.model.eval()
    saved = trainer.num_generations_eval
    trainer.num_generations_eval = 3
    try:
        func([PROMPT] * 6, trainer)
        words = secrets(func.envs)
        assert len(set(words[:3])) == 1
        assert len(set(words[3:])) == 1
        assert words[0] != words[3]
    finally:
        trainer.num_generations_eval = saved
        trainer.model.train()


class _StubVLLM:
    """The shape of ``trainer.vllm_generation.generate`` (the real one needs a GPU)."""

    def __init__(self, tokenizer: Any, logprobs: bool) -> None:
        self.answer = tokenizer("[crane]<|im_end|>", add_special_tokens=False)["input_ids"]
        self.logprobs = logprobs
        self.calls: list[int] = []

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int) -> tuple:
        assert images is None
        assert num_generations == 1
        self.calls.append(len(prompts))
        completions = [list(self.answer) for _ in prompts]
        lps = [[[-0.5, -2.0]] * len(self.answer) for _ in prompts]
        if not self.logprobs:
            lps = [[[None]] * len(self.answer) for _ in prompts]
        return prompts, completions, lps, None


@pytest.mark.parametrize("with_logprobs", [True, False])
def test_use_vllm_generates_through_trainer_vllm_generation(
    trainer: Any, tokenizer: Any, with_logprobs: bool
) -> None:
    stub = _StubVLLM(tokenizer, with_logprobs)
    func = vector_rollout_func("openenv/Wordle-v0", max_turns=2, seed=3)
    trainer.use_vllm, trainer.vllm_generation = True, stub
    try:
        out = func([PROMPT] * 2, trainer)
    finally:
        trainer.use_vllm = False
        del trainer.vllm_generation
        func.close()
    assert stub.calls == [2, 2]  # one batched call per turn
    if not with_logprobs:
        assert out["logprobs"] is None
        return
    for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"], strict=True):
        assert len(lps) == len(ids)
        assert {lp for lp, m in zip(lps, mask, strict=True) if m == 1} == {-0.5}
        assert {lp for lp, m in zip(lps, mask, strict=True) if m == 0} == {0.0}


def test_env_turn_does_not_repeat_the_answers_turn_end(tokenizer: Any) -> None:
    from openenv_gym.integrations.trl.rollout import _Template

    template = _Template(tokenizer, {})
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    after_closed = template.ids("obs", last=im_end)
    after_open = template.ids("obs", last=tokenizer.convert_tokens_to_ids("X"))
    assert after_open == [im_end, *after_closed]
    assert tokenizer.decode(after_closed).startswith("\n<|im_start|>user\nobs<|im_end|>")


def test_a_template_whose_turn_end_is_not_eos(tokenizer: Any) -> None:
    from openenv_gym.integrations.trl.rollout import _Template

    tok = copy.deepcopy(tokenizer)
    tok.add_tokens(["<end_of_turn>", "<start_of_turn>"], special_tokens=True)
    tok.chat_template = (
        "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}"
        "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>assistant\n"
        "{% endif %}"
    )
    template = _Template(tok, {})
    end = tok.convert_tokens_to_ids("<end_of_turn>")
    closed = template.ids("hi", last=end)
    expected = "\n<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>assistant\n"
    assert tok.decode(closed) == expected
    unclosed = template.ids("hi", last=tok.eos_token_id)  # ended on eos, not the turn end
    assert unclosed[0] == end


def test_no_chat_template_is_a_configuration_error(tokenizer: Any) -> None:
    from openenv_gym.integrations.trl.rollout import _Template

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = None
    with pytest.raises(ConfigurationError, match="chat"):
        _Template(tok, {})
