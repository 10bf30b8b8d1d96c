"""A server on a thread of its own (what each Ray actor runs)."""

from __future__ import annotations

import socket

import pytest

from openenv_gym._http import get_json
from openenv_gym.exceptions import AuthenticationError, ConfigurationError, OpenEnvGymError
from openenv_gym.runtime.hosting import ServerThread
from openenv_gym.runtime.settings import ServerConfig


def test_serves_with_its_token_until_stopped() -> None:
    thread = ServerThread("echo", ServerConfig(token="tok"))
    url = thread.start()
    try:
        assert url == thread.url
        assert thread.start() == url  # idempotent
        with pytest.raises(AuthenticationError):
            get_json(f"{url}/health", 5.0)
        auth = {"Authorization": "Bearer tok"}
        assert get_json(f"{url}/health", 5.0, headers=auth) == (200, {"status": "healthy"})
    finally:
        thread.stop()
    thread.stop()  # idempotent
    with pytest.raises(OpenEnvGymError):
        get_json(f"{url}/health", 2.0)


def test_a_taken_port_fails_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        thread = ServerThread("echo", ServerConfig(port=port))
        with pytest.raises(OpenEnvGymError, match=f"cannot listen on 127.0.0.1:{port}"):
            thread.start()
        thread.stop()


def test_an_unknown_server_fails_at_once() -> None:
    with pytest.raises(ConfigurationError, match="unknown environment"):
        ServerThread("nope", ServerConfig())
