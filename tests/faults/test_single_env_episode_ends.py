"""A single env's episode bookkeeping at its edges (``Episodes.absorb_reply``).

A reset whose reply already says ``done`` leaves the episode ended: the next ``step``
asks for a reset, as after any end.
"""

from __future__ import annotations

import pytest
from fault_support import counter_servers, no_leftovers  # noqa: F401
from openenv_gym_vector_envs import SPEC, counter_codec

from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import ResetNeededError
from openenv_gym.providers import LocalProvider

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
]


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_a_reset_that_says_done_leaves_the_episode_ended(protocol: str) -> None:
    with OpenEnvEnv(codec=counter_codec(), provider=LocalProvider(SPEC), protocol=protocol) as env:
        env.reset(seed=3, options={"episode_length": 0})  # done from the start
        with pytest.raises(ResetNeededError, match="call reset"):
            env.step(0)
        env.reset(seed=3, options={"episode_length": 2})
        obs, _, terminated, _, _ = env.step(0)
        assert (obs, terminated) == (4, False)
