"""``environment_factory`` under TRL's real GRPOTrainer, on CPU, against real Wordle servers.

The policy is the tiny offline model of ``openenv_gym.integrations.tiny``; its ``generate``
is scripted (as TRL's own tests do) so that tool calls happen: the forward, backward and
optimizer steps are real.
"""

from __future__ import annotations

import gc
import inspect
import os
import pickle
import random
import signal
import string
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import gymnasium
import pytest

import openenv_gym
from openenv_gym.exceptions import (
    CapacityError,
    ConfigurationError,
    EpisodeOverError,
    InvalidActionError,
    UsageError,
)
from openenv_gym.integrations.trl import EnvironmentFactory, environment_factory
from openenv_gym.providers import LocalProvider

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from openenv_gym.integrations.tiny import cpu_grpo_config, tiny_model  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.trl, pytest.mark.timeout(240)]

WORDS = ["crane", "slate", "pious", "mound", "light", "brick", "house", "tower", "plumb", "nymph"]
POOL = 4  # per_device_train_batch_size 4, num_generations 2: TRL keeps 4 instances


def secret(instance: Any) -> str:
    return instance.env.unwrapped.state()["raw_state"]["game_state"]["secret_word"]


def server_history(instance: Any) -> list[str]:
    state = instance.env.unwrapped.state()["raw_state"]["game_state"]
    return [word for word, _ in state["guess_history"]]


def open_one(url: str) -> None:
    """Open a session on ``url`` and play a move (raises CapacityError when full)."""
    env = gymnasium.make("openenv/Wordle-v0", base_url=url)
    try:
        env.reset(seed=0)
    finally:
        env.close()


def hold_sessions(url: str, count: int) -> None:
    envs = []
    try:
        for _ in range(count):
            env = gymnasium.make("openenv/Wordle-v0", base_url=url)
            envs.append(env)
            env.reset(seed=0)
    finally:
        for env in envs:
            env.close()


