"""``openenv_gym.envs``: one record per environment, and everything that reads the table."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import gymnasium
import pytest

import openenv_gym
from openenv_gym import envs
from openenv_gym.envs import EnvRecord
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.images import SERVERS, image_recipe
from openenv_gym.registry import ENV_IDS
from openenv_gym.runtime.loader import BUILTIN_SERVERS, load_env

SHIPPED = {
    "wordle": ("openenv/Wordle-v0", "WordleEnvironment"),
    "echo": ("openenv/Echo-v0", "EchoEnvironment"),
    "catch": ("openenv/Catch-v0", "CatchEnvironment"),
}


def test_the_shipped_records_are_registered_by_entry_points() -> None:
    assert envs.builtin_names() == ("wordle", "echo", "catch")
    entries = metadata.entry_points(group=envs.ENTRY_POINTS)
    for name, (env_id, cls) in SHIPPED.items():
        record = envs.environment(name)
        assert record is not None
        assert entries[name].value == f"openenv_gym_servers.{name}.record:record"
        assert entries[name].dist is not None
        assert entries[name].dist.metadata["Name"] == envs.DISTRIBUTION
        assert record == sys.modules[f"openenv_gym_servers.{name}.record"].record()
        assert (record.env_id, record.server) == (env_id, f"openenv_gym_servers.{name}:{cls}")
        assert envs.environment(name.upper()) is record


def test_every_table_reads_the_records() -> None:
    assert list(ENV_IDS) == [
        "openenv/Wordle-v0", "openenv/Echo-v0", "openenv/Catch-v0", "openenv/Generic-v0",
    ]  # fmt: skip
    assert ENV_IDS["openenv/Generic-v0"].nondeterministic is True
    for name, (env_id, cls) in SHIPPED.items():
        assert ENV_IDS[env_id].env == name
        assert gymnasium.spec(env_id).kwargs == {"env": name}
        assert BUILTIN_SERVERS[name].endswith(f":{cls}")
        assert load_env(name).__name__ == cls
        assert image_recipe(name).buildargs == {"SERVER": name}
        assert image_recipe(name).sources == {}
    assert SERVERS == ("wordle", "echo", "catch")
    assert dict(BUILTIN_SERVERS).keys() >= SHIPPED.keys()
    with pytest.raises(KeyError):
        BUILTIN_SERVERS["nope"]


def test_load_env_refuses_an_unknown_name() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown environment 'nope'.*catch, echo"):
        load_env("nope")


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"name": "Wordle"}, "lower-case identifier"),
        ({"name": "a-b"}, "lower-case identifier"),
        ({"env_id": "no/"}, "not a Gymnasium id"),
        ({"server": "no_class"}, "module:Class"),
        ({"max_episode_steps": 0}, "positive"),
    ],
)
def test_a_bad_record_is_refused(fields: dict[str, object], match: str) -> None:
    good: dict[str, object] = {
        "name": "ok", "env_id": "x/Ok-v0", "server": "m:C", "codec": "m:codec",
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match=match):
        EnvRecord(**{**good, **fields})  # type: ignore[arg-type]


def test_a_record_resolves_its_factories() -> None:
    record = EnvRecord(name="ok", env_id="ok-v0", server="m:C", codec=lambda: "made")
    assert record.make_codec() == "made"
    assert record.make_text_interface() is None
    broken = EnvRecord(name="ok", env_id="ok-v0", server="m:C", codec="json:nope")
    with pytest.raises(ConfigurationError, match="no attribute"):
        broken.make_codec()
    with pytest.raises(ConfigurationError, match="cannot import"):
        EnvRecord(name="ok", env_id="ok-v0", server="m:C", codec="no_such_mod:f").make_codec()
    with pytest.raises(ConfigurationError, match="not 'module:attribute'"):
        EnvRecord(name="ok", env_id="ok-v0", server="m:C", codec="plain").make_codec()
    with pytest.raises(ConfigurationError, match="expected an EnvRecord"):
        openenv_gym.register_environment("wordle")  # type: ignore[arg-type]


def test_the_game_names_are_still_importable_from_spaces() -> None:
    from openenv_gym import spaces
    from openenv_gym_servers.catch.gym import catch_grid
    from openenv_gym_servers.echo.gym import ECHO_TOOL
    from openenv_gym_servers.wordle.gym import WORDLE_OBS_MAX

    assert spaces.catch_grid is catch_grid
    assert spaces.WORDLE_OBS_MAX == WORDLE_OBS_MAX == 8192
    assert spaces.ECHO_TOOL == ECHO_TOOL == "echo_message"
    assert spaces.catch_grid([0] * 49 + [1]).splitlines()[-1] == "....#"
    with pytest.raises(AttributeError):
        spaces.no_such_name  # noqa: B018


def test_importing_openenv_gym_imports_no_game_code() -> None:
    code = (
        "import sys, openenv_gym; "
        "print(sorted(m for m in sys.modules if m.startswith('openenv_gym_servers')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(
        ["openenv_gym_servers"]
        + [
            f"openenv_gym_servers.{n}{m}"
            for n in ("catch", "echo", "wordle")
            for m in ("", ".record")
        ]
    )


@pytest.mark.parametrize(
    "first",
    [
        "import openenv_gym_servers.echo.record",  # the record module before openenv_gym
        "from openenv_gym_servers.echo.record import record",
        "from openenv_gym_servers.echo import EchoEnvironment",
        "import openenv_gym_servers.catch.gym",
        "import openenv_gym.envs",
    ],
)
def test_every_id_is_registered_whatever_is_imported_first(first: str) -> None:
    code = (
        f"{first}\n"
        "import gymnasium, openenv_gym\n"
        "from openenv_gym_servers.echo.record import record\n"
        "print(sorted(i for i in gymnasium.registry if i.startswith('openenv/')))\n"
        "print(openenv_gym.envs.environment('echo') == record())\n"
    )
    out = subprocess.run(  # a record left out would warn: that fails here
        [sys.executable, "-W", "error::RuntimeWarning", "-c", code],
        capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == [
        "['openenv/Catch-v0', 'openenv/Echo-v0', 'openenv/Generic-v0', 'openenv/Wordle-v0']",
        "True",
    ]
