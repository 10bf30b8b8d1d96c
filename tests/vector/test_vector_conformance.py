"""OpenEnvVectorEnv against the Gymnasium 1.x VectorEnv contract, over both wire protocols.

Every test runs twice: against the sync vector env and against the asyncio one
(:class:`~openenv_gym.aio.AsyncOpenEnvVectorEnv`, its calls awaited one by one).

Exact traces come from the scripted :class:`~openenv_gym_vector_envs.CounterEnv` (obs =
counter, reward = step count, terminates after K steps) served by real local server
processes; expected infos are built with Gymnasium's own ``VectorEnv._add_info``. The
behaviours follow Gymnasium's ``tests/vector`` (``test_autoreset_mode.py``,
``test_vector_env.py``): autoreset traces, seeding, partial resets and their failures,
action counts.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.spaces import Discrete
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import batch_space
from openenv_gym_vector_envs import RAISE, SLOW, counter_codec
from vector_checks import counter_info, gym_infos, numeric_arrays, same

from openenv_gym.exceptions import (
    ConfigurationError,
    EnvErrorGroup,
    UsageError,
    WaitTimeoutError,
)
from openenv_gym.vector import OpenEnvVectorEnv

pytestmark = pytest.mark.integration

MakeVector = Callable[..., OpenEnvVectorEnv]
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


@pytest.fixture(params=["sync", "asyncio"])
def make_vector(
    request: pytest.FixtureRequest, make_vector: MakeVector, make_async_vector: MakeVector
) -> MakeVector:
    """Every test of this suite runs against the sync and the asyncio vector env."""
    return make_vector if request.param == "sync" else make_async_vector


def set_lengths(envs: OpenEnvVectorEnv, lengths: Sequence[int]) -> None:
    """Give sub-env i the episode length ``lengths[i]`` (it sticks over later resets)."""
    envs.reset()
    for length in sorted(set(lengths)):
        mask = np.array([k == length for k in lengths])
        envs.reset(options={"reset_mask": mask, "episode_length": length})


def check_step(
    out: tuple[Any, ...],
    obs: list[int],
    rewards: list[float],
    terminations: list[bool],
    truncations: list[bool] | None = None,
) -> dict[str, Any]:
    """Assert one step's arrays exactly (values and dtypes); return its infos."""
    got_obs, got_rewards, got_terms, got_truncs, infos = out
    n = len(obs)
    assert got_obs.dtype == np.int64
    assert got_obs.tolist() == obs
    assert got_rewards.dtype == np.float64
    assert got_rewards.tolist() == rewards
    assert got_terms.dtype == np.bool_
    assert got_terms.tolist() == terminations
    assert got_truncs.dtype == np.bool_
    assert got_truncs.tolist() == (truncations or [False] * n)
    return infos  # type: ignore[no-any-return]


# ------------------------------------------------------------------ construction


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_metadata_spaces_and_mode(
    make_vector: MakeVector, protocol: str, mode: AutoresetMode
) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=mode)
    assert envs.metadata["autoreset_mode"] is mode
    assert isinstance(envs.metadata["autoreset_mode"], AutoresetMode)
    assert envs.num_envs == 3
    assert envs.protocols == (protocol,)
    assert envs.single_action_space == Discrete(5)
    assert envs.observation_space == batch_space(envs.single_observation_space, 3)
    assert envs.action_space == batch_space(envs.single_action_space, 3)
    by_value = make_vector(num_envs=2, protocol=protocol, autoreset_mode=mode.value)
    assert by_value.metadata["autoreset_mode"] is mode


def test_bad_configuration_is_a_value_error() -> None:
    with pytest.raises(ConfigurationError, match="num_envs"):
        OpenEnvVectorEnv("catch", 0)
    with pytest.raises(ValueError, match="autoreset_mode"):
        OpenEnvVectorEnv("catch", 2, autoreset_mode="Sometimes")
    with pytest.raises(ValueError, match="batch_size"):
        OpenEnvVectorEnv("catch", 2, batch_size=3)
    with pytest.raises(ValueError, match="num_servers"):
        OpenEnvVectorEnv("catch", 2, num_servers=3)


