"""``openenv_gym.vector.batch_infos`` builds what Gymnasium's ``VectorEnv._add_info`` builds.

Pure (no server): Hypothesis draws per-env info dicts of the shapes sub-envs report --
Python and NumPy scalars (one kind per key, as real environments report them), ``None``,
strings and lists (object columns), fixed-shape arrays, nested dicts, ``final_obs`` --
and both batchings must agree. Where a key's values do not share a kind, Gymnasium
truncates or raises and we widen the column instead (tested on its own below).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vector_checks import gym_infos, same

from openenv_gym.vector import batch_infos

SCALAR_KINDS = (
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.integers(-100, 100).map(np.int32),
    st.floats(-100, 100, width=32).map(np.float32),
)
SCALARS = st.one_of(*SCALAR_KINDS)
OBJECTS = st.one_of(st.none(), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3))
ARRAYS = st.lists(st.floats(-10, 10), min_size=2, max_size=2).map(np.array)
NESTED = st.dictionaries(st.sampled_from(["x", "y"]), SCALARS, max_size=2)
FINAL_OBS = st.one_of(ARRAYS, st.text(max_size=3), st.integers())

# each key keeps one kind of value across the sub-envs, as real environments do
KINDS: dict[str, st.SearchStrategy[Any]] = {
    "score": SCALARS,
    "flag": st.booleans(),
    "note": OBJECTS,
    "vec": ARRAYS,
    "nested": NESTED,
    "final_obs": FINAL_OBS,
}


@st.composite
def per_env_infos(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 5))
    kinds = dict(KINDS)
    scalar = draw(st.sampled_from(SCALAR_KINDS))  # one kind per key in one draw
    kinds["score"] = scalar
    kinds["nested"] = st.dictionaries(st.sampled_from(["x", "y"]), scalar, max_size=2)
    infos = []
    for _ in range(n):
        keys = draw(st.lists(st.sampled_from(sorted(kinds)), unique=True, max_size=len(kinds)))
        infos.append({key: draw(kinds[key]) for key in keys})
    return infos


def outcome(build: Any, infos: list[dict[str, Any]]) -> tuple[str, Any]:
    try:
        return "ok", build(infos)
    except (TypeError, ValueError, OverflowError) as exc:
        return "raised", type(exc)


@settings(max_examples=300, deadline=None)
@given(per_env_infos())
def test_batch_infos_matches_gymnasium_add_info(infos: list[dict[str, Any]]) -> None:
    ours = outcome(batch_infos, infos)
    theirs = outcome(lambda i: gym_infos(list(i)), infos)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        assert same(ours[1], theirs[1]), (ours[1], theirs[1])


def test_empty_infos_batch_to_an_empty_dict() -> None:
    assert batch_infos([{}, {}, {}]) == {} == gym_infos([{}, {}, {}])


def test_first_writer_fixes_the_dtype_as_in_gymnasium() -> None:
    infos = [{"score": 1}, {}, {"score": 3}]
    ours = batch_infos(infos)
    assert same(ours, gym_infos(infos))
    assert ours["score"].dtype == np.int64
    assert ours["score"].tolist() == [1, 0, 3]
    assert ours["_score"].tolist() == [True, False, True]


def test_a_float_after_an_int_widens_the_column_instead_of_truncating() -> None:
    infos = [{"score": 1}, {}, {"score": 0.75}]
    assert gym_infos(infos)["score"].tolist() == [1, 0, 0]  # Gymnasium truncates
    ours = batch_infos(infos)
    assert ours["score"].dtype == np.float64
    assert ours["score"].tolist() == [1.0, 0.0, 0.75]


def test_none_in_a_number_column_gives_an_object_column_instead_of_raising() -> None:
    infos = [{"score": 1}, {"score": None}]
    ours = batch_infos(infos)
    assert ours["score"].dtype == object
    assert ours["score"].tolist() == [1, None]


def test_infos_with_as_many_keys_but_other_ones_are_not_taken_for_uniform() -> None:
    plain = [{"a": 1}, {"b": 2}]
    assert same(batch_infos(plain), gym_infos(plain))
    # a defaultdict answers (and adds) a missing key instead of raising KeyError
    defaults = [defaultdict(int, a=1), defaultdict(int, b=2)]
    ours = batch_infos(defaults)
    assert same(ours, gym_infos([dict(d) for d in defaults]))
    assert ours["_a"].tolist() == [True, False]
    assert [dict(d) for d in defaults] == [{"a": 1}, {"b": 2}]  # left as they were


# ------------------------------------------------ almost uniform: a few rows differ
#
# A vector env's sub-envs report the same keys step after step, and a few rows (a game's
# last step) one key more or fewer: the whole-column path takes the shared keys, the rest
# is gathered per key. ``same`` compares dicts as key sets, so key order (order of first
# appearance, row by row, as ``_add_info`` meets the keys) is compared on its own.


def key_order(data: Any) -> Any:
    """The keys of ``data`` and of its nested dicts, in order."""
    if not isinstance(data, dict):
        return None
    return [(key, key_order(value)) for key, value in data.items()]


def check_like_gymnasium(infos: list[dict[str, Any]]) -> dict[str, Any]:
    ours, theirs = batch_infos(infos), gym_infos(infos)
    assert same(ours, theirs), (ours, theirs)
    assert key_order(ours) == key_order(theirs)
    return ours


def wordle_info(greens: float, end: bool = False) -> dict[str, Any]:
    signals = {"wordle.greens": greens, "wordle.yellows": 0.2, "wordle.repetitions": 1.0}
    info: dict[str, Any] = {"reward_signals": {**signals, "wordle.correct": 0.0}}
    if end:
        info |= {"reason": "The turn limit has been reached.", "invalid_move": False}
    return info


def test_key_order_notices_what_same_does_not() -> None:
    assert same({"a": 1, "b": 2}, {"b": 2, "a": 1})  # why the order is checked on its own
    assert key_order({"a": 1, "b": {"x": 1, "y": 2}}) != key_order({"a": 1, "b": {"y": 2, "x": 1}})


def test_a_few_rows_with_more_keys_batch_as_in_gymnasium() -> None:
    infos = [wordle_info(i / 10, end=i in (3, 6)) for i in range(8)]
    ours = check_like_gymnasium(infos)
    assert list(ours) == [
        "reward_signals", "_reward_signals", "reason", "_reason", "invalid_move", "_invalid_move"
    ]  # fmt: skip
    assert ours["reward_signals"]["wordle.greens"].dtype == np.float64
    assert ours["_reward_signals"].all()
    assert ours["reward_signals"]["_wordle.correct"].all()
    assert ours["reason"].dtype == object
    assert ours["invalid_move"].dtype == np.bool_
    assert np.flatnonzero(ours["_reason"]).tolist() == [3, 6]
    assert ours["reason"].tolist()[:4] == [None, None, None, "The turn limit has been reached."]


def test_keys_come_in_order_of_first_appearance() -> None:
    check_like_gymnasium([{"b": 1}, {"a": 2.0, "b": 3}, {"c": "x", "a": 4.0}])
    # an extra key before the shared one, in a later row
    check_like_gymnasium([{"x": 1}, {"y": 2, "x": 3}, {"x": 4}])
    # extra keys in two later rows: the earlier row's first
    check_like_gymnasium([{"a": 1}, {"a": 2, "c": 3.0}, {"a": 4}, {"b": "x", "a": 5, "c": 6.0}])
    # the first row lacks a key every other row holds; a later row lacks the first's
    check_like_gymnasium([{"a": 1}, {"b": True, "a": 2}, {"b": False}, {"a": 3, "b": True}])
    # rows of the first's length, other keys
    check_like_gymnasium([{"a": 1, "b": 2}, {"a": 3, "c": 4}, {"d": 5, "a": 6}])


def test_nested_dicts_with_partial_keys_batch_as_in_gymnasium() -> None:
    signals = {"x": 1.0, "y": 2}
    check_like_gymnasium(
        [
            {"s": dict(signals), "t": 1},
            {"s": {"y": 3, "x": 0.5, "z": True}, "t": 2},  # one more, in another order
            {"t": 3},  # no nested dict at all
            {"s": {"x": 0.25}},  # one fewer
            {"s": {"deep": {"a": 1}, "x": 2.0, "y": 4}, "t": 5},
            {"s": {"x": 3.0, "y": 5, "deep": {"a": 2, "b": "two"}}},
            {"s": {}},
        ]
    )
    # a nested column only some rows hold, the same keys in each: its masks are those rows
    ours = check_like_gymnasium([{}, {"s": dict(signals)}, {"u": 1}, {"s": dict(signals)}])
    assert ours["s"]["_x"].tolist() == ours["_s"].tolist() == [False, True, False, True]


def test_final_obs_stays_an_object_array_and_values_are_not_copied() -> None:
    obs = [np.arange(3) + i for i in range(4)]
    infos: list[dict[str, Any]] = [{"t": i} for i in range(4)]
    infos[1]["final_obs"] = obs[1]
    infos[2]["final_obs"] = obs[2]
    infos[2]["note"] = note = [1, 2]
    ours = check_like_gymnasium(infos)
    assert ours["final_obs"].dtype == object
    assert ours["final_obs"][1] is obs[1]
    assert ours["final_obs"][2] is obs[2]
    assert ours["note"][2] is note
    # every row: still objects, not stacked
    every = check_like_gymnasium([{"final_obs": o, "t": 1} for o in obs])
    assert every["final_obs"].dtype == object
    assert every["final_obs"][0] is obs[0]


def test_keys_every_row_holds_take_the_whole_column_path(monkeypatch: Any) -> None:
    # only the keys some rows lack go through the per-key partial path, at every level
    import openenv_gym.infos as infos_module

    partial: list[str] = []
    real = infos_module._partial_column

    def spy(key: str, *args: Any, **kwargs: Any) -> Any:
        partial.append(key)
        return real(key, *args, **kwargs)

    monkeypatch.setattr(infos_module, "_partial_column", spy)
    infos = [wordle_info(i / 10, end=i == 5) for i in range(8)]
    infos[2]["reward_signals"]["wordle.bonus"] = 1.0
    check_like_gymnasium(infos)
    assert partial == ["wordle.bonus", "reason", "invalid_move"]


class Rows(Mapping[str, Any]):
    """A Mapping that is not a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@pytest.mark.filterwarnings("error")  # NotImplemented in a boolean context, once
