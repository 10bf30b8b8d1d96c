"""``python -m openenv_gym serve``: a real server process, its URL line, its exits."""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request

import pytest
from openenv_gym_test_envs import reap, spawn_cli
from websockets.sync.client import connect

from openenv_gym._http import get_json
from openenv_gym._version import __version__
from openenv_gym.cli import main
from openenv_gym.protocol.batch import decode_frame, encode_frame
from openenv_gym.runtime.settings import options

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


# ------------------------------------------------ limits, token, origin (docs/security.md)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "--port must be in 0..65535, got 70000"),  # served on 4464
        (["--port", "-1"], "--port must be in 0..65535, got -1"),
        (["--port", "http"], "--port='http' is not an integer"),
        (["--max-sessions", "-5"], "--max-sessions must be a positive integer, got '-5'"),
        (["--max-frame", "0"], "--max-frame must be a positive integer, got '0'"),
        (["--max-connections", "0"], "--max-connections must be a positive integer"),
        (["--max-request-slots", "1.5"], "--max-request-slots='1.5' is not an integer"),
        (["--max-connection-slots", "-1"], "--max-connection-slots must be a positive"),
        (["--max-body", "0"], "--max-body must be a positive integer"),
        (["--max-queue-bytes", "x"], "--max-queue-bytes='x' is not an integer"),
        (["--max-send-buffer", "0"], "--max-send-buffer must be a positive integer"),
        (["--idle-timeout", "0"], "--idle-timeout must be > 0 seconds (or none), got '0'"),
        (["--handshake-timeout", "-1"], "--handshake-timeout must be > 0 seconds"),
        (["--send-timeout", "nan"], "--send-timeout must be > 0 seconds"),
        (["--ping-interval", "inf"], "--ping-interval must be > 0 seconds"),
        (["--ping-timeout", "soon"], "--ping-timeout='soon' is not a number of seconds"),
        (["--token", ""], "token must be a non-empty string of visible ASCII"),
        (["--token", "two words"], "token must be a non-empty string of visible ASCII"),
        (["--host", "0.0.0.0"], "refusing to serve on '0.0.0.0' without a token"),
        (["--host", "::"], "refusing to serve on '::' without a token"),
        (["--host", "192.0.2.7"], "or pass --insecure"),
        (["--host", "example.org"], "Give a token (--token or OPENENV_GYM_TOKEN"),
    ],
)
def test_serve_refuses_bad_settings_in_one_line(capsys, args, message):
    """Each is refused before the environment is even loaded, exit 2, one line."""
    assert main(["serve", "--env", "no_such_module_xyz:Env", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("openenv-gym: error: ")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("OPENENV_GYM_MAX_FRAME", "0", "OPENENV_GYM_MAX_FRAME must be a positive integer"),
        ("OPENENV_GYM_MAX_SESSIONS", "-5", "OPENENV_GYM_MAX_SESSIONS must be a positive"),
        ("OPENENV_GYM_IDLE_TIMEOUT", "0", "OPENENV_GYM_IDLE_TIMEOUT must be > 0 seconds"),
        ("OPENENV_GYM_TOKEN", "a b", "token must be a non-empty string of visible ASCII"),
    ],
)
def test_serve_refuses_bad_variables_in_one_line(capsys, monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    assert main(["serve", "--env", "no_such_module_xyz:Env"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def _config(*argv: str):
    from openenv_gym.cli import _parser, _server_config

    return _server_config(_parser().parse_args(["serve", "echo", *argv]))


@pytest.mark.parametrize("option", list(options()), ids=lambda o: o.flag)
def test_every_limit_has_a_flag_and_a_variable_and_the_flag_wins(monkeypatch, option):
    flag_value, env_value = ("7", "9") if option.kind == "count" else ("7.5", "9.5")
    parsed = int if option.kind == "count" else float
    assert getattr(_config(), option.name) == option.default
    monkeypatch.setenv(option.env_var, env_value)
    assert getattr(_config(), option.name) == parsed(env_value)
    assert getattr(_config(option.flag, flag_value), option.name) == parsed(flag_value)
    if option.kind == "seconds":  # a timeout can be turned off, by flag or variable
        assert getattr(_config(option.flag, "none"), option.name) is None
        monkeypatch.setenv(option.env_var, "off")
        assert getattr(_config(), option.name) is None


def test_token_origins_and_insecure_reach_the_config(monkeypatch):
    config = _config("--allow-origin", "https://a.example", "--allow-origin", "http://b:8")
    assert (config.token, config.allowed_origins) == (None, ("https://a.example", "http://b:8"))
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "from-env")
    assert _config().token == "from-env"
    assert _config("--token", "from-flag").token == "from-flag"
    exposed = _config("--host", "0.0.0.0", "--token", "t")
    assert (exposed.host, exposed.exposed) == ("0.0.0.0", False)
    monkeypatch.delenv("OPENENV_GYM_TOKEN")
    insecure = _config("--host", "0.0.0.0", "--insecure")
    assert (insecure.insecure, insecure.exposed) == (True, True)
    for loopback in ("127.0.0.1", "127.8.9.10", "::1", "localhost", "[::1]"):
        assert not _config("--host", loopback).exposed


@pytest.mark.integration
def test_serve_token_from_the_environment_guards_every_endpoint(cli_server):
    server = cli_server(
        "openenv_gym_test_envs:PingEnv",
        "--max-sessions",
        "3",
        env={"OPENENV_GYM_TOKEN": "s3cret", "OPENENV_GYM_MAX_SESSIONS": "1"},
    )
    for path in ("/health", "/schema", "/metadata"):
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(server.url + path, timeout=5)
        assert info.value.code == 401
        request = urllib.request.Request(
            server.url + path, headers={"Authorization": "Bearer s3cret"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
    ws_url = server.url.replace("http://", "ws://") + "/batch"
    with connect(
        ws_url, proxy=None, open_timeout=5, additional_headers={"Authorization": "Bearer s3cret"}
    ) as ws:
        ws.send(encode_frame({"op": "hello", "id": 0, "versions": [1], "client": "t"}))
        hello = decode_frame(ws.recv(timeout=5))
    assert hello["max_slots"] == 3  # the flag won over OPENENV_GYM_MAX_SESSIONS=1


@pytest.mark.integration
def test_serve_insecure_on_every_address_warns_on_stderr(cli_server):
    server = cli_server("openenv_gym_test_envs:PingEnv", "--host", "0.0.0.0", "--insecure")
    assert server.url.startswith("http://0.0.0.0:")
    port = server.url.rsplit(":", 1)[1]
    assert get_json(f"http://127.0.0.1:{port}/health", timeout=5)[0] == 200
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(15) == 0
    assert server.proc.stderr is not None
    err = server.proc.stderr.read()
    assert "without a token (insecure)" in err
    assert "anyone who can reach this address" in err


def test_every_limit_and_variable_is_documented():
    """docs/configuration.md and docs/security.md list every limit, flag and variable."""
    from pathlib import Path

    from openenv_gym.config import ENV_VARS

    docs = Path(__file__).resolve().parents[2] / "docs"
    configuration = (docs / "configuration.md").read_text()
    security = (docs / "security.md").read_text()
    assert "OPENENV_GYM_TOKEN" in ENV_VARS
    assert "`OPENENV_GYM_TOKEN`" in configuration
    assert "`OPENENV_GYM_TOKEN`" in security
    for option in options():
        assert option.env_var in ENV_VARS, option.env_var
        for page in (configuration, security):
            assert f"`{option.flag}`" in page, option.flag
            assert f"`{option.env_var}`" in page, option.env_var
    for flag in ("--token", "--allow-origin", "--insecure"):
        assert f"`{flag}" in configuration
        assert f"`{flag}" in security
