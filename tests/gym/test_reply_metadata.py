"""``metadata`` that a server nests in the observation reaches ``info`` (issue 23, item 4).

OpenEnv's JSON replies carry ``metadata`` inside the observation; some servers (older
openenv lines, hand-written ones) send it only there, with no top-level ``metadata``. The
single env and the vector env put it in ``info["metadata"]`` all the same, as they do the
top-level one (docs/spaces.md: ``info`` carries the observation fields the Gymnasium
observation leaves out, and ``metadata``). Dropping the nested fallback passed every test
before these. The server is a real ``websockets`` server on 127.0.0.1 that writes its
replies by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from websockets.asyncio.server import ServerConnection

from openenv_gym.env import OpenEnvEnv
from openenv_gym.protocol import openenv as op
from openenv_gym.spaces import Codec
from openenv_gym.vector import OpenEnvVectorEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from openenv_gym_test_envs import running_ws_server

TIMEOUTS = {"connect": 10.0, "step": 10.0, "close": 2.0}


def nesting_server(top_level: bool) -> Callable[[ServerConnection], Any]:
    """Replies ``{"n": k, "note": ..., "metadata": {"turn": k}}`` inside the observation;
    with ``top_level`` the same metadata also beside it (openenv >= 0.4's shape)."""

    async def handler(ws: ServerConnection) -> None:
        session = op.ServerSession()
        turn = 0
        async for frame in ws:
            session.receive_data(frame)
            for request in session.events_received():
                if isinstance(request, op.StepRequest):
                    turn += 1
                elif isinstance(request, op.ResetRequest):
                    turn = 0
                else:
                    continue
                meta = {"turn": turn, "tag": f"t{turn}"}
                observation = {"n": turn, "note": "hi", "metadata": meta}
                session.send_observation(
                    observation, float(turn), False, metadata=meta if top_level else None
                )
            for out in session.data_to_send():
                await ws.send(out)

    return handler


def codec() -> Codec:
    return Codec(
        "nesting",
        spaces.Discrete(100),
        spaces.Discrete(2),
        lambda action: {"a": int(action)},
        lambda obs: int(obs["n"]),
        lambda obs: str(obs["n"]),
        primary="n",
    )


@pytest.fixture(params=[False, True], ids=["nested-only", "also-top-level"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    with running_ws_server(nesting_server(request.param)) as base:
        yield base


def test_single_env_info_has_the_nested_metadata(url: str) -> None:
    env = OpenEnvEnv(codec=codec(), base_url=url, protocol="json", timeouts=TIMEOUTS)
    try:
        obs, info = env.reset()
        assert obs == 0
        assert info == {"note": "hi", "metadata": {"turn": 0, "tag": "t0"}}
        obs, reward, _, _, info = env.step(1)
        assert (obs, reward) == (1, 1.0)
        assert info == {"note": "hi", "metadata": {"turn": 1, "tag": "t1"}}
    finally:
        env.close()


def test_vector_env_infos_have_the_nested_metadata(url: str) -> None:
    envs = OpenEnvVectorEnv(
        codec=codec(), num_envs=2, base_url=url, protocol="json", timeouts=TIMEOUTS
    )
    try:
        _, infos = envs.reset()
        assert infos["metadata"]["turn"].tolist() == [0, 0]
        obs, _, _, _, infos = envs.step(np.array([1, 0]))
        assert obs.tolist() == [1, 1]
        assert infos["metadata"]["turn"].tolist() == [1, 1]
        assert list(infos["metadata"]["tag"]) == ["t1", "t1"]
        assert infos["_metadata"].tolist() == [True, True]
        assert envs.info_of(1) == {"note": "hi", "metadata": {"turn": 1, "tag": "t1"}}
    finally:
        envs.close()