def test_mappings_that_are_not_dicts_batch_as_their_dicts() -> None:
    plain: list[dict[str, Any]] = [
        {"a": 1, "b": {"x": 1.0}},
        {"b": {"x": 2.0}, "c": "z"},
        {"a": 3, "b": {"x": 0.5}},
    ]
    for rows in (
        [Rows(d) for d in plain],
        [defaultdict(int, d) for d in plain],
        [plain[0], Rows(plain[1]), defaultdict(int, plain[2])],
    ):
        ours = batch_infos(rows)
        assert same(ours, gym_infos(plain))
        assert key_order(ours) == key_order(gym_infos(plain))
        assert [dict(r) for r in rows] == plain  # left as they were


LEAVES = (*SCALAR_KINDS, OBJECTS, ARRAYS, FINAL_OBS)
NAMES = ["a", "b", "c", "d", "final_obs"]


@st.composite
def schemas(draw: st.DrawFn, depth: int = 0) -> dict[str, Any]:
    """Key -> a value strategy (one kind per key) or a nested schema."""
    schema: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, min_size=1, max_size=4)):
        if name != "final_obs" and depth < 2 and draw(st.integers(0, 3)) == 0:
            schema[name] = draw(schemas(depth + 1))
        else:
            schema[name] = draw(st.sampled_from(LEAVES[:-1] if name != "final_obs" else LEAVES))
    return schema