# ------------------------------------------------------------------ autoreset traces


def test_next_step_trace(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=AutoresetMode.NEXT_STEP)
    set_lengths(envs, [2, 3, 3])

    def info(count: int, steps: int = 0, action: int = -1, length: int = 3) -> dict[str, Any]:
        return counter_info(count, steps, action, length)

    obs, infos = envs.reset()
    assert obs.tolist() == [0, 0, 0]
    assert same(infos, gym_infos([info(0, length=2), info(0), info(0)]))

    infos = check_step(envs.step([0, 1, 2]), [1, 1, 1], [1, 1, 1], [False, False, False])
    assert same(infos, gym_infos([info(1, 1, 0, 2), info(1, 1, 1), info(1, 1, 2)]))

    infos = check_step(envs.step([0, 1, 2]), [2, 2, 2], [2, 2, 2], [True, False, False])
    assert same(infos, gym_infos([info(2, 2, 0, 2), info(2, 2, 1), info(2, 2, 2)]))

    # env 0 resets: its action is ignored (RAISE would fail on the server), reward 0,
    # and its info is the reset's
    infos = check_step(envs.step([RAISE, 1, 2]), [0, 3, 3], [0, 3, 3], [False, True, True])
    assert same(infos, gym_infos([info(0, length=2), info(3, 3, 1), info(3, 3, 2)]))
    assert "final_obs" not in infos

    infos = check_step(envs.step([0, RAISE, RAISE]), [1, 0, 0], [1, 0, 0], [False, False, False])
    assert same(infos, gym_infos([info(1, 1, 0, 2), info(0), info(0)]))

    check_step(envs.step([0, 1, 2]), [2, 1, 1], [2, 1, 1], [True, False, False])


def test_same_step_trace(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=AutoresetMode.SAME_STEP)
    set_lengths(envs, [2, 3, 3])

    def info(count: int, steps: int = 0, action: int = -1, length: int = 3) -> dict[str, Any]:
        return counter_info(count, steps, action, length)

    def final(obs: int, step_info: dict[str, Any], reset_info: dict[str, Any]) -> dict[str, Any]:
        return {"final_obs": np.asarray(obs), "final_info": step_info, **reset_info}

    obs, _ = envs.reset()
    assert obs.tolist() == [0, 0, 0]

    infos = check_step(envs.step([0, 1, 2]), [1, 1, 1], [1, 1, 1], [False, False, False])
    assert same(infos, gym_infos([info(1, 1, 0, 2), info(1, 1, 1), info(1, 1, 2)]))

    # env 0 terminates and resets within the step: the reset obs, the step's reward
    infos = check_step(envs.step([0, 1, 2]), [0, 2, 2], [2, 2, 2], [True, False, False])
    expected = gym_infos(
        [final(2, info(2, 2, 0, 2), info(0, length=2)), info(2, 2, 1), info(2, 2, 2)]
    )
    assert same(infos, expected)
    assert infos["final_obs"].dtype == object
    assert infos["_final_obs"].tolist() == [True, False, False]
    assert infos["_final_info"].tolist() == [True, False, False]
    assert infos["final_obs"][1] is None
    assert infos["final_obs"][0] in envs.single_observation_space

    infos = check_step(envs.step([0, 1, 2]), [1, 0, 0], [1, 3, 3], [False, True, True])
    expected = gym_infos(
        [info(1, 1, 0, 2), final(3, info(3, 3, 1), info(0)), final(3, info(3, 3, 2), info(0))]
    )
    assert same(infos, expected)

    check_step(envs.step([0, 1, 2]), [0, 1, 1], [2, 1, 1], [True, False, False])


