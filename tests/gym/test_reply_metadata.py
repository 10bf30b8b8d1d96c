"""``metadata`` that a server nests in the observation reaches ``info`` (issue 23, item 4),
and a codec that reads ``metadata`` sees it in the observation on both protocols.

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
from openenv_gym.replies import reply_info, wire_observation
from openenv_gym.spaces import Codec
from openenv_gym.vector import OpenEnvVectorEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from openenv_gym_test_envs import PingEnv, running_env_server, running_ws_server

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


# ---------------------------------------------- codecs that read metadata (or do not)


def ping_codec(reads_metadata: bool, seen: list[dict[str, Any]]) -> Codec:
    """PingEnv's spaces; ``seen`` gets every wire observation the codec decodes."""

    def decode(obs: Any) -> str:
        seen.append(dict(obs))
        return str(obs["echoed"])

    return Codec(
        "ping",
        spaces.Text(64),
        spaces.Text(64),
        lambda action: {"message": action},
        decode,
        decode,
        primary="echoed",
        reads_metadata=reads_metadata,
    )


@pytest.mark.parametrize("protocol", ["batch", "json"])
@pytest.mark.parametrize("reads", [True, False], ids=["reads-metadata", "does-not"])
def test_a_codec_sees_metadata_in_the_observation_only_if_it_reads_it(
    protocol: str, reads: bool
) -> None:
    """The batched protocol sends metadata beside the observation, OpenEnv's JSON inside it
    (as well): a codec with ``reads_metadata`` finds it inside on both; one without it gets
    the observation as the server sent it. ``info`` has it either way."""
    with running_env_server(PingEnv) as server:
        seen: list[dict[str, Any]] = []
        env = OpenEnvEnv(
            codec=ping_codec(reads, seen), base_url=server.url, protocol=protocol, timeouts=TIMEOUTS
        )
        try:
            env.reset()
            obs, _, _, _, info = env.step("hi")
            assert obs == "hi"
            assert info["metadata"] == {"step": 1}
            if reads or protocol == "json":
                assert seen[-1]["metadata"] == {"step": 1}
            else:
                assert "metadata" not in seen[-1]
            envs = OpenEnvVectorEnv(
                codec=ping_codec(reads, seen),
                num_envs=2,
                base_url=server.url,
                protocol=protocol,
                timeouts=TIMEOUTS,
            )
            try:
                envs.reset()
                seen.clear()
                _, _, _, _, infos = envs.step(["a", "bb"])
                assert infos["metadata"]["step"].tolist() == [1, 1]
                assert len(seen) == 2  # one observation decoded per sub-env
                if reads:
                    assert [o["metadata"] for o in seen] == [{"step": 1}, {"step": 1}]
                elif protocol == "batch":
                    assert all("metadata" not in o for o in seen)
            finally:
                envs.close()
        finally:
            env.close()


# --------------------------------------------------- the functions themselves (public)


def test_reply_info_leaves_out_what_the_observation_holds() -> None:
    nested = op.ObservationReceived({"n": 1, "note": "x", "metadata": {"a": 1}}, 1.0, False, None)
    assert reply_info(nested, "n") == {"note": "x", "metadata": {"a": 1}}
    assert reply_info(nested, None) == {"n": 1, "note": "x", "metadata": {"a": 1}}
    assert reply_info(nested, {"n", "note"}) == {"metadata": {"a": 1}}
    both = op.ObservationReceived({"n": 1, "metadata": {"a": 1}}, 1.0, False, {"b": 2})
    assert reply_info(both, "n") == {"metadata": {"b": 2}}  # the top-level one, when sent
    assert reply_info(both, {"n"}) == {"metadata": {"b": 2}}
    empty = op.ObservationReceived({"n": 1, "metadata": {}}, None, False, None)
    assert reply_info(empty, "n") == {}  # an empty metadata is none
    assert reply_info(empty, {"n"}) == {}
    assert reply_info(empty, None) == {"n": 1}


def test_wire_observation_adds_metadata_only_for_a_codec_that_reads_it() -> None:
    reader, other = ping_codec(True, []), ping_codec(False, [])
    own = {"echoed": "x", "metadata": {"nested": 1}}
    assert wire_observation(reader, own, {"top": 2}) is own  # its own metadata stays
    assert wire_observation(reader, {"echoed": "x"}, {"top": 2}) == {
        "echoed": "x",
        "metadata": {"top": 2},
    }
    assert wire_observation(reader, {"echoed": "x", "metadata": {}}, {"top": 2}) == {
        "echoed": "x",
        "metadata": {"top": 2},
    }
    bare = {"echoed": "x"}
    assert wire_observation(reader, bare, None) is bare
    assert wire_observation(reader, bare, {}) is bare
    assert wire_observation(other, bare, {"top": 2}) is bare