@st.composite
def almost_uniform_row(draw: st.DrawFn, schema: dict[str, Any], shared: list[str]) -> Any:
    """The shared keys, now and then one fewer, or one more somewhere in the order."""
    keys = list(shared)
    if keys and draw(st.integers(0, 5)) == 0:
        keys.remove(draw(st.sampled_from(keys)))
    others = [key for key in schema if key not in keys]
    if others and draw(st.integers(0, 3)) == 0:
        keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from(others)))
    row = {}
    for key in keys:
        kind = schema[key]
        row[key] = draw(nested_rows(kind)) if isinstance(kind, dict) else draw(kind)
    return row


@st.composite
def nested_rows(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    shared = [key for key in schema if draw(st.integers(0, 4))]
    return draw(almost_uniform_row(schema, shared))


@st.composite
def almost_uniform_infos(draw: st.DrawFn) -> list[dict[str, Any]]:
    schema = draw(schemas())
    shared = [key for key in schema if draw(st.integers(0, 4))]
    return [draw(almost_uniform_row(schema, shared)) for _ in range(draw(st.integers(1, 8)))]


@settings(max_examples=300, deadline=None)
@given(almost_uniform_infos())
def test_almost_uniform_infos_batch_as_in_gymnasium(infos: list[dict[str, Any]]) -> None:
    ours = outcome(batch_infos, infos)
    theirs = outcome(lambda i: gym_infos(list(i)), infos)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        assert same(ours[1], theirs[1]), (ours[1], theirs[1])
        assert key_order(ours[1]) == key_order(theirs[1])