def test_disabled_trace(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=AutoresetMode.DISABLED)
    set_lengths(envs, [2, 3, 3])

    def info(count: int, steps: int = 0, action: int = -1, length: int = 3) -> dict[str, Any]:
        return counter_info(count, steps, action, length)

    obs, _ = envs.reset()
    assert obs.tolist() == [0, 0, 0]
    check_step(envs.step([0, 1, 2]), [1, 1, 1], [1, 1, 1], [False, False, False])
    out = envs.step([0, 1, 2])
    check_step(out, [2, 2, 2], [2, 2, 2], [True, False, False])
    terminations = out[2]

    with pytest.raises(UsageError, match=r"\[0\].*reset_mask"):
        envs.step([0, 1, 2])

    obs, infos = envs.reset(options={"reset_mask": terminations})
    assert obs.tolist() == [0, 2, 2]
    assert same(infos, gym_infos([info(0, length=2), None, None]))

    out = envs.step([0, 1, 2])
    check_step(out, [1, 3, 3], [1, 3, 3], [False, True, True])
    terminations = out[2]
    with pytest.raises(UsageError, match=r"\[1, 2\]"):
        envs.step([0, 1, 2])
    obs, infos = envs.reset(options={"reset_mask": terminations})
    assert obs.tolist() == [1, 0, 0]
    assert same(infos, gym_infos([None, info(0), info(0)]))

    check_step(envs.step([0, 1, 2]), [2, 1, 1], [2, 1, 1], [True, False, False])


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_max_episode_steps_truncates(
    make_vector: MakeVector, protocol: str, mode: AutoresetMode
) -> None:
    envs = make_vector(num_envs=2, protocol=protocol, autoreset_mode=mode, max_episode_steps=2)
    set_lengths(envs, [2, 10])
    envs.reset()
    check_step(envs.step([0, 0]), [1, 1], [1, 1], [False, False], [False, False])
    if mode is AutoresetMode.SAME_STEP:
        # env 0 terminates as the limit is reached: both flags, as gymnasium's TimeLimit
        infos = check_step(envs.step([0, 0]), [0, 0], [2, 2], [True, False], [True, True])
        assert [int(o) for o in infos["final_obs"]] == [2, 2]
        check_step(envs.step([0, 0]), [1, 1], [1, 1], [False, False], [False, False])
        return
    check_step(envs.step([0, 0]), [2, 2], [2, 2], [True, False], [True, True])
    if mode is AutoresetMode.NEXT_STEP:
        check_step(envs.step([0, 0]), [0, 0], [0, 0], [False, False], [False, False])
    else:
        with pytest.raises(UsageError, match=r"\[0, 1\]"):
            envs.step([0, 0])
        obs, _ = envs.reset(options={"reset_mask": np.array([True, True])})
        assert obs.tolist() == [0, 0]
    check_step(envs.step([0, 0]), [1, 1], [1, 1], [False, False], [False, False])


def test_a_step_answered_without_a_reward_counts_zero(
    make_vector: MakeVector, protocol: str
) -> None:
    """Some OpenEnv envs answer a step with no reward (``None``): its reward is 0.0, in a
    step where every sub-env succeeded and in one where a sibling failed."""
    envs = make_vector(num_envs=2, protocol=protocol)
    envs.reset(seed=0, options={"unrewarded": True})
    obs, rewards, *_ = envs.step([0, 0])
    assert obs.tolist() == [1, 2]
    assert rewards.dtype == np.float64
    assert rewards.tolist() == [0.0, 0.0]
    with pytest.raises(EnvErrorGroup) as caught:
        envs.step([RAISE, 0])
    _, reward, *_ = caught.value.results[1]
    assert type(reward) is float
    assert reward == 0.0


# ------------------------------------------------------------------ seeds


def sync_error(call: Callable[[SyncVectorEnv], Any], num_envs: int) -> BaseException:
    """The exception Gymnasium's SyncVectorEnv raises for the same call."""
    sync = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * num_envs)
    try:
        sync.reset()
        with pytest.raises(Exception) as caught:  # whatever Gymnasium raises
            call(sync)
        return caught.value
    finally:
        sync.close()


