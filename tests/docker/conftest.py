"""Fixtures of the docker tests: the engine, the no-leftover check, official-like images."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from docker_support import OfficialImages, ours

from openenv_gym.providers.docker import docker_client


@pytest.fixture(scope="session")
def client() -> Any:
    return docker_client()  # raises (fails the test) when there is no engine


@pytest.fixture(autouse=True)
def no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that leaves a container of this process behind (and remove it)."""
    yield
    if "client" not in request.fixturenames:
        return
    engine = request.getfixturevalue("client")
    left = ours(engine)
    for container in left:
        container.remove(force=True)
    assert not left, f"containers left behind: {[c.short_id for c in left]}"


@pytest.fixture(scope="session")
def official(client: Any) -> Iterator[OfficialImages]:
    images = OfficialImages(client)
    yield images
    images.close()
