"""batch_table: a batched hook's rewards and dones become the reply's arrays (protocol 3.9.4).

The arrays must hold what ``float(reward)`` (NaN for None) and ``bool(done)`` give for each
instance, whatever the hook put in its lists, and failed slots keep NaN / False.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from openenv_gym.protocol import batch as bp
from openenv_gym.runtime.columns import batch_table
from openenv_gym.runtime.environment import ObservationBatch
from openenv_gym_servers.echo.models import EchoObservation


def _batch(rewards: list[Any], dones: list[Any]) -> ObservationBatch:
    n = len(rewards)
    return ObservationBatch(
        {"echoed_message": ["m"] * n, "message_length": [1] * n}, rewards=rewards, dones=dones
    )


def _expected_rewards(rewards: list[Any]) -> list[float]:
    return [math.nan if r is None else float(r) for r in rewards]


CASES = [
    pytest.param([0.5, None, 2, 0.0], [False, True, False, True], id="plain"),
    pytest.param(
        [np.float32(0.25), True, None, 3], [np.bool_(True), 0, 1, None], id="numpy-and-ints"
    ),
    pytest.param(["1.5", 1, 2.0, None], [1.0, "", "x", False], id="converted-by-float-and-bool"),
]


@pytest.mark.parametrize(("rewards", "dones"), CASES)
def test_every_slot_answered(rewards: list[Any], dones: list[Any]) -> None:
    n = len(rewards)
    table = batch_table(_batch(rewards, dones), EchoObservation, [None] * n, list(range(n)))
    assert table.rewards.dtype == np.float64
    assert table.dones.dtype == np.bool_
    np.testing.assert_array_equal(table.rewards, _expected_rewards(rewards))
    assert table.dones.tolist() == [bool(d) for d in dones]
    assert not table.errors


@pytest.mark.parametrize(("rewards", "dones"), CASES)
def test_failed_slots_keep_nan_and_false(rewards: list[Any], dones: list[Any]) -> None:
    failed = bp.SlotError("NO_SUCH_SLOT", "slot 9 is not open")
    # request of 5 slots: position 2 failed before the hook, the hook covered the other 4
    results: list[Any] = [None, None, failed, None, None]
    table = batch_table(_batch(rewards, dones), EchoObservation, results, [0, 1, 3, 4])
    want = _expected_rewards(rewards)
    np.testing.assert_array_equal(table.rewards, [*want[:2], math.nan, *want[2:]])
    flags = [bool(d) for d in dones]
    assert table.dones.tolist() == [*flags[:2], False, *flags[2:]]
    assert table.errors == {2: failed}


@pytest.mark.parametrize("n", [1, 15, 16, 40])
def test_number_fields_are_ndarrays_from_16_slots_and_plain_arrays_below(n: int) -> None:
    """3.9.4: numbers, and lists of numbers, go out as plain arrays below 16 slots."""
    from openenv_gym_servers.wordle.models import WordleObservation

    fields = {
        "prompt": ["p"] * n,
        "messages": [[]] * n,
        "current_player_id": list(range(n)),
        "legal_players": [[0, k] for k in range(n)],
        "info": [{}] * n,
    }
    table = batch_table(
        ObservationBatch(fields, rewards=[0.0] * n, dones=[False] * n),
        WordleObservation,
        [None] * n,
        list(range(n)),
    )
    columns = table.observations
    if n >= 16:
        assert table.numeric == {"current_player_id", "legal_players"}
        assert columns["legal_players"].shape == (n, 2)
    else:
        assert table.numeric == frozenset()
        assert columns["current_player_id"] == list(range(n))
        assert columns["legal_players"] == [[0, k] for k in range(n)]
    # either way, every slot reads back the values it reported
    rows = bp.columns_to_rows(columns, table.numeric, n)
    assert [r["legal_players"] for r in rows] == [[0, k] for k in range(n)]
    assert [r["current_player_id"] for r in rows] == list(range(n))