def test_seeds(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    obs, infos = envs.reset(seed=10)
    assert obs.tolist() == [10, 11, 12, 13]
    assert infos["count"].tolist() == [10, 11, 12, 13]
    obs, _ = envs.reset(seed=np.int64(3))
    assert obs.tolist() == [3, 4, 5, 6]
    obs, _ = envs.reset(seed=[5, None, 7, 0])
    assert obs.tolist() == [5, 0, 7, 0]
    obs, _ = envs.reset()
    assert obs.tolist() == [0, 0, 0, 0]

    for bad in ([1, 2], [1, 2, 3, 4, 5]):
        expected = sync_error(lambda e, bad=bad: e.reset(seed=bad), 4)
        with pytest.raises(ValueError) as caught:  # the message is compared below
            envs.reset(seed=bad)
        assert isinstance(caught.value, type(expected))  # Gymnasium's type, and ours:
        assert isinstance(caught.value, ConfigurationError)  # an OpenEnvGymError
        assert str(caught.value) == str(expected)
    assert envs.step([0, 0, 0, 0])[0].tolist() == [1, 1, 1, 1]  # nothing was reset


# ------------------------------------------------------------------ partial reset


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_partial_reset(make_vector: MakeVector, protocol: str, mode: AutoresetMode) -> None:
    envs = make_vector(num_envs=4, protocol=protocol, autoreset_mode=mode)
    envs.reset(seed=[10, 20, 30, 40])
    envs.step([0, 1, 2, 0])
    mask = np.array([True, False, True, False])
    options = {"reset_mask": mask, "episode_length": 5}
    snapshot = copy.deepcopy(options)

    obs, infos = envs.reset(seed=[100, 200, 300, 400], options=options)

    assert obs.tolist() == [100, 21, 300, 41]  # unmasked envs keep their last obs
    info = counter_info(100, length=5)
    assert same(infos, gym_infos([info, None, {**info, "count": 300}, None]))
    assert options.keys() == snapshot.keys()  # the caller's dict is not modified
    assert options["reset_mask"] is mask
    assert same(options["reset_mask"], snapshot["reset_mask"])
    assert options["episode_length"] == 5
    # the other options went to the masked envs only
    assert [s["episode_length"] for s in envs.call("state")] == [5, 3, 5, 3]
    check_step(envs.step([0, 0, 0, 0]), [101, 22, 301, 42], [1, 2, 1, 2], [False] * 4)


BAD_MASKS = {
    "list": [True, True, False],
    "shape-1": np.array([True]),
    "shape-4": np.array([True, True, False, False]),
    "shape-1x3": np.array([[True, True, True]]),
    "all-false": np.array([False, False, False]),
    "int": np.array([1, 1, 0]),
    "float": np.array([1.0, 1.0, 0.0]),
}


def test_partial_reset_failures_match_gymnasium(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=AutoresetMode.DISABLED)
    envs.reset(seed=0)
    obs, _ = envs.reset(seed=[5, 6, 7], options={"reset_mask": np.array([True, True, True])})
    assert obs.tolist() == [5, 6, 7]
    for name, bad in BAD_MASKS.items():
        expected = sync_error(lambda e, bad=bad: e.reset(options={"reset_mask": bad}), 3)
        assert type(expected) in (TypeError, ValueError), name
        options = {"reset_mask": bad, "episode_length": 9}
        with pytest.raises(type(expected)) as caught:
            envs.reset(options=options)
        assert isinstance(caught.value, ConfigurationError), name  # ArgumentTypeError too
        assert str(caught.value) == str(expected), name
        assert options["reset_mask"] is bad, name  # not popped
    check_step(envs.step([0, 0, 0]), [6, 7, 8], [1, 1, 1], [False] * 3)  # nothing was reset


def test_partial_reset_before_any_full_reset_is_a_usage_error(make_vector: MakeVector) -> None:
    envs = make_vector(num_envs=3)
    with pytest.raises(UsageError, match=r"never reset"):
        envs.reset(options={"reset_mask": np.array([True, False, True])})
    with pytest.raises(UsageError, match="reset"):
        envs.step([0, 0, 0])
    obs, _ = envs.reset(seed=1)
    assert obs.tolist() == [1, 2, 3]


# ------------------------------------------------------------------ infos, copies, actions


def test_infos_have_masks_and_stable_dtypes(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    set_lengths(envs, [1, 2, 3, 4])
    _, infos = envs.reset()
    for _ in range(6):
        *_, infos = envs.step([0, 1, 2, 0])
        for key, value in infos.items():
            if key.startswith("_") or key == "metadata":
                continue
            mask = infos[f"_{key}"]
            assert mask.dtype == np.bool_
            assert mask.shape == (4,)
            assert mask.all()  # every sub-env reports every key, reset or step
            assert value.shape == (4,)
        for key in ("count", "steps", "action", "episode_length"):
            assert infos[key].dtype == np.int64, key
        assert infos["episode_length"].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("mode", MODES[:2], ids=lambda m: m.name)
def test_fresh_objects_every_call(
    make_vector: MakeVector, protocol: str, mode: AutoresetMode
) -> None:
    envs = make_vector(num_envs=3, protocol=protocol, autoreset_mode=mode)
    set_lengths(envs, [1, 2, 2])
    outputs: list[tuple[Any, ...]] = [envs.reset()]
    for _ in range(4):
        outputs.append(envs.step([0, 0, 0]))
    for earlier, later in itertools.pairwise(outputs):
        for a in numeric_arrays(earlier):
            for b in numeric_arrays(later):
                assert not np.shares_memory(a, b)
    for out in outputs:
        arrays = list(numeric_arrays(out))
        for k, a in enumerate(arrays):
            assert not any(np.shares_memory(a, b) for b in arrays[k + 1 :])
    # scribbling on a returned batch changes nothing that comes later
    obs = outputs[-1][0]
    before = obs.tolist()
    obs += 1000
    assert envs.call("render") == tuple(f"count={c}" for c in before)
    # a partial reset returns the kept envs' last obs from the env's own copy
    kept, _ = envs.reset(options={"reset_mask": np.array([True, False, False])})
    assert kept.tolist()[1:] == before[1:]
    assert all(c < 1000 for c in envs.step([0, 0, 0])[0].tolist())


def test_wrong_number_of_actions(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    envs.reset()
    with pytest.raises(ValueError, match=r"got 3 actions for 4 sub-environments"):
        envs.step([0, 0, 0])
    with pytest.raises(ValueError, match=r"got 5 actions for 4 sub-environments"):
        envs.step(np.zeros(5, dtype=np.int64))
    # a scalar is one action, not a batch (a TypeError too, as Gymnasium's SyncVectorEnv)
    with pytest.raises(ValueError, match=r"got the single action 0, not a batch"):
        envs.step(0)
    # nothing was sent: each env steps exactly once now
    check_step(envs.step(np.zeros(4, dtype=np.int64)), [1, 1, 1, 1], [1, 1, 1, 1], [False] * 4)


def test_step_before_reset_is_a_usage_error(make_vector: MakeVector) -> None:
    envs = make_vector(num_envs=2)
    with pytest.raises(UsageError, match="never reset"):
        envs.step([0, 0])


# ------------------------------------------------------------------ async step, close


def test_step_async_then_step_wait(make_vector: MakeVector, protocol: str, gate: Any) -> None:
    envs = make_vector(num_envs=4, protocol=protocol)
    with pytest.raises(UsageError, match="step_async"):
        envs.step_wait()
    envs.reset(options={"gate": str(gate)})
    envs.step_async([SLOW, 0, 1, 2])
    with pytest.raises(WaitTimeoutError) as caught:
        envs.step_wait(timeout=0.05)
    assert isinstance(caught.value, TimeoutError)
    with pytest.raises(UsageError, match="pending"):
        envs.step_async([0, 0, 0, 0])
    with pytest.raises(UsageError, match="pending"):
        envs.reset()
    gate.touch()
    infos = check_step(envs.step_wait(), [1, 1, 1, 1], [1, 1, 1, 1], [False] * 4)
    assert infos["action"].tolist() == [SLOW, 0, 1, 2]
    with pytest.raises(UsageError, match="step_async"):
        envs.step_wait()
    check_step(envs.step([0, 0, 0, 0]), [2, 2, 2, 2], [2, 2, 2, 2], [False] * 4)


def test_close_is_idempotent(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=2, protocol=protocol)
    envs.reset()
    envs.close()
    assert envs.closed
    envs.close()
    with pytest.raises(UsageError, match="closed"):
        envs.reset()
    with pytest.raises(UsageError, match="closed"):
        envs.step([0, 0])
    with pytest.raises(UsageError, match="closed"):
        envs.send([0], [0])
    with pytest.raises(UsageError, match="closed"):
        envs.call("state")


# ------------------------------------------------------------------ call / get_attr / set_attr


def test_call_get_attr_set_attr(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector(num_envs=3, protocol=protocol)
    envs.reset(seed=[1, 2, 3])
    envs.step([0, 0, 0])
    states = envs.call("state")
    assert isinstance(states, tuple)
    assert [s["step_count"] for s in states] == [1, 1, 1]
    assert [s["count"] for s in states] == [2, 3, 4]
    assert envs.call("render") == ("count=2", "count=3", "count=4")
    assert envs.get_attr("max_episode_steps") == (None, None, None)
    assert envs.get_attr("protocol") == (protocol,) * 3
    assert envs.get_attr("elapsed_steps") == (1, 1, 1)
    assert len(set(envs.get_attr("base_url"))) == 1

    envs.set_attr("max_episode_steps", 2)
    assert envs.get_attr("max_episode_steps") == (2, 2, 2)
    check_step(envs.step([0, 0, 0]), [3, 4, 5], [2, 2, 2], [False] * 3, [True] * 3)
    envs.set_attr("max_episode_steps", [7, 7, 7])
    assert envs.max_episode_steps == 7

    with pytest.raises(ValueError, match="one value"):
        envs.set_attr("max_episode_steps", [1, 2, 3])
    with pytest.raises(AttributeError):
        envs.set_attr("render_mode", "ansi")
    with pytest.raises(AttributeError):
        envs.get_attr("no_such_attribute")
    with pytest.raises(AttributeError):
        envs.get_attr("_shards")


# ------------------------------------------------------------------ built-in envs


def test_text_observations_batch_as_tuples_of_str(make_vector: MakeVector, protocol: str) -> None:
    echo = make_vector("echo", num_envs=3, protocol=protocol)
    obs, _ = echo.reset()
    assert isinstance(obs, tuple)
    assert len(obs) == 3
    assert all(isinstance(o, str) for o in obs)
    assert obs in echo.observation_space
    obs, rewards, *_ = echo.step(("a", "bb", "ccc"))
    assert obs == ("a", "bb", "ccc")
    assert rewards.dtype == np.float64

    wordle = make_vector("wordle", num_envs=2, protocol=protocol)
    obs, _ = wordle.reset(seed=[1, 2])
    assert isinstance(obs, tuple)
    assert all(o.startswith("You are Playing Wordle") for o in obs)
    obs, *_ = wordle.step(("[crane]", "[slate]"))
    assert isinstance(obs, tuple)
    assert all(isinstance(o, str) and "Feedback" in o for o in obs)
    assert obs in wordle.observation_space


def test_box_observations_batch_into_arrays(make_vector: MakeVector, protocol: str) -> None:
    envs = make_vector("catch", num_envs=4, protocol=protocol, render_mode="ansi")
    obs, _ = envs.reset(seed=0)
    assert isinstance(obs, np.ndarray)
    assert obs.shape == (4, 50)
    assert obs.dtype == np.float32
    assert obs in envs.observation_space
    obs, rewards, terminations, truncations, _ = envs.step(np.array([0, 1, 2, 1]))
    assert obs.shape == (4, 50)
    assert obs in envs.observation_space
    assert rewards.shape == terminations.shape == truncations.shape == (4,)
    frames = envs.render()
    assert isinstance(frames, tuple)
    assert len(frames) == 4
    assert all(len(f.splitlines()) == 10 for f in frames)


def test_render_without_render_mode_is_none(make_vector: MakeVector) -> None:
    envs = make_vector(num_envs=2, codec=counter_codec())
    envs.reset()
    assert envs.render() is None