@pytest.fixture
def small_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A Wordle server that admits exactly POOL sessions (clients send its token)."""
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "trl-tests")
    provider = LocalProvider("wordle", extra_args=["--max-sessions", str(POOL)])
    try:
        yield provider.start()[0]
    finally:
        provider.close()


def scripted_generate(tokenizer: Any, log: list[int]) -> Any:
    """Random Wordle guesses until the game ends, then one call too many, then stop."""
    rng = random.Random(0)
    response = tokenizer.convert_tokens_to_ids("<tool_response>")

    def call(word: str) -> str:
        return (
            '<tool_call>\n{"name": "guess", "arguments": {"word": "' + word + '"}}\n'
            "</tool_call><|im_end|>"
        )

    def generate(input_ids: Any, **_: Any) -> Any:
        rows = []
        for row in input_ids.tolist():
            text = tokenizer.decode(row)
            last = text.split("<tool_response>")[-1] if response in row else ""
            if "no more tool calls" in last:
                rows.append("I am done.<|im_end|>")
            elif "The episode is over" in last:
                rows.append(call("crane"))  # after the end: TRL must feed back the error
            else:
                rows.append(call(rng.choice(WORDS)))
        log.append(len(rows))
        ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rows]
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([r + [pad] * (width - len(r)) for r in ids])
        return torch.cat([input_ids, tail], dim=-1)

    return generate


def make_trainer(factory: Any, tokenizer: Any, seeds: list[int], tmp_path: Any, **config: Any):
    dataset = datasets.Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "Play Wordle."}]] * len(seeds), "seed": seeds}
    )
    seen: dict[str, Any] = {}

    def capture(completions: list[Any], environments: list[Any], **_: Any) -> list[float]:
        seen["completions"] = completions
        seen["rewards"] = [e.get_reward() for e in environments]
        return [0.0] * len(completions)

    settings = {"max_completion_length": 1500, "max_tool_calling_iterations": 9, **config}
    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=[capture],
        args=cpu_grpo_config(str(tmp_path), **settings),
        train_dataset=dataset,
        environment_factory=factory,
    )
    return trainer, seen


def train(trainer: Any, tokenizer: Any) -> tuple[list[int], int]:
    """Two GRPO steps with the scripted policy; return generate batch sizes, params changed."""
    log: list[int] = []
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    with patch.object(trainer.model, "generate", side_effect=scripted_generate(tokenizer, log)):
        trainer.train()
    changed = sum(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    return log, changed


def test_grpo_two_steps_tools_reach_the_server_and_rewards_come_back(
    tokenizer: Any, small_server: str, tmp_path: Any
) -> None:
    factory = environment_factory("openenv/Wordle-v0", base_url=small_server)
    trainer, seen = make_trainer(factory, tokenizer, [0, 0, 1, 1, 2, 2, 3, 3], tmp_path)
    assert [t.__name__ for t in trainer.tools] == ["guess"]
    assert trainer.reward_func_names == ["capture", "WordleEnv"]
    log, changed = train(trainer, tokenizer)
    try:
        assert changed > 0, "no parameter changed: the rewards carried no signal"
        assert trainer.state.global_step == 2
        assert len(log) > 2, "the tool loop never went round"
        envs = trainer.environments
        assert len({id(e) for e in envs}) == POOL
        for env in envs:
            calls = env.trajectory
            assert env.done, "the scripted games end within the iteration budget"
            # every guess reached the server: its history holds the valid ones, in order
            valid = [t.action.strip("[]") for t in calls if "invalid move" not in t.text.lower()]
            assert server_history(env) == valid
            assert env.get_reward() == pytest.approx(sum(t.reward for t in calls))
        # TRL scored the last batch with the env's own rewards
        assert seen["rewards"] == [e.get_reward() for e in envs]
        logged = trainer.state.log_history[-2]["rewards/WordleEnv/mean"]
        assert logged == pytest.approx(sum(seen["rewards"]) / POOL)
        assert any(r > 0 for r in seen["rewards"]), "no game scored: rewards never came back"
        # a call after the end became a tool error that the model saw
        tool_texts = [m["content"] for c in seen["completions"] for m in c if m["role"] == "tool"]
        assert any("no more tool calls" in t for t in tool_texts)
        assert trainer.state.log_history[-2]["tools/failure_frequency"] > 0
        # the pool holds POOL sessions: the server, which admits POOL, is full
        with pytest.raises(CapacityError):
            open_one(small_server)
    finally:
        factory.close()
    hold_sessions(small_server, POOL)  # every session was closed: POOL fit again


def test_sessions_close_when_the_trainer_is_collected(
    tokenizer: Any, small_server: str, tmp_path: Any
) -> None:
    factory = environment_factory("openenv/Wordle-v0", base_url=small_server)
    trainer, _ = make_trainer(factory, tokenizer, [5, 5, 6, 6], tmp_path, max_steps=1)
    train(trainer, tokenizer)
    with pytest.raises(CapacityError):
        open_one(small_server)
    del trainer
    gc.collect()
    hold_sessions(small_server, POOL)  # no close() call: the finalizers did it


def test_group_rollouts_share_the_task_and_groups_differ(tokenizer: Any, tmp_path: Any) -> None:
    factory = environment_factory("openenv/Wordle-v0")
    try:
        # two rows: the generation batch of 4 is both, each repeated num_generations=2 times
        trainer, _ = make_trainer(factory, tokenizer, [11, 12], tmp_path, max_steps=1)
        train(trainer, tokenizer)
        secrets = [secret(e) for e in trainer.environments]
        assert secrets[0] == secrets[1]
        assert secrets[2] == secrets[3]
        assert secrets[0] != secrets[2]
        seeds = {11: secrets[0], 12: secrets[2]}
        # the same seed gives the same word in a fresh instance too
        fresh = factory()
        for seed, word in seeds.items():
            fresh.reset(seed=seed, prompt=[])
            assert secret(fresh) == word
    finally:
        factory.close()


@pytest.fixture(scope="module")
def wordle() -> Iterator[EnvironmentFactory]:
    factory = environment_factory("openenv/Wordle-v0")
    try:
        yield factory
    finally:
        factory.close()


def test_class_exposes_only_reset_get_reward_and_the_tool(wordle: EnvironmentFactory) -> None:
    instance = wordle()
    public = [
        name
        for name, _ in inspect.getmembers(type(instance), inspect.isfunction)
        if not name.startswith("_")
    ]
    assert sorted(public) == ["get_reward", "guess", "reset"]
    assert not isinstance(instance, gymnasium.Env)
    signature = inspect.signature(instance.guess)
    assert list(signature.parameters) == ["word"]
    assert signature.parameters["word"].annotation is str
    from transformers.utils import get_json_schema

    schema = get_json_schema(instance.guess)
    assert schema["function"]["name"] == "guess"
    assert schema["function"]["parameters"]["properties"]["word"]["type"] == "string"
    assert schema["function"]["parameters"]["required"] == ["word"]


def test_instances_share_one_server_with_their_own_sessions(wordle: EnvironmentFactory) -> None:
    a, b = wordle(), wordle()
    assert a.env.unwrapped.base_url == b.env.unwrapped.base_url == wordle.base_url
    assert a.env.unwrapped.protocol == "json"  # one call at a time: the cheaper protocol
    assert a.env.unwrapped.session is not b.env.unwrapped.session
    a.reset(seed=1)
    b.reset(seed=2)
    a.guess("crane")
    assert server_history(a) == ["crane"]
    assert server_history(b) == []


def test_instances_take_the_servers_in_turn_and_a_lost_one_restarts_once() -> None:
    factory = environment_factory("openenv/Wordle-v0", num_servers=2, on_server_loss="restart")
    try:
        a, b, c = factory(), factory(), factory()
        urls = factory.base_urls
        assert len(set(urls)) == 2
        assert [i.env.unwrapped.base_url for i in (a, b, c)] == [urls[0], urls[1], urls[0]]
        assert a.env.spec is not None  # gymnasium copies the spec, which holds the server
        for instance in (a, b, c):
            instance.reset(seed=1)
        provider = factory.provider
        assert isinstance(provider, LocalProvider)
        pid = provider.servers[0].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        # a's episode ends truncated, and server 0 runs again on a new port
        assert "The episode is over" in a.guess("crane")
        assert a.trajectory[-1].truncated
        assert a.trajectory[-1].info["server_lost"] is True
        fresh = factory.base_urls[0]
        assert fresh != urls[0]
        assert provider.servers[0].pid != pid
        assert "Feedback" in b.guess("crane")  # server 1 was not disturbed
        # c was on server 0 too: its episode ends, and the server is not restarted again
        restarted = provider.servers[0].pid
        assert "The episode is over" in c.guess("crane")
        assert provider.servers[0].pid == restarted
        assert factory.base_urls == [fresh, urls[1]]
        a.reset(seed=2)
        a.guess("crane")
        assert a.env.unwrapped.base_url == fresh
        assert server_history(a) == ["crane"]
    finally:
        factory.close()


def test_reset_text_and_prompt_joining(wordle: EnvironmentFactory) -> None:
    instance = wordle()
    alone = instance.reset(seed=3, prompt=[{"role": "user", "content": ""}])
    assert alone.startswith("You are Playing Wordle.")
    joined = instance.reset(seed=3, prompt=[{"role": "user", "content": "Play."}])
    assert joined == "\n\n" + alone
    assert instance.observation == alone


def test_episode_over_then_error_and_reward(wordle: EnvironmentFactory) -> None:
    instance = wordle()
    instance.reset(seed=4)
    word = secret(instance)
    text = instance.guess(word=word)
    assert "The episode is over" in text
    assert instance.done
    assert instance.get_reward() == 1.0 == instance.reward
    with pytest.raises(EpisodeOverError, match="no more tool calls"):
        instance.guess("crane")
    assert len(instance.trajectory) == 1
    instance.reset(seed=4)  # a new episode clears it all
    assert not instance.done
    assert instance.get_reward() == 0.0
    assert instance.trajectory == []


def test_bad_calls_raise_typed_errors(wordle: EnvironmentFactory) -> None:
    instance = wordle()
    with pytest.raises(UsageError, match="reset"):
        instance.guess("crane")
    instance.reset(seed=1)
    with pytest.raises(InvalidActionError, match="guess"):
        instance.guess()  # TRL passes the model's arguments: a missing one
    with pytest.raises(InvalidActionError, match="guess"):
        instance.guess(word="crane", letter="c")
    with pytest.raises(InvalidActionError):
        instance.guess("x" * 300)  # outside the action space: the session survives
    assert "Feedback" in instance.guess("crane")
    with pytest.raises(ConfigurationError, match="seed"):
        instance.reset(seed="abc")
    with pytest.raises(ConfigurationError, match="unknown env id"):
        environment_factory("openenv/Nope-v0")
    with pytest.raises(ConfigurationError, match="unknown env id"):
        environment_factory("no_such_module:openenv/Wordle-v0")


def test_module_prefixed_ids_work_without_an_import() -> None:
    factory = environment_factory("openenv_gym:openenv/Echo-v0", seed_column=None)
    try:
        instance = factory()
        assert type(instance).__name__ == "EchoEnv"
        instance.reset()
        assert instance.echo("x") == "x"
    finally:
        factory.close()


def test_seed_column_is_configurable(tokenizer: Any) -> None:
    factory = environment_factory("openenv/Wordle-v0", seed_column="task", protocol="batch")
    try:
        a, b = factory(), factory()
        a.reset(task=21, seed=1)
        b.reset(task=21, seed=2)
        assert secret(a) == secret(b)
        assert a.env.unwrapped.protocol == "batch"
    finally:
        factory.close()


def test_factory_pickles_and_works_in_a_fresh_process(tmp_path: Any) -> None:
    factory = environment_factory("openenv/Echo-v0", max_episode_steps=2)
    blob = tmp_path / "factory.pkl"
    blob.write_bytes(pickle.dumps(factory))
    script = (
        "import pickle, sys\n"
        "factory = pickle.load(open(sys.argv[1], 'rb'))\n"
        "env = factory()\n"
        "print(env.reset(seed=0))\n"
        "print(env.echo(message='hi'))\n"
        "print(env.echo('again').splitlines()[-1])\n"
        "factory.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(blob)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.splitlines() == ["Echo environment ready!", "hi", "The episode is over."]
    assert factory.env_class is None, "pickling or the child must not start anything here"


def test_generic_env_builds_its_tool_from_the_schema() -> None:
    factory = environment_factory(
        "openenv/Generic-v0", server="openenv_gym_servers.echo:EchoEnvironment", seed_column=None
    )
    try:
        instance = factory()
        assert [
            n for n, _ in inspect.getmembers(type(instance), inspect.isfunction) if n[0] != "_"
        ] == ["echo", "get_reward", "reset"]
        instance.reset()
        assert "hello" in instance.echo(message="hello")
        assert factory.base_url is not None
    finally:
        factory.close()


class _Countdown(gymnasium.Env[str, int]):
    """A plain Gymnasium env (not OpenEnv): say how far from zero, done at zero."""

    def __init__(self) -> None:
        self.action_space = gymnasium.spaces.Discrete(3, start=1)
        self.observation_space = gymnasium.spaces.Text(32, charset=string.printable)
        self.left = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.left = int(self.np_random.integers(3, 6))
        return f"{self.left} to go", {}

    def step(self, action: int) -> tuple[str, float, bool, bool, dict]:
        self.left = max(0, self.left - int(action))
        return f"{self.left} to go", float(self.left == 0), self.left == 0, False, {}


def test_any_gymnasium_id_gets_a_generic_tool() -> None:
    gymnasium.register("openenv_gym_test/Countdown-v0", entry_point=_Countdown)
    try:
        factory = environment_factory("openenv_gym_test/Countdown-v0")
        instance = factory()
        assert type(instance).__name__ == "CountdownEnv"
        start = instance.reset(seed=0)
        left = int(start.split()[0])
        while not instance.done:
            instance.act(action=3)
        assert instance.get_reward() == 1.0
        assert len(instance.trajectory) == -(-left // 3)
        other = factory()
        other.reset(seed=0)
        with pytest.raises(InvalidActionError):
            other.act(action=7)  # outside Discrete(3, start=1)
        assert other.trajectory == []
    finally:
        gymnasium.registry.pop("openenv_gym_test/Countdown-v0", None)


def test_registered_ids_are_known() -> None:
    assert "openenv/Wordle-v0" in gymnasium.registry
    assert openenv_gym.EpisodeOverError is EpisodeOverError


def test_a_lost_session_is_replaced_at_the_next_reset(wordle: EnvironmentFactory) -> None:
    from openenv_gym.config import Timeouts
    from openenv_gym.exceptions import RequestTimeoutError

    instance = wordle()
    instance.reset(seed=7)
    first = instance.env
    # a reply that cannot arrive in time: OpenEnv has no request ids, so the session closes
    first.unwrapped.session._impl.timeouts = Timeouts(step=1e-9)
    with pytest.raises(RequestTimeoutError):
        instance.guess("crane")  # TRL shows this to the model as a tool error
    assert first.unwrapped.session.closed
    instance.reset(seed=7)  # the next rollout gets a new session
    assert instance.env is not first
    assert "Feedback" in instance.guess("crane")
    assert server_history(instance) == ["crane"]


def test_a_dropped_connection_is_replaced_at_the_next_reset(wordle: EnvironmentFactory) -> None:
    instance = wordle()
    instance.reset(seed=8)
    first = instance.env
    first.unwrapped.session._impl.ws.interrupt()  # the connection drops, as a server restart
    instance.reset(seed=8)
    assert instance.env is not first
    assert "Feedback" in instance.guess("slate")


def test_rows_without_the_seed_column_warn_once(wordle: EnvironmentFactory) -> None:
    factory = environment_factory("openenv/Echo-v0")
    try:
        a, b = factory(), factory()
        with pytest.warns(UserWarning, match="no 'seed' column"):
            a.reset(prompt=[])
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            b.reset(prompt=[])  # once per factory, not per rollout
    finally:
        factory.close()


def test_an_instance_outlived_by_its_factory_fails_loudly() -> None:
    factory = environment_factory("openenv/Echo-v0", seed_column=None)
    instance = factory()
    instance.reset()
    url = factory.base_url
    factory.close()
    with pytest.raises(UsageError, match="factory was closed"):
        instance.reset()
    with pytest.raises(UsageError):
        instance.echo("x")
    again = factory()  # the factory itself can start over
    try:
        assert factory.base_url != url
        again.reset()
        assert again.echo("y") == "y"
    finally:
        factory.close()


def test_bad_make_kwargs_and_tool_names_are_configuration_errors() -> None:
    factory = environment_factory("openenv/Echo-v0", max_episode_step=3)  # a typo
    try:
        for _ in range(2):
            with pytest.raises(ConfigurationError, match="max_episode_step: neither the env"):
                factory()
            # refused before any server starts (it used to start the shared servers first)
            assert factory.provider is None
            assert factory.base_url is None
    finally:
        factory.close()
    for name in ("env", "done", "reset"):
        bad = environment_factory("openenv/Echo-v0", tool_name=name)
        try:
            with pytest.raises(ConfigurationError):
                bad()
        finally:
            bad.close()


def test_instances_work_from_many_threads_at_once() -> None:
    """AsyncGRPOTrainer runs reset / tools / get_reward in a thread pool: one env per thread."""
    from concurrent.futures import ThreadPoolExecutor

    factory = environment_factory("openenv/Wordle-v0")
    try:

        def play(seed: int) -> tuple[str, float, list[str], str]:
            instance = factory()  # the factory itself is called from many threads too
            instance.reset(seed=seed)
            word = secret(instance)
            for guess in WORDS[:3]:
                if guess != word:
                    instance.guess(guess)
            instance.guess(word)
            url = instance.env.unwrapped.base_url
            return word, instance.get_reward(), server_history(instance), url

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(play, range(16)))
        assert {url for *_, url in results} == {factory.base_url}  # one shared server
        for word, reward, history, _ in results:
            assert reward == 1.0
            assert history[-1] == word
            assert history[:-1] == [w for w in WORDS[:3] if w != word]
    finally:
        factory.close()
