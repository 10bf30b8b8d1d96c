"""The command line a person reads: help with examples, checked options, ``envs`` (issue 15)."""

from __future__ import annotations

import argparse
import json
import logging

import gymnasium
import pytest

from openenv_gym.cli import LOG_LEVELS, _parser, main
from openenv_gym.registry import ENV_IDS
from openenv_gym.spaces import codec_for, describe_space


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and subcommand parser, by its words (``("ray", "up")``)."""
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*path, name))
    return found


COMMANDS = [path for path, _ in _commands(_parser())]
LEAVES = [
    path
    for path, parser in _commands(_parser())
    if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
]


def test_top_level_help_is_plain_text_with_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out  # was the module docstring's reST markup
    assert "examples:\n  openenv-gym envs" in out
    assert "openenv-gym serve wordle --port 8000" in out
    for command in ("envs", "serve", "check", "images", "gc", "ray"):
        assert f"\n    {command} " in out


@pytest.mark.parametrize("path", COMMANDS[1:], ids=" ".join)
def test_every_command_help_has_an_example_of_itself(capsys, path):
    with pytest.raises(SystemExit) as info:
        main([*path, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out
    examples = out.split("examples:\n", 1)
    assert len(examples) == 2, out
    assert f"openenv-gym {' '.join(path)}" in examples[1]


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_refuses_an_unknown_log_level(capsys, path):
    positional = {"serve": [], "check": ["http://127.0.0.1:1"], "ray up": ["p", "echo"]}
    args = [*path, *positional.get(" ".join(path), []), "--log-level", "debugg"]
    if path == ("ray", "down"):
        args.insert(2, "p")
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --log-level: invalid choice: 'DEBUGG'" in err
    assert "'DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'" in err


@pytest.mark.parametrize("spelling", ["debug", "Info", "WARNING"])
def test_log_level_in_any_case(spelling):
    args = _parser().parse_args(["envs", "--log-level", spelling])
    assert args.log_level == spelling.upper()
    assert args.log_level in LOG_LEVELS
    assert isinstance(getattr(logging, args.log_level), int)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--max-sessions", "0", "must be a positive integer, got '0'"),
        ("--max-sessions", "-2", "must be a positive integer, got '-2'"),
        ("--max-sessions", "many", "'many' is not an integer"),
        ("--reply-timeout", "0", "must be > 0 seconds, got '0'"),
        ("--check-timeout", "-1", "must be > 0 seconds, got '-1'"),
        ("--check-timeout", "nan", "must be > 0 seconds, got 'nan'"),
        ("--reply-timeout", "soon", "'soon' is not a number of seconds"),
    ],
)
def test_check_refuses_bad_counts_and_times_in_one_line(capsys, option, value, message):
    """Refused by argparse before any connection (the URL is unreachable anyway)."""
    with pytest.raises(SystemExit) as info:
        main(["check", "http://127.0.0.1:1", option, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: {message}" in err
    assert err.splitlines()[-1].startswith("openenv-gym check: error:")


def test_envs_lists_every_id_with_its_spaces(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    for env_id, entry in ENV_IDS.items():
        assert env_id in gymnasium.registry
        assert f"{env_id}  (" in out
        if entry.env != "generic":
            codec = codec_for(entry.env)
            assert f"  action       {describe_space(codec.action_space)}\n" in out
            assert f"  observation  {describe_space(codec.observation_space)}\n" in out
    assert "openenv/Wordle-v0  (serve wordle)\n  action       Text(1, 256, printable ASCII)" in out
    assert "openenv/Catch-v0  (serve catch)\n  action       Discrete(3)" in out
    assert "openenv/Generic-v0  (any OpenEnv server)" in out


def test_envs_json(capsys):
    assert main(["envs", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in rows] == list(ENV_IDS)
    echo = next(row for row in rows if row["id"] == "openenv/Echo-v0")
    assert echo == {
        "id": "openenv/Echo-v0",
        "server": "echo",
        "action": "Text(1, 4096, printable ASCII)",
        "observation": "Text(0, 4096, printable ASCII)",
    }


def test_docs_cli_shows_what_envs_prints(capsys):
    """docs/cli.md's sample is the real output (so it cannot drift)."""
    from pathlib import Path

    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    page = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert f"```console\n$ openenv-gym envs\n{out}```" in page
