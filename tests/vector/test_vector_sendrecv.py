"""EnvPool-style partial batches: send(actions, env_ids) / recv(batch_size).

What ``recv(batch_size=k)`` returns, as observed: exactly ``min(k, outstanding)`` sub-envs,
never more. Replies arrive a batched frame (or a JSON session) at a time; sub-envs whose
reply arrived beyond the ``k`` asked for wait in a ready queue for the next ``recv``, in
arrival order. ``infos["env_id"]`` names the sub-envs, in the order of the arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from openenv_gym_vector_envs import SLOW

from openenv_gym.exceptions import ConfigurationError, EnvErrorGroup, UsageError, WaitTimeoutError
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

MakeVector = Callable[..., OpenEnvVectorEnv]


def test_recv_returns_the_batch_size_asked_for(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=6, protocol=protocol)
    envs.reset(seed=[0, 10, 20, 30, 40, 50])
    envs.send(np.array([0, 1, 2, 0, 1, 2]), env_ids=[0, 1, 2, 3, 4, 5])
    seen: dict[int, tuple[int, float]] = {}
    for size in (2, 3, 1):
        obs, rewards, terminations, truncations, infos = envs.recv(batch_size=size)
        ids = infos["env_id"]
        assert ids.dtype == np.int64
        assert len(ids) == len(obs) == len(rewards) == len(terminations) == len(truncations) == size
        assert infos["action"].tolist() == [[0, 1, 2, 0, 1, 2][i] for i in ids]
        seen.update({int(i): (int(o), float(r)) for i, o, r in zip(ids, obs, rewards, strict=True)})
    assert seen == {i: (10 * i + 1, 1.0) for i in range(6)}
    with pytest.raises(UsageError, match="send"):
        envs.recv()


def test_send_a_subset_and_recv_more_than_outstanding(
    make_vector: MakeVector, protocol: str
) -> None:
    envs = make_vector(num_envs=4, protocol=protocol, batch_size=4)
    envs.reset(seed=[0, 10, 20, 30])
    envs.send([2, 1], env_ids=np.array([3, 1]))
    obs, rewards, *_, infos = envs.recv()  # default batch_size 4, but only 2 outstanding
    assert sorted(infos["env_id"].tolist()) == [1, 3]
    assert dict(zip(infos["env_id"].tolist(), obs.tolist(), strict=True)) == {1: 11, 3: 31}
    assert rewards.tolist() == [1.0, 1.0]
    # envs 0 and 2 never moved; the others stepped once
    assert envs.step([0, 0, 0, 0])[0].tolist() == [1, 12, 21, 32]


def test_slow_server_returns_last(make_vector: MakeVector, protocol: str, gate: Path) -> None:
    envs = make_vector(num_envs=4, servers=2, protocol=protocol)  # envs 0, 1 on server 0
    assert len(set(envs.get_attr("base_url"))) == 2
    envs.reset(seed=[0, 10, 20, 30], options={"gate": str(gate)})
    envs.send([SLOW, 0, 0, 0])  # env 0 holds server 0 until the gate opens
    _, _, _, _, infos = envs.recv(batch_size=2)
    assert sorted(infos["env_id"].tolist()) == [2, 3]
    with pytest.raises(WaitTimeoutError):
        envs.recv(batch_size=1, timeout=0.05)
    gate.touch()
    obs, *_, infos = envs.recv(batch_size=2)
    assert sorted(infos["env_id"].tolist()) == [0, 1]
    assert dict(zip(infos["env_id"].tolist(), obs.tolist(), strict=True)) == {0: 1, 1: 11}


def test_sending_to_a_busy_env_is_a_usage_error(
    make_vector: MakeVector, protocol: str, gate: Path
) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    envs.reset(options={"gate": str(gate)})
    envs.send([SLOW, 0], env_ids=[0, 1])
    with pytest.raises(UsageError, match=r"\[0\]"):
        envs.send([0], env_ids=[0])
    with pytest.raises(UsageError, match=r"\[1\]"):
        envs.send([0, 0], env_ids=[1, 2])
    with pytest.raises(UsageError):
        envs.step([0, 0, 0, 0])
    with pytest.raises(UsageError):
        envs.reset()
    envs.send([0], env_ids=[3])  # an idle env is fine
    gate.touch()
    _, _, _, _, infos = envs.recv(batch_size=3)
    assert sorted(infos["env_id"].tolist()) == [0, 1, 3]


def test_ready_but_not_received_envs_are_still_busy(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    envs.reset()
    envs.send([0, 0, 0, 0])
    _, _, _, _, infos = envs.recv(batch_size=1)
    left = sorted(set(range(4)) - set(infos["env_id"].tolist()))
    with pytest.raises(UsageError, match="already have a step pending"):
        envs.send([0], env_ids=left[:1])
    with pytest.raises(UsageError, match="recv"):  # would mix up old and new replies
        envs.step_async([0, 0, 0, 0])
    with pytest.raises(UsageError, match="pending"):
        envs.reset()
    obs, *_, infos = envs.recv(batch_size=3)
    assert sorted(infos["env_id"].tolist()) == left
    assert obs.tolist() == [1, 1, 1]
    assert envs.step([0, 0, 0, 0])[0].tolist() == [2, 2, 2, 2]


def test_bad_env_ids_and_batch_sizes(make_vector: MakeVector) -> None:
    envs = make_vector(num_envs=3)
    envs.reset()
    with pytest.raises(ValueError, match="distinct"):
        envs.send([0, 0], env_ids=[1, 1])
    with pytest.raises(ValueError, match="distinct"):
        envs.send([0], env_ids=[3])
    with pytest.raises(ValueError, match="got 1 actions for 2"):
        envs.send([0], env_ids=[0, 1])
    with pytest.raises(EnvErrorGroup) as caught:
        envs.send([0, 9], env_ids=[0, 2])
    assert caught.value.env_indices == [2]
    envs.send([0], env_ids=[0])
    with pytest.raises(ConfigurationError, match="batch_size"):
        envs.recv(batch_size=4)
    with pytest.raises(UsageError, match="step_async"):  # send() is not step_async()
        envs.step_wait()
    obs, *_, infos = envs.recv()
    assert infos["env_id"].tolist() == [0]
    assert obs.tolist() == [1]


def test_send_recv_autoresets_in_next_step_mode(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=2, protocol=protocol)
    envs.reset(options={"episode_length": 1})
    envs.send([0], env_ids=[1])
    _, _, terminations, _, _ = envs.recv()
    assert terminations.tolist() == [True]
    envs.send([0], env_ids=[1])  # the reset step of env 1
    obs, rewards, terminations, _, infos = envs.recv()
    assert (obs.tolist(), rewards.tolist(), terminations.tolist()) == ([0], [0.0], [False])
    assert infos["steps"].tolist() == [0]
    assert envs.step([0, 0])[0].tolist() == [1, 1]


def test_info_of_is_each_sub_envs_info_as_recv_batched_it(
    make_vector: MakeVector, protocol: str
) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    assert envs.info_of(0) == {}  # never reset
    _, infos = envs.reset(seed=[0, 10, 20, 30])
    assert [envs.info_of(i)["action"] for i in range(4)] == infos["action"].tolist()
    envs.send(np.array([2, 1]), env_ids=[3, 1])
    _, _, _, _, infos = envs.recv(batch_size=2)
    for j, i in enumerate(infos["env_id"]):
        info = envs.info_of(int(i))
        assert set(info) == {k for k in infos if not k.startswith("_") and k != "env_id"}
        assert info["action"] == infos["action"][j] == {3: 2, 1: 1}[int(i)]
