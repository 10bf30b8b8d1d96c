"""``openenv_gym.vector.batch_infos`` builds what Gymnasium's ``VectorEnv._add_info`` builds.

Pure (no server): Hypothesis draws per-env info dicts of the shapes sub-envs report --
Python and NumPy scalars (one kind per key, as real environments report them), ``None``,
strings and lists (object columns), fixed-shape arrays, nested dicts, ``final_obs`` --
and both batchings must agree. Where a key's values do not share a kind, Gymnasium
truncates or raises and we widen the column instead (tested on its own below).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
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
