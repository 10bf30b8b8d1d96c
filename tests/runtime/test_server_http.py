"""EnvServer's plain HTTP endpoints: /health, /schema, /metadata, 404, 426."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
from openenv_gym_test_envs import DuckEnv, PingAction, PingEnv, PingObservation, PingState

from openenv_gym._http import get_json
from openenv_gym.runtime.environment import EnvironmentMetadata, Observation, State


def get(base_url: str, path: str) -> tuple[int, str, str]:
    """GET ``path``; return (status, content type, body text)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    finally:
        conn.close()


def test_health(ping_server):
    status, content_type, body = get(ping_server.url, "/health")
    assert (status, content_type, body) == (200, "application/json", '{"status":"healthy"}')


def test_health_ignores_query_string(ping_server):
    assert get_json(ping_server.url + "/health?probe=1", timeout=5) == (200, {"status": "healthy"})


def test_schema_is_the_models_json_schemas(ping_server):
    status, content_type, body = get(ping_server.url, "/schema")
    assert (status, content_type) == (200, "application/json")
    assert json.loads(body) == {
        "action": PingAction.model_json_schema(),
        "observation": PingObservation.model_json_schema(),
        "state": PingState.model_json_schema(),
    }


def test_schema_of_duck_typed_env_comes_from_annotations(env_server):
    running = env_server(DuckEnv)
    status, body = get_json(running.url + "/schema", timeout=5)
    assert status == 200
    assert body["action"] == PingAction.model_json_schema()
    assert body["observation"] == PingObservation.model_json_schema()
    assert body["state"] == PingState.model_json_schema()


def test_schema_defaults_when_only_the_action_is_known(env_server):
    class Bare:
        action_type = PingAction

        def reset(self):
            return Observation()

        def step(self, action):
            return Observation()

    running = env_server(Bare)
    _, body = get_json(running.url + "/schema", timeout=5)
    assert body["observation"] == Observation.model_json_schema()
    assert body["state"] == State.model_json_schema()


def test_metadata_from_the_env(ping_server):
    status, body = get_json(ping_server.url + "/metadata", timeout=5)
    assert status == 200
    assert body == PingEnv().get_metadata().model_dump()


def test_metadata_default_when_env_has_none(env_server):
    running = env_server(DuckEnv)
    _, body = get_json(running.url + "/metadata", timeout=5)
    assert (
        body == EnvironmentMetadata(name="DuckEnv", description="DuckEnv environment").model_dump()
    )


@pytest.mark.parametrize("path", ["/", "/nope", "/docs", "/ws/extra", "/healthz"])
def test_unknown_path_is_404(ping_server, path):
    status, content_type, body = get(ping_server.url, path)
    assert (status, content_type) == (404, "application/json")
    assert json.loads(body) == {"detail": "Not Found"}


@pytest.mark.parametrize("path", ["/ws", "/batch"])
def test_websocket_endpoint_without_upgrade_is_426(ping_server, path):
    status, content_type, body = get(ping_server.url, path)
    assert (status, content_type) == (426, "application/json")
    assert json.loads(body) == {"detail": "WebSocket endpoint"}


def test_http_requests_do_not_take_sessions(ping_server):
    for path in ("/health", "/schema", "/metadata", "/ws", "/nope"):
        get(ping_server.url, path)
    assert ping_server.server.active == 0


def test_server_header_names_us(ping_server):
    parts = urlsplit(ping_server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    try:
        conn.request("GET", "/health")
        server = conn.getresponse().getheader("Server", "")
    finally:
        conn.close()
    assert server.startswith("openenv-gym/")
