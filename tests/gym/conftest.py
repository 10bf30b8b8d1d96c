from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_gym.env import OpenEnvEnv


@pytest.fixture
def wordle() -> Iterator[OpenEnvEnv]:
    env = OpenEnvEnv("wordle")
    yield env
    env.close()
