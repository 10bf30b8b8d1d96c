"""The vectorized generate -> act loop, with the tiny model on CPU and under vLLM on a GPU.

Both build their model here, from a config (no model hub: none is reachable from these
machines). The vLLM test is marked ``gpu``: the marker's gate (tests/plugins/gpu_marker.py)
skips it where there is no CUDA GPU, and it is the one test CI allows to skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import pytest

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import ConfigurationError, UsageError
from openenv_gym.integrations.vllm import play, transformers_generate, vllm_generate

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from openenv_gym.integrations.tiny import tiny_model  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def wordle() -> Iterator[Any]:
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=4)
    try:
        yield envs
    finally:
        envs.close()


def secrets(envs: Any) -> list[str]:
    return [s["raw_state"]["game_state"]["secret_word"] for s in envs.call("state")]


def assert_every_turn_stepped(envs: Any, episodes: list[Any]) -> None:
    """Every episode played: one turn per model answer, each a step its server counted."""
    assert episodes, "no episode was played"
    steps = [state["step_count"] for state in envs.call("state")]
    for episode, counted in zip(episodes, steps, strict=True):
        assert episode.turns, "an episode with no turn"
        answers = [m for m in episode.messages if m["role"] == "assistant"]
        assert len(answers) == len(episode.turns)
        assert all(turn.text for turn in episode.turns)
        assert counted == len(episode.turns)  # the server stepped each turn


def test_tiny_model_plays_vectorized_wordle_to_the_end(tokenizer: Any, wordle: Any) -> None:
    model = tiny_model(tokenizer)
    prompts_seen: list[int] = []
    generate = transformers_generate(model, tokenizer, max_new_tokens=8)

    def counting(prompts: list[str]) -> list[str]:
        prompts_seen.append(len(prompts))
        return list(generate(prompts))

    episodes = play(wordle, counting, tokenizer=tokenizer, seed=0, max_turns=6)
    assert len(episodes) == 4
    assert_every_turn_stepped(wordle, episodes)
    # the random model writes no [word]: the game answers with its invalid-move warning,
    # then ends the game at the second one; one generate call per turn for all four
    assert prompts_seen == [4, 4]
    for episode in episodes:
        assert episode.done
        assert episode.terminated
        assert episode.reward == 0.0
        assert [m["role"] for m in episode.messages] == [
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        assert "You are Playing Wordle." in episode.messages[1]["content"]
        assert "invalid move" in episode.messages[3]["content"]
        assert "The episode is over" in episode.turns[-1].text


def test_a_policy_that_knows_the_word_wins(tokenizer: Any, wordle: Any) -> None:
    # seeds fix the secrets; read them from the servers, then play them
    seeds = [1, 2, 3, 4]
    play(wordle, lambda p: ["[crane]"] * len(p), tokenizer=tokenizer, seed=seeds, max_turns=1)
    words = secrets(wordle)

    def oracle(prompts: list[str]) -> list[str]:
        # prompts come in sub-env order of the episodes still running: all four, one turn
        return [f"I think it is <think>[wrong]</think> [{w}]" for w in words]

    episodes = play(wordle, oracle, tokenizer=tokenizer, seed=seeds, system_prompt="")
    for episode, word in zip(episodes, words, strict=True):
        assert episode.reward == 1.0
        assert len(episode.turns) == 1
        assert episode.turns[0].action == f"[{word}]"
        assert episode.messages[0]["role"] == "user"  # system_prompt="" leaves it out


def test_episodes_run_until_max_turns(tokenizer: Any) -> None:
    envs = gymnasium.make_vec("openenv/Echo-v0", num_envs=2)
    try:
        episodes = play(envs, lambda p: ["hi"] * len(p), tokenizer=tokenizer, max_turns=3)
        for episode in episodes:
            assert not episode.done  # echo never ends on its own
            assert [t.text for t in episode.turns] == ["hi", "hi", "hi"]
    finally:
        envs.close()


def test_catch_answers_are_parsed_into_moves(tokenizer: Any) -> None:
    envs = gymnasium.make_vec("openenv/Catch-v0", num_envs=3)
    try:
        episodes = play(envs, lambda p: ["go left"] * len(p), tokenizer=tokenizer, seed=0)
        for episode in episodes:
            assert episode.terminated
            assert episode.reward in (-1.0, 1.0)
            assert {t.action for t in episode.turns} == {0}
            assert set(episode.messages[1]["content"]) <= {".", "#", "\n"}
    finally:
        envs.close()


def test_generate_must_answer_every_prompt(tokenizer: Any, wordle: Any) -> None:
    with pytest.raises(UsageError, match="3 texts for 4 prompts"):
        play(wordle, lambda p: ["[crane]"] * 3, tokenizer=tokenizer)
    with pytest.raises(ConfigurationError):
        play(wordle, lambda p: list(p), tokenizer=tokenizer, max_turns=0)


class _Output:
    def __init__(self, text: str) -> None:
        self.text = text


class _Request:
    def __init__(self, text: str) -> None:
        self.outputs = [_Output(text)]


def test_vllm_generate_reads_the_first_output_of_each_request() -> None:
    # the shape of vllm.LLM.generate's result; the real engine is exercised on a GPU below
    seen: dict[str, Any] = {}

    class _LLM:
        def generate(self, prompts: list[str], params: Any, use_tqdm: bool) -> list[_Request]:
            seen.update(prompts=prompts, params=params, use_tqdm=use_tqdm)
            return [_Request(p.upper()) for p in prompts]

    generate = vllm_generate(_LLM(), "params")
    assert generate(["a", "b"]) == ["A", "B"]
    assert seen == {"prompts": ["a", "b"], "params": "params", "use_tqdm": False}


def vllm_ready_model(tokenizer: Any, folder: Path) -> Path:
    """The tiny chat model, shaped for vLLM's attention kernels, saved to ``folder``.

    The CPU test's model has heads of 8 dimensions; vLLM's kernels take 64 and up, so this
    one has 2 heads of 64 (128 wide, 2 layers: still about 0.3 M parameters). Random
    weights: it writes nonsense, which is enough to drive every code path of ``play``.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.gpu
def test_vllm_plays_wordle_with_a_model_built_here(
    tokenizer: Any, wordle: Any, tmp_path: Path
) -> None:
    import vllm  # a GPU machine without vLLM is misconfigured: fail, do not skip

    folder = vllm_ready_model(tokenizer, tmp_path / "tiny-qwen2")
    llm = vllm.LLM(
        str(folder),
        dtype="float16",
        max_model_len=4096,
        gpu_memory_utilization=0.2,
        enforce_eager=True,  # no CUDA graphs to capture for a model this small
        seed=0,
    )
    params = vllm.SamplingParams(max_tokens=8, temperature=1.0, seed=0)
    episodes = play(
        wordle, vllm_generate(llm, params), tokenizer=llm.get_tokenizer(), seed=0, max_turns=6
    )
    assert len(episodes) == wordle.num_envs
    assert_every_turn_stepped(wordle, episodes)
    for episode in episodes:
        assert "You are Playing Wordle." in episode.messages[1]["content"]
        assert episode.done or len(episode.turns) == 6
