"""TRL on the two-node Ray cluster: ``environment_factory`` and ``vector_rollout_func``.

A real ``GRPOTrainer`` (CPU, the tiny offline model of ``openenv_gym.integrations.tiny``,
its ``generate`` scripted as TRL's own tests do, so that tool calls happen) trains with
Wordle servers that run as Ray actors; the forward, backward and optimizer steps are real.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
from collections import Counter
from typing import Any
from unittest.mock import patch

# no model hub here; TRL's "experimental feature" warning is noise in tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import datasets
import pytest
import ray
import torch
import trl
from ray_checks import TwoNodes, gone, live_placement_groups, server_actors, wait_until

from openenv_gym.exceptions import CapacityError, ConfigurationError, UsageError
from openenv_gym.integrations.tiny import cpu_grpo_config, tiny_model, tiny_tokenizer
from openenv_gym.integrations.trl import env_reward, environment_factory, vector_rollout_func
from openenv_gym.providers.ray import RayProvider, pool_down, pool_up

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.trl, pytest.mark.timeout(300)]

WORDS = ["crane", "slate", "pious", "mound", "light", "brick", "house", "tower", "plumb", "nymph"]
POOL = 4  # per_device_train_batch_size 4, num_generations 2: TRL keeps 4 instances
PROMPT = [{"role": "user", "content": "Play Wordle."}]


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return tiny_tokenizer()


def history(instance: Any) -> list[str]:
    """The guesses the server holds for this instance's session (asked over the wire)."""
    state = instance.env.unwrapped.state()["raw_state"]["game_state"]
    return [word for word, _ in state["guess_history"]]


def scripted_generate(tokenizer: Any, log: list[int]) -> Any:
    """Random Wordle guesses as tool calls until the game ends, then stop."""
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
            if "The episode is over" in last or "no more tool calls" in last:
                rows.append("I am done.<|im_end|>")
            else:
                rows.append(call(rng.choice(WORDS)))
        log.append(len(rows))
        ids = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in rows]
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        tail = torch.tensor([r + [pad] * (width - len(r)) for r in ids])
        return torch.cat([input_ids, tail], dim=-1)

    return generate


