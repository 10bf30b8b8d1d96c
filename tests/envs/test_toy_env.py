"""A third-party environment, defined only in ``tests/envs/toy_env/``, added by its record.

``openenv_gym.register_environment(RECORD)`` is the only call: the id is made and vectorised
against real ``openenv-gym serve`` subprocesses (which the local provider tells the server
class and the directory of its package, not the working directory), TRL gets its tool, the
CLI lists it, and its image recipe copies its package in and serves it. (An installed
package registers by an entry point instead: tests/envs/test_entry_points.py.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import toy_env

import openenv_gym
from openenv_gym import envs
from openenv_gym.cli import main
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.images import build_context, image_recipe
from openenv_gym.integrations.text import text_interface
from openenv_gym.runtime.loader import BUILTIN_SERVERS, load_env
from openenv_gym.spaces import codec_for, known_envs

ID = "toy/Counter-v0"
NAME = "toy_counter"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module", autouse=True)
def registered() -> Iterator[None]:
    before = dict(os.environ)
    openenv_gym.register_environment(toy_env.RECORD)
    try:
        assert dict(os.environ) == before  # registering leaves the environment alone
        yield
    finally:
        envs._added.pop(NAME, None)
        gymnasium.registry.pop(ID, None)
        openenv_gym.registry._refresh()


def test_the_record_gives_the_id_its_options() -> None:
    spec = gymnasium.spec(ID)
    assert spec.kwargs == {"env": NAME}
    assert spec.max_episode_steps == 20
    assert spec.nondeterministic is False
    assert openenv_gym.registry.ENV_IDS[ID].env == NAME
    assert NAME in known_envs()
    assert BUILTIN_SERVERS[NAME] == "toy_env.server:CounterEnvironment"
    assert load_env(NAME).__name__ == "CounterEnvironment"
    codec = codec_for(NAME)
    assert codec.action_space == gymnasium.spaces.Discrete(3)


def test_registering_again_is_a_no_op_and_a_clash_is_refused() -> None:
    openenv_gym.register_environment(toy_env.RECORD)  # the same record: nothing happens
    clash = openenv_gym.EnvRecord(name="toy_other", env_id=ID, server="x:Y", codec="x:codec")
    with pytest.raises(ConfigurationError, match="is the id of 'toy_counter'"):
        openenv_gym.register_environment(clash)
    renamed = openenv_gym.EnvRecord(name=NAME, env_id="toy/Other-v0", server="x:Y", codec="x:c")
    with pytest.raises(ConfigurationError, match="exists"):
        openenv_gym.register_environment(renamed)
    with pytest.raises(ConfigurationError, match="openenv/Generic-v0"):
        openenv_gym.EnvRecord(name="generic", env_id="a/B-v0", server="x:Y", codec="x:c")


def test_replace_swaps_the_record_and_its_id() -> None:
    changed = dataclasses.replace(toy_env.RECORD, max_episode_steps=7)
    openenv_gym.register_environment(changed, replace=True)
    try:
        assert gymnasium.spec(ID).max_episode_steps == 7
        assert envs.environment(NAME) is changed
    finally:
        openenv_gym.register_environment(toy_env.RECORD, replace=True)
    assert gymnasium.spec(ID).max_episode_steps == 20


def test_the_child_process_finds_the_server_not_the_working_directory() -> None:
    assert envs.serve_target(NAME) == ("toy_env.server:CounterEnvironment", str(HERE))
    assert envs.serve_target("wordle") == ("wordle", None)  # a new process finds it itself
    assert envs.serve_target("a.b:C") == ("a.b:C", None)
    # from the repository root `toy_env` is not importable: only the export finds it
    cwd = HERE.parents[1]
    probe = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('toy_env'))"],
        capture_output=True, text=True, cwd=cwd, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert probe.stdout.strip() == "None"


def test_make_reset_step_against_a_local_server() -> None:
    env = gymnasium.make(ID)
    try:
        obs, _ = env.reset(seed=4)
        assert obs.tolist() == [1]
        obs, reward, terminated, truncated, _ = env.step(2)
        assert (obs.tolist(), reward, terminated, truncated) == ([3], 2.0, False, False)
        obs, reward, terminated, _, _ = env.step(2)
        assert (obs.tolist(), terminated) == ([5], True)
    finally:
        env.close()


def test_make_vec_steps_two_envs_against_a_real_server() -> None:
    vec = gymnasium.make_vec(ID, num_envs=2)
    try:
        obs, _ = vec.reset(seed=[0, 2])
        assert obs.tolist() == [[0], [2]]
        obs, rewards, terminated, _, _ = vec.step(np.array([1, 2]))
        assert obs.tolist() == [[1], [4]]
        assert rewards.tolist() == [1.0, 2.0]
        assert terminated.tolist() == [False, False]
    finally:
        vec.close()


def test_the_text_interface_is_the_records() -> None:
    env = gymnasium.make(ID)
    try:
        interface = text_interface(env)
        assert interface.tool_name == "add"
        assert interface.to_action({"amount": 2}) == 2
    finally:
        env.close()


def test_environment_factory_tool_call_reaches_the_server() -> None:
    pytest.importorskip("trl")
    from openenv_gym.integrations.trl import environment_factory

    factory = environment_factory(ID)
    try:
        instance = factory()
        instance.reset(seed=1)
        assert instance.add(amount=2) == "The counter is at 3."
        assert instance.add(amount=2) == "The counter is at 5." or instance.done
        assert instance.get_reward() == 4.0
    finally:
        factory.close()


def test_envs_command_lists_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["envs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows][:4] == [
        "openenv/Wordle-v0", "openenv/Echo-v0", "openenv/Catch-v0", "openenv/Generic-v0",
    ]  # fmt: skip
    (row,) = [r for r in rows if r["id"] == ID]
    assert row["server"] == NAME
    assert row["action"] == "Discrete(3)"


def test_image_recipe_copies_the_package_and_serves_it(tmp_path: Path) -> None:
    recipe = image_recipe(NAME, base_image="python:3.12-slim")
    assert recipe.tag == f"openenv-gym/{NAME}:{openenv_gym.__version__}"
    assert recipe.buildargs == {"SERVER": NAME, "BASE_IMAGE": "python:3.12-slim"}
    assert recipe.labels["openenv-gym.server"] == NAME
    assert recipe.sources == {"envs/toy_env": HERE / "toy_env"}
    dockerfile = recipe.dockerfile.decode()
    shipped = (resources.files("openenv_gym_servers") / "Dockerfile").read_bytes()
    assert recipe.dockerfile.startswith(shipped)
    assert "COPY envs/toy_env /opt/openenv-gym/envs/toy_env\n" in dockerfile
    (path, served) = re.findall(
        r"^ENV PYTHONPATH=(\S+) OPENENV_GYM_SERVER=(\S+)$", dockerfile, re.M
    )[0]
    assert (path, served) == ("/opt/openenv-gym/envs", "toy_env.server:CounterEnvironment")

    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "openenv_gym-0-py3-none-any.whl").write_bytes(b"")
    with tarfile.open(fileobj=build_context(recipe, wheelhouse)) as tar:
        names = tar.getnames()
        assert tar.extractfile("Dockerfile").read() == recipe.dockerfile
        tar.extractall(tmp_path / "context", filter="data")
    assert "build/wheelhouse/openenv_gym-0-py3-none-any.whl" in names
    assert {"envs/toy_env/__init__.py", "envs/toy_env/server.py", "envs/toy_env/gym.py"} <= set(
        names
    )
    assert not [n for n in names if "__pycache__" in n]

    # what the image's CMD runs, with the context's envs/ where the image puts it
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "context" / "envs")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv_gym", "serve", served, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("http://"), proc.stderr.read() if proc.stderr else line
        sub = gymnasium.make(ID, base_url=line.strip())
        try:
            obs, _ = sub.reset(seed=2)
            assert obs.tolist() == [2]
        finally:
            sub.close()
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_an_unknown_image_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="no image for"):
        image_recipe("nope")
