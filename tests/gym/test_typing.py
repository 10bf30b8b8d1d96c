"""Types say what an env takes and gives: mypy's ``reveal_type`` on our ``make`` / ``make_vec``.

mypy runs on a snippet that uses the package as a user would; the test reads what it
revealed, and that it refuses an action of the wrong type.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from mypy import api

SNIPPET = textwrap.dedent(
    """
    import openenv_gym
    from openenv_gym.env import OpenEnvEnv
    from openenv_gym.vector import OpenEnvVectorEnv

    wordle = openenv_gym.make("openenv/Wordle-v0")
    reveal_type(wordle.step("[crane]")[0])  # 1
    reveal_type(wordle.reset(seed=0)[0])  # 2
    catch = openenv_gym.make("openenv/Catch-v0")
    reveal_type(catch.step(1)[0])  # 3
    envs = openenv_gym.make_vec("openenv/Wordle-v0", num_envs=2)
    reveal_type(envs.step(["[crane]", "[slate]"])[0])  # 4
    reveal_type(envs.step(["[crane]", "[slate]"])[1])  # 5
    generic = openenv_gym.make("openenv/Generic-v0", base_url="http://127.0.0.1:8000")
    reveal_type(generic.step({"message": "hi"})[0])  # 6
    reveal_type(OpenEnvEnv("wordle"))  # 7
    reveal_type(OpenEnvVectorEnv("wordle", 2))  # 8
    wordle.step(3)  # an int is not a Wordle action
    """
)


@pytest.fixture(scope="module")
def mypy_says(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("typing")
    snippet = folder / "snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    out, err, _ = api.run(
        [
            str(snippet),
            "--cache-dir",
            str(folder / "cache"),
            "--ignore-missing-imports",
            "--no-error-summary",
            "--hide-error-context",
        ]
    )
    assert not err, err
    return out.splitlines()


def revealed(lines: list[str]) -> list[str]:
    return [m.group(1) for line in lines if (m := re.search(r'Revealed type is "(.+)"', line))]


@pytest.mark.timeout(600)
def test_make_and_make_vec_are_typed_per_id(mypy_says: list[str]) -> None:
    types = revealed(mypy_says)
    assert len(types) == 8, mypy_says
    assert types[0] == "str"
    assert types[1] == "str"
    assert re.search(r"numpy\.(float32|floating\[.*32Bit\])", types[2]), types[2]
    assert types[3] == "tuple[str, ...]"
    assert types[4].startswith("numpy.ndarray["), types[4]
    assert types[5] == "Any"
    assert types[6] == "openenv_gym.env.OpenEnvEnv[Any, Any]"
    assert types[7] == "openenv_gym.vector.vector_env.OpenEnvVectorEnv[Any, Any, Any]"


@pytest.mark.timeout(600)
def test_a_wrong_action_type_is_an_error(mypy_says: list[str]) -> None:
    errors = [line for line in mypy_says if ": error:" in line]
    assert len(errors) == 1, mypy_says
    assert 'incompatible type "int"; expected "str"' in errors[0], errors[0]


def test_the_snippet_is_valid_python() -> None:
    compile(SNIPPET, str(Path("snippet.py")), "exec")
