"""``openenv_gym.assemble``: the one set-up sequence, on real local servers."""

from __future__ import annotations

from typing import Any

import psutil
import pytest

from openenv_gym.assemble import Assembly, Recipe, Started, assemble, fetch_schema
from openenv_gym.exceptions import ConfigurationError
from openenv_gym.providers import LocalProvider
from openenv_gym.spaces import codec_from_schema
from openenv_gym.transport.session import Session, open_session

pytestmark = pytest.mark.integration


def gone(pids: list[int]) -> bool:
    """Every process has exited (a zombie waiting for its parent counts)."""
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def sessions(urls: list[str], headers: list[dict[str, str] | None]) -> list[Session]:
    return [open_session(u, protocol="json", headers=h) for u, h in zip(urls, headers, strict=True)]


def test_without_connect_only_the_servers_start() -> None:
    started = assemble(Recipe("echo", provider_options={"num_servers": 2}))
    try:
        assert type(started) is Started
        assert isinstance(started.provider, LocalProvider)
        assert len(started.urls) == 2
        assert started.seeded  # our own server, started by us
        pids = started.provider.pids
        assert len(pids) == 2
        assert not gone(pids)
    finally:
        started.provider.close()
    assert gone(pids)


def test_connect_gets_every_server_with_its_own_token() -> None:
    recipe = Recipe("catch", provider_options={"num_servers": 2}, headers={"X-Trace": "1"})
    parts = assemble(recipe, sessions)
    try:
        assert isinstance(parts, Assembly)
        assert parts.codec.name == "catch"
        assert parts.tokens == [None, None]
        for k, headers in enumerate(parts.headers):
            assert headers == {"X-Trace": "1", "Authorization": f"Bearer {parts.provider.token(k)}"}
        assert parts.provider.token(0) != parts.provider.token(1)
        for session in parts.connection:
            assert session.reset(seed=1).observation
    finally:
        for session in parts.connection:
            session.close()
        parts.provider.close()


def test_a_generic_codec_comes_from_the_first_servers_schema() -> None:
    parts = assemble(Recipe("generic", server="echo"), sessions)
    try:
        schema = fetch_schema(parts.urls[0], headers=parts.headers[0])
        assert parts.codec.action_space == codec_from_schema(schema).action_space
        assert parts.seeded  # server="echo" is our own Echo, started by us
    finally:
        for session in parts.connection:
            session.close()
        parts.provider.close()


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_failed_connect_stops_every_server(error: type[BaseException]) -> None:
    provider = LocalProvider("echo", num_servers=2)

    def connect(urls: list[str], headers: Any) -> None:
        assert len(provider.pids) == 2
        assert not gone(provider.pids)
        raise error("no sessions today")

    with pytest.raises(error, match="no sessions today"):
        assemble(Recipe("echo", provider=provider), connect)
    assert len(provider.pids) == 2
    assert gone(provider.pids)


def test_a_token_list_of_the_wrong_length_stops_the_servers() -> None:
    provider = LocalProvider("echo", num_servers=2)
    with pytest.raises(ConfigurationError, match="token= lists 3 tokens for 2 servers"):
        assemble(Recipe("echo", provider=provider, token=["a", "b", "c"]), sessions)
    assert len(provider.pids) == 2
    assert gone(provider.pids)


def test_arguments_that_do_not_go_together_fail_before_anything_starts() -> None:
    provider = LocalProvider("echo")
    with pytest.raises(ConfigurationError, match="unknown"):
        assemble(Recipe("no-such-env", provider=provider), sessions)
    with pytest.raises(ConfigurationError, match="refine the spaces"):
        assemble(Recipe("echo", tool="echo", provider=provider), sessions)
    assert provider.pids == []
