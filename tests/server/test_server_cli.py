"""``python -m openenv_gym serve``: a real server process, its URL line, its exits."""

from __future__ import annotations

import json
import re
import signal

import pytest
from openenv_gym_test_envs import reap, spawn_cli
from websockets.sync.client import connect

from openenv_gym._http import get_json
from openenv_gym._version import __version__
from openenv_gym.cli import main

URL_LINE = re.compile(r"http://127\.0\.0\.1:(\d+)")


@pytest.mark.integration
def test_serve_prints_url_and_serves(cli_server):
    server = cli_server("openenv_gym_test_envs:PingEnv")
    match = URL_LINE.fullmatch(server.url)
    assert match is not None, server.url
    assert int(match.group(1)) > 0
    assert get_json(server.url + "/health", timeout=5) == (200, {"status": "healthy"})
    status, metadata = get_json(server.url + "/metadata", timeout=5)
    assert (status, metadata["name"]) == (200, "PingEnv")
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, proxy=None, open_timeout=5) as ws:
        ws.send('{"type":"step","data":{"message":"hi"}}')
        reply = json.loads(ws.recv(timeout=5))
    assert reply["data"]["observation"]["echoed"] == "hi"


@pytest.mark.integration
def test_serve_options_reach_the_server(cli_server):
    server = cli_server("openenv_gym_test_envs:PingEnv", "--max-sessions", "1")
    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, proxy=None, open_timeout=5) as first:
        first.send('{"type":"reset"}')
        first.recv(timeout=5)
        with connect(ws_url, proxy=None, open_timeout=5) as second:
            reply = json.loads(second.recv(timeout=5))
    assert reply["data"]["code"] == "CAPACITY_REACHED"
    assert reply["data"]["max_sessions"] == 1


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_server_cleanly(cli_server, sig):
    server = cli_server("openenv_gym_test_envs:PingEnv")
    server.proc.send_signal(sig)
    assert server.proc.wait(15) == 0


@pytest.mark.integration
def test_exit_with_stdin(cli_server):
    server = cli_server("openenv_gym_test_envs:PingEnv", "--exit-with-stdin")
    assert server.proc.poll() is None
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    assert server.proc.wait(15) == 0


@pytest.mark.integration
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "no-such-env"], "unknown environment 'no-such-env'"),
        (["serve", "--env", "no_such_module_xyz:Env"], "cannot import 'no_such_module_xyz'"),
        (["serve", "--env", "openenv_gym_test_envs:Missing"], "has no attribute 'Missing'"),
        (["serve", "--env", "openenv_gym_test_envs:SLEEP_MARKER"], "is not a class or factory"),
        (["serve"], "name an environment"),
    ],
)
def test_bad_environment_exits_2_with_a_message(args, message):
    proc = spawn_cli(*args, "--port", "0")
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        reap(proc)
    assert proc.returncode == 2
    assert out == ""
    assert err.startswith("openenv-gym: error: ")
    assert message in err
    assert "Traceback" not in err


@pytest.mark.integration
def test_env_without_action_model_exits_2():
    proc = spawn_cli("serve", "--env", "openenv_gym_test_envs:Lifecycle", "--port", "0")
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        reap(proc)
    assert proc.returncode == 2
    assert "cannot tell the action model" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "no-such-env"], "unknown environment 'no-such-env'"),
        (["serve", "--env", "openenv_gym_test_envs:Missing"], "has no attribute 'Missing'"),
        (["serve"], "name an environment"),
    ],
)
def test_main_in_process_reports_bad_environment(capsys, args, message):
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("openenv-gym: error: ")
    assert message in err


def test_main_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"openenv-gym {__version__}"


def test_main_needs_a_command(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "serve" in capsys.readouterr().err
