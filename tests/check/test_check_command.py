"""``openenv-gym check`` against our own servers: every check passes (docs/check.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from check_fake_servers import our_server

from openenv_gym.check import CHECK_NAMES, Status, check_server
from openenv_gym.cli import main

pytestmark = pytest.mark.integration

EXPECTED_ACTIONS = {
    "echo": {"message": "a"},
    "wordle": {"message": "a"},
    "catch": {"action_id": 0},
}


@pytest.mark.parametrize("name", ["echo", "wordle", "catch"])
def test_our_servers_pass_every_check(name):
    with our_server(name) as url:
        report = check_server(url)
    assert report.ok, report.render()
    assert [r.name for r in report.results] == list(CHECK_NAMES)
    statuses = {r.name: r.status for r in report.results}
    expected = dict.fromkeys(CHECK_NAMES, Status.PASS)
    if name == "echo":  # nothing random: the seed check cannot tell, and says so
        expected["seed"] = Status.WARN
    assert statuses == expected, report.render()
    assert report["session"].info["action"] == EXPECTED_ACTIONS[name]
    assert report["capacity"].info == {"capacity_at_least": 16}
    assert (
        report["capacity"].detail == "at least 16 sessions open at once (the bound of this check)"
    )
    assert report["close"].info["close_code"] == 1000
    assert report["batch"].info["env"] == name
    assert report["seed"].info["deterministic"] is (None if name == "echo" else True)


def test_capacity_is_found_and_freed():
    with our_server("echo", "--max-sessions", "3") as url:
        report = check_server(url, max_sessions=8)
    assert report.ok, report.render()
    assert report["capacity"].info == {"capacity": 3}
    assert "capacity 3 sessions (CAPACITY_REACHED on session 4, max_sessions 3)" in (
        report["capacity"].detail
    )
    assert "sessions are freed by close" in report["capacity"].detail


def test_cli_subprocess_text_and_exit_status():
    with our_server("catch") as url:
        proc = subprocess.run(
            [sys.executable, "-m", "openenv_gym", "check", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"openenv-gym check {url}"
    assert [line.split()[:2] for line in lines[1:-1]] == [["PASS", n] for n in CHECK_NAMES]
    assert lines[-1] == "OK: 9 passed, 0 warnings, 0 failed, 0 skipped"
    assert proc.stderr == ""


def test_cli_json_and_given_action(capsys):
    with our_server("wordle") as url:
        status = main(["check", url, "--json", "--action", '{"message": "[crane]"}'])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert status == 0
    assert report["ok"] is True
    assert report["url"] == url
    assert report["counts"] == {"pass": 9, "warn": 0, "fail": 0, "skip": 0}
    session = next(c for c in report["checks"] if c["name"] == "session")
    assert session["info"]["action"] == {"message": "[crane]"}
    assert 'step {"message": "[crane]"}' in session["detail"]


def test_cli_given_action_rejected_fails(capsys):
    with our_server("catch") as url:
        status = main(["check", url, "--action", '{"action_id": "left"}'])
    out = capsys.readouterr().out
    assert status == 1
    session = next(line for line in out.splitlines() if line.split()[1:2] == ["session"])
    assert session.split()[0] == "FAIL"
    assert "(the given action) was answered with error VALIDATION_ERROR" in session
    assert out.splitlines()[-1].startswith("FAILED: ")


@pytest.mark.parametrize(
    ("action", "message"),
    [("not json", "--action is not JSON"), ("[1]", "--action must be a JSON object")],
)
def test_cli_bad_action_exits_2(capsys, action, message):
    assert main(["check", "http://127.0.0.1:9", "--action", action]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("openenv-gym: error: ")
    assert message in captured.err


def test_a_server_with_a_token_is_checked_with_it(monkeypatch):
    monkeypatch.delenv("OPENENV_GYM_TOKEN", raising=False)
    with our_server("echo", "--token", "s3cret-token") as url:
        refused = check_server(url, check_timeout=20)
        passed = check_server(url, token="s3cret-token")
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "openenv_gym",
                "check",
                url,
                "--token",
                "s3cret-token",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert not refused.ok  # without the token every endpoint answers 401
    assert passed.ok, passed.render()
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert json.loads(cli.stdout)["ok"] is True