def test_grpo_trains_with_tools_on_ray_hosted_wordle_servers(
    cluster: TwoNodes, tokenizer: Any, tmp_path: Any
) -> None:
    factory = environment_factory(
        "openenv/Wordle-v0", provider="ray", num_servers=2, placement="spread"
    )
    seeds = [0, 0, 1, 1, 2, 2, 3, 3]
    dataset = datasets.Dataset.from_dict({"prompt": [PROMPT] * len(seeds), "seed": seeds})
    seen: dict[str, Any] = {}

    def capture(completions: list[Any], environments: list[Any], **_: Any) -> list[float]:
        seen["rewards"] = [e.get_reward() for e in environments]
        return [0.0] * len(completions)

    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=[capture],
        args=cpu_grpo_config(
            str(tmp_path), max_completion_length=1500, max_tool_calling_iterations=9
        ),
        train_dataset=dataset,
        environment_factory=factory,
    )
    try:
        # TRL's probe instance started the shared servers: two actors, one on each node
        provider = factory.provider
        assert isinstance(provider, RayProvider)
        assert factory.base_urls == [server.url for server in provider.servers]
        described = ray.get([actor.describe.remote() for actor in provider.actors])
        assert [info["url"] for info in described] == factory.base_urls
        assert sorted(cluster.labels[info["node_id"]] for info in described) == ["a", "b"]
        names = [server.name for server in provider.servers]
        pids = [server.pid for server in provider.servers]
        assert set(names) <= set(server_actors())
        assert len(live_placement_groups()) == 1

        log: list[int] = []
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        with patch.object(trainer.model, "generate", side_effect=scripted_generate(tokenizer, log)):
            trainer.train()
        changed = sum(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
        assert trainer.state.global_step == 2
        assert changed > 0, "no parameter changed: the rewards carried no signal"
        assert len(log) > 2, "the tool loop never went round"

        envs = trainer.environments
        assert len({id(e) for e in envs}) == POOL
        # the instances took the two Ray-hosted servers in turn, one session each
        urls = [e.env.unwrapped.base_url for e in envs]
        assert Counter(urls) == dict.fromkeys(factory.base_urls, POOL // 2)
        assert len({id(e.env.unwrapped.session) for e in envs}) == POOL
        for env in envs:
            calls = env.trajectory
            assert calls, "every rollout made tool calls"
            # every valid guess reached the actor's server, in order
            valid = [t.action.strip("[]") for t in calls if "invalid move" not in t.text.lower()]
            assert history(env) == valid
            assert env.get_reward() == pytest.approx(sum(t.reward for t in calls))
        assert seen["rewards"] == [e.get_reward() for e in envs]
        assert any(r > 0 for r in seen["rewards"]), "no game scored: rewards never came back"
    finally:
        factory.close()
    # close() killed both actors (their processes too) and removed the placement group
    assert wait_until(lambda: not set(names) & set(server_actors()))
    assert wait_until(lambda: not live_placement_groups())
    assert wait_until(lambda: gone(pids))
    assert factory.provider is None
    with pytest.raises(UsageError, match="closed"):
        envs[0].reset(seed=0)


def test_factory_passes_ray_options_and_bad_ones_fail(cluster: TwoNodes) -> None:
    factory = environment_factory(
        "openenv/Wordle-v0",
        provider="ray",
        num_servers=2,
        placement="pack",
        num_cpus=0.5,
        resources={"node_b": 1},
        runtime_env={"env_vars": {"OPENENV_GYM_MAX_SESSIONS": "3"}},
        server_options={"idle_timeout": 120.0},
        ray_address=cluster.address,  # connected already: used as it is
        max_episode_steps=2,
    )
    try:
        instances = [factory() for _ in range(4)]
        provider = factory.provider
        assert isinstance(provider, RayProvider)
        assert {cluster.labels[node] for node in provider.node_ids} == {"b"}
        assert provider.plan is not None
        assert provider.plan.bundle == {"CPU": 0.5, "node_b": 1.0}
        assert Counter(i.env.unwrapped.base_url for i in instances) == dict.fromkeys(
            factory.base_urls, 2
        )
        # the env's arguments stayed the env's: two steps, then truncated
        instances[0].reset(seed=5)
        instances[0].guess("crane")
        assert "The episode is over" in instances[0].guess("slate")
        # runtime_env reached the actors: each server admits 3 sessions (and holds 2)
        instances += [factory(), factory()]
        for instance in instances:
            instance.reset(seed=1)  # three sessions on each server
        extra = factory()  # a fourth on the first server
        with pytest.raises(CapacityError):
            extra.reset(seed=1)
        # gymnasium's copy of the env's spec works (it holds the shared server's handle)
        assert instances[0].env.spec is not None
    finally:
        factory.close()
    with pytest.raises(ConfigurationError, match="placement"):
        environment_factory("openenv/Wordle-v0", provider="ray", placement="sideways")()
    # an argument neither the env's nor Ray's: an error on the first call
    bad = environment_factory("openenv/Wordle-v0", provider="ray", num_gpus=1)
    try:
        with pytest.raises(ConfigurationError, match="num_gpus"):
            bad()
    finally:
        bad.close()


def test_a_lost_server_is_restarted_once_for_all_its_instances(cluster: TwoNodes) -> None:
    factory = environment_factory(
        "openenv/Wordle-v0", provider="ray", num_servers=2, on_server_loss="restart"
    )
    try:
        a, b, c = factory(), factory(), factory()  # a and c on server 0, b on server 1
        for instance in (a, b, c):
            instance.reset(seed=1)
        provider = factory.provider
        assert isinstance(provider, RayProvider)
        lost = factory.base_urls[0]
        assert a.env.unwrapped.base_url == c.env.unwrapped.base_url == lost
        pid = provider.servers[0].pid
        ray.kill(provider.actors[0], no_restart=True)
        assert wait_until(lambda: not provider.alive(0))
        # Ray calls the actor dead before its worker process has exited, and the server
        # in it answers until then: wait for the process, or a's step may still be served
        assert wait_until(lambda: gone([pid]))
        # a's episode ends truncated; the server comes back on a new port
        assert "The episode is over" in a.guess("crane")
        assert a.done
        assert a.trajectory[-1].truncated
        assert a.trajectory[-1].info["server_lost"] is True
        fresh = factory.base_urls[0]
        assert fresh != lost
        assert provider.servers[0].url == fresh
        assert provider.alive(0)
        # server 1 was not disturbed
        assert "Feedback" in b.guess("crane")
        assert history(b) == ["crane"]
        # c lost its session too, and finds the new server instead of restarting it again
        assert "The episode is over" in c.guess("slate")
        assert c.trajectory[-1].info["server_lost"] is True
        assert factory.base_urls[0] == fresh
        assert [server.name.endswith("-r1/0") for server in provider.servers] == [True, False]
        # new episodes and new instances play on the restarted server
        a.reset(seed=2)
        a.guess("crane")
        assert a.env.unwrapped.base_url == fresh
        assert history(a) == ["crane"]
        names = [server.name for server in provider.servers]
    finally:
        factory.close()
    assert wait_until(lambda: not set(names) & set(server_actors()))


RANK = textwrap.dedent(
    """
    import json, pickle, sys
    factory = pickle.load(open(sys.argv[1], "rb"))
    instances = [factory() for _ in range(2)]
    played = []
    for seed, instance in enumerate(instances):
        instance.reset(seed=seed)
        instance.guess("crane")
        state = instance.env.unwrapped.state()["raw_state"]["game_state"]
        played.append([instance.env.unwrapped.base_url, [w for w, _ in state["guess_history"]]])
    print(json.dumps({"urls": factory.base_urls, "played": played,
                      "actors": len(factory.provider.actors)}))
    factory.close()
    """
)


def test_ranks_attach_to_a_named_pool_through_the_factory(cluster: TwoNodes, tmp_path: Any) -> None:
    servers = pool_up("trl-words", "wordle", num_servers=2)
    urls = [server.url for server in servers]
    try:
        # every rank of a trainer builds (or unpickles) the same factory
        factory = environment_factory(
            "openenv/Wordle-v0", provider="ray", pool="trl-words", ray_address=cluster.address
        )
        blob = tmp_path / "factory.pkl"
        blob.write_bytes(pickle.dumps(factory))
        rank1 = subprocess.Popen(
            [sys.executable, "-c", RANK, str(blob)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            a, b = factory(), factory()  # rank 0, while rank 1 plays too
            assert factory.base_urls == urls
            assert factory.provider is not None
            assert factory.provider.actors == []  # the pool's actors are not this rank's
            for seed, instance in enumerate((a, b)):
                instance.reset(seed=seed)
                instance.guess("slate")
                assert history(instance) == ["slate"]
            assert sorted(i.env.unwrapped.base_url for i in (a, b)) == sorted(urls)
            out, err = rank1.communicate(timeout=180)
        finally:
            if rank1.poll() is None:
                rank1.kill()
                rank1.wait()
        assert rank1.returncode == 0, err
        report = json.loads(out.splitlines()[-1])
        assert report["urls"] == urls
        assert report["actors"] == 0
        assert sorted(url for url, _ in report["played"]) == sorted(urls)
        assert [moves for _, moves in report["played"]] == [["crane"], ["crane"]]
        factory.close()
        # both ranks closed: the pool serves on, and a later run attaches again
        assert server_actors() == ["trl-words/0", "trl-words/1"]
        again = environment_factory("openenv/Wordle-v0", provider="ray", pool="trl-words")
        try:
            again().reset(seed=3)
            assert again.base_urls == urls
        finally:
            again.close()
        with pytest.raises(ConfigurationError, match="serves 'wordle', not 'echo'"):
            environment_factory("openenv/Echo-v0", provider="ray", pool="trl-words")()
    finally:
        assert pool_down("trl-words") == 2
    assert wait_until(lambda: server_actors() == [])
    assert wait_until(lambda: gone([server.pid for server in servers]))


EXITING_RANK = textwrap.dedent(
    """
    import json, sys
    from openenv_gym.integrations.trl import environment_factory
    factory = environment_factory(
        "openenv/Wordle-v0", provider="ray", num_servers=2, ray_address=sys.argv[1]
    )
    instance = factory()
    instance.reset(seed=0)
    instance.guess("crane")
    servers = factory.provider.servers
    print(json.dumps({"names": [s.name for s in servers], "pids": [s.pid for s in servers]}))
    # no close(): the process exits and takes its servers with it
    """
)


def test_a_trainer_that_exits_without_close_leaves_nothing(cluster: TwoNodes) -> None:
    done = subprocess.run(
        [sys.executable, "-c", EXITING_RANK, cluster.address],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert len(report["names"]) == 2
    assert wait_until(lambda: not set(report["names"]) & set(server_actors()))
    assert wait_until(lambda: not live_placement_groups())
    assert wait_until(lambda: gone(report["pids"]))


def test_vector_rollout_func_trains_over_ray_servers(
    cluster: TwoNodes, tokenizer: Any, tmp_path: Any
) -> None:
    guesses = ["[crane]", "[slate]", "[pious]"]

    def generate(prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
        replies = []
        for ids in prompt_ids:
            turn = tokenizer.decode(ids).count("<|im_start|>assistant") - 1
            text = guesses[turn % 3] + "<|im_end|>"
            replies.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        return replies

    func = vector_rollout_func(
        "openenv/Wordle-v0",
        max_turns=3,
        seed=0,
        generate=generate,
        provider="ray",
        num_servers=2,
        placement="spread",
    )
    batches: list[tuple[dict[str, Any], list[Any]]] = []

    def spy(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out = func(prompts, trainer)
        batches.append((out, func.envs.call("state")))
        return out

    trainer = trl.GRPOTrainer(
        model=tiny_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=[env_reward],
        args=cpu_grpo_config(str(tmp_path), max_completion_length=400),
        train_dataset=datasets.Dataset.from_dict({"prompt": [PROMPT] * 8}),
        rollout_func=spy,
    )
    try:
        trainer.train()
        assert trainer.state.global_step == 2
        assert len(batches) == 2
        envs = func.envs.unwrapped
        provider = envs._provider
        assert isinstance(provider, RayProvider)
        assert envs.base_urls == [server.url for server in provider.servers]
        assert sorted(cluster.labels[node] for node in provider.node_ids) == ["a", "b"]
        names = [server.name for server in provider.servers]
        pids = [server.pid for server in provider.servers]
        for out, states in batches:
            assert out["num_turns"] == [3] * 4
            for state in states:  # the servers on the actors played every answer
                moves = [w for w, _ in state["raw_state"]["game_state"]["guess_history"]]
                assert moves == ["crane", "slate", "pious"]
            # a group plays one task: the same moves score the same
            assert out["env_reward"][0] == out["env_reward"][1]
            assert out["env_reward"][2] == out["env_reward"][3]
        logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
        assert len(logged) == 2
    finally:
        func.close()
    assert func.envs is None
    assert wait_until(lambda: not set(names) & set(server_actors()))
    assert wait_until(lambda: not live_placement_groups())
    assert wait_until(lambda: gone(pids))
