"""Bearer tokens: sent on every upgrade and GET, ``OPENENV_GYM_TOKEN`` by default; a 401 is
an :class:`AuthenticationError` (never a reason to fall back from ``/batch`` to ``/ws``)."""

from __future__ import annotations

import pytest

from openenv_gym._http import get_json, with_token
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import AuthenticationError, ConnectError
from openenv_gym.transport.session import open_session

TOKEN = "t0ken-of-the-test"
TIMEOUTS = Timeouts(connect=5.0, step=5.0, close=2.0)
PROTOCOLS = ["auto", "batch", "json"]


@pytest.fixture
def locked(env_server):
    """A PingEnv server that demands ``TOKEN``."""
    return env_server(token=TOKEN)


@pytest.fixture(autouse=True)
def _no_token_in_the_environment(monkeypatch):
    monkeypatch.delenv("OPENENV_GYM_TOKEN", raising=False)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_missing_or_wrong_token_is_an_authentication_error(locked, protocol):
    for token in (None, "wrong"):
        with pytest.raises(AuthenticationError, match="401") as caught:
            open_session(locked.url, protocol=protocol, timeouts=TIMEOUTS, token=token)
        assert isinstance(caught.value, ConnectError)
        assert "token" in str(caught.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_token_opens_the_session(locked, protocol):
    session = open_session(locked.url, protocol=protocol, timeouts=TIMEOUTS, token=TOKEN)
    try:
        assert session.protocol == ("json" if protocol == "json" else "batch")
        assert session.step({"message": "hi"}).observation["echoed"] == "hi"
    finally:
        session.close()


def test_token_from_the_environment(locked, monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_TOKEN", TOKEN)
    session = open_session(locked.url, timeouts=TIMEOUTS)
    session.close()
    # an Authorization header of the caller's own wins over the variable
    with pytest.raises(AuthenticationError):
        open_session(locked.url, timeouts=TIMEOUTS, headers={"authorization": "Bearer x"})


def test_token_replaces_an_authorization_header(locked):
    session = open_session(
        locked.url, timeouts=TIMEOUTS, headers={"Authorization": "Bearer stale"}, token=TOKEN
    )
    session.close()


def test_get_json_raises_on_401_and_sends_the_token(locked):
    with pytest.raises(AuthenticationError, match="401"):
        get_json(f"{locked.url}/health", 2.0)
    status, body = get_json(f"{locked.url}/health", 2.0, headers=with_token(None, TOKEN))
    assert (status, body) == (200, {"status": "healthy"})


def test_with_token(monkeypatch):
    assert with_token({"A": "1"}, "t") == {"A": "1", "Authorization": "Bearer t"}
    assert with_token({"authorization": "Basic x"}, "t") == {"Authorization": "Bearer t"}
    assert with_token(None, None) is None
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "from-env")
    assert with_token(None, None) == {"Authorization": "Bearer from-env"}
    assert with_token({"Authorization": "Bearer mine"}, None) == {"Authorization": "Bearer mine"}
    assert with_token(None, None, from_env=False) is None
