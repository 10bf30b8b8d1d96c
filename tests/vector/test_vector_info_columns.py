"""``batch_info_columns`` (infos by column) builds what ``batch_infos`` (per-env dicts) builds.

Pure (no server). Hypothesis draws per-env info dicts of the shapes sub-envs report (one
kind of value per key, as in ``test_vector_infos.py``), then expresses them as columns the
ways the wire hands them over: one chunk holding every row in order (``rows=None``), or
several chunks with explicit, possibly permuted rows, a key possibly split over chunks,
envs in no chunk reporting nothing; each chunk column a list, a ``numeric`` ndarray (JSON
numbers: an entry is ``row.tolist()``), a stacked ndarray, or a :class:`Nested` column of
dicts. What the chunks stand for, batched per env, must equal what they batch to.

The tests after the property tests pin disagreements once found in ``openenv_gym/infos.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from itertools import chain
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from vector_checks import gym_infos, same

from openenv_gym.infos import InfoColumns, Nested, batch_info_columns, batch_infos

# ---------------------------------------------------------------------- per-env infos

SCALAR_KINDS = (
    st.integers(-1000, 1000),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.booleans(),
    st.integers(-100, 100).map(np.int32),
    st.floats(-100, 100, width=32).map(np.float32),
)
OBJECTS = st.one_of(st.none(), st.text(max_size=4), st.lists(st.integers(0, 3), max_size=3))
# fixed-shape arrays, one shape and dtype per key in one draw (0-d: a stacked column is 1-D)
ARRAY_KINDS = (
    st.lists(st.floats(-10, 10), min_size=2, max_size=2).map(np.array),
    st.lists(st.integers(-5, 5), min_size=4, max_size=4).map(
        lambda v: np.array(v, dtype=np.int32).reshape(2, 2)
    ),
    st.lists(st.booleans(), min_size=3, max_size=3).map(lambda v: np.array(v, dtype=np.bool_)),
    st.floats(-10, 10, width=32).map(lambda v: np.array(v, dtype=np.float32)),
)
FINAL_OBS = st.one_of(
    ARRAY_KINDS[0],
    st.text(max_size=3),
    st.integers(),
    st.fixed_dictionaries({"pos": st.integers(0, 9)}),  # a Dict observation space's
)


def _number_lists(length: int) -> st.SearchStrategy[list[Any]]:
    """Lists of JSON numbers of one kind and length (a ``numbers`` field)."""
    return st.one_of(
        st.lists(st.integers(-50, 50), min_size=length, max_size=length),
        st.lists(st.floats(-50, 50), min_size=length, max_size=length),
    )


@st.composite
def per_env_infos(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One info dict per sub-env; every key keeps one kind of value across sub-envs."""
    n = draw(st.integers(1, 6))
    scalar = draw(st.sampled_from(SCALAR_KINDS))
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "score": scalar,
        "flag": st.booleans(),
        "note": OBJECTS,
        "vec": draw(st.sampled_from(ARRAY_KINDS)),
        "lst": draw(st.integers(0, 3).map(_number_lists)),
        "nested": st.dictionaries(st.sampled_from(["x", "y"]), scalar, max_size=2),
        "final_obs": FINAL_OBS,
    }
    names = sorted(kinds)
    keys_of = st.lists(st.sampled_from(names), unique=True, max_size=len(names))
    if draw(st.booleans()):  # the usual case: every sub-env reports the same keys
        shared = draw(st.lists(st.sampled_from(names), unique=True, min_size=1))
        key_sets = [shared] * n
    else:
        key_sets = [draw(keys_of) for _ in range(n)]
    return [{key: draw(kinds[key]) for key in keys} for keys in key_sets]


# ---------------------------------------------------------------------- as columns


def _inner_column(draw: st.DrawFn, values: list[Any]) -> Any:
    """A column of a :class:`Nested`: a list (metadata columns travel as arrays only)."""
    return list(values)


def _column(draw: st.DrawFn, key: str, values: list[Any]) -> tuple[Any, bool]:
    """``(column, numeric)``: one of the column forms that stand for ``values``."""
    forms: list[tuple[Any, bool]] = [(list(values), False)]
    kinds = set(map(type, values))
    kind = next(iter(kinds)) if len(kinds) == 1 else None
    if kind in (int, float, bool) and all(abs(v) < 2**63 for v in values):
        # JSON numbers of one kind: a numeric ndarray
        dtypes = {int: [np.int64, np.int32, np.uint8], float: [np.float64, np.float32]}
        for dtype in dtypes.get(kind, [np.bool_]):
            # narrower dtypes where every value fits exactly (a row's tolist() is the value)
            if kind is int and not all(
                np.iinfo(dtype).min <= v <= np.iinfo(dtype).max for v in values
            ):
                continue
            if np.array(values, dtype=dtype).tolist() == values:
                forms.append((np.array(values, dtype=dtype), True))
    elif kind is list and len({len(v) for v in values}) == 1:
        inner = {type(x) for v in values for x in v}
        if inner <= {int} or inner == {float}:  # lists of numbers: a 2-D numeric ndarray
            dtype = np.int64 if inner <= {int} else np.float64
            forms.append((np.array(values, dtype=dtype).reshape(len(values), -1), True))
    elif kind is np.ndarray:
        first = values[0]
        # arrays of one shape and dtype (0-d ones included): stacked, a row per env
        if all(v.shape == first.shape and v.dtype == first.dtype for v in values):
            forms.append((np.stack(values), False))
    elif kind is dict and key != "final_obs" and len({frozenset(v) for v in values}) == 1:
        # see test_final_obs_as_a_nested_column_is_an_object_array for final_obs
        forms.append(
            (Nested({k: _inner_column(draw, [v[k] for v in values]) for k in values[0]}), False)
        )
    return draw(st.sampled_from(forms))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[dict[str, Any]], list[InfoColumns]]:
    """``(n, per_env, chunks)``: chunks holding exactly the per-env infos ``per_env``."""
    per_env = draw(per_env_infos())
    n = len(per_env)
    waves = draw(st.integers(1, 3))
    # which chunk ("wave") a reported value comes in: by sub-env (rows split among chunks),
    # by key (each chunk some keys of every sub-env), or by (sub-env, key)
    split = draw(st.sampled_from(["env", "key", "cell"]))
    key_wave = {key: draw(st.integers(0, waves - 1)) for key in sorted({*chain(*per_env)})}
    shuffle = draw(st.booleans())
    groups: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    for i, info in enumerate(per_env):
        if not info:
            continue
        if split == "cell":
            wave_of = {key: draw(st.integers(0, waves - 1)) for key in info}
        elif split == "key":
            wave_of = {key: key_wave[key] for key in info}
        else:
            wave = draw(st.integers(0, waves - 1))
            wave_of = dict.fromkeys(info, wave)
        for wave in sorted(set(wave_of.values())):
            keys = tuple(key for key in info if wave_of[key] == wave)
            groups.setdefault((wave, keys), []).append(i)
    silent = [i for i, info in enumerate(per_env) if not info]
    if silent and draw(st.booleans()):  # a chunk of sub-envs that report nothing
        groups[(-1, ())] = silent
    chunks = []
    for (_, keys), members in groups.items():
        order = draw(st.permutations(members)) if shuffle else members
        rows = np.array(order, dtype=np.intp)
        if order == list(range(n)) and draw(st.booleans()):
            rows = None
        columns = {}
        numeric = set()
        for key in keys:
            columns[key], is_numeric = _column(draw, key, [per_env[i][key] for i in order])
            if is_numeric:
                numeric.add(key)
        chunks.append(InfoColumns(rows, columns, frozenset(numeric)))
    chunks = draw(st.permutations(chunks))
    return n, per_env, list(chunks)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_columns_batch_as_the_per_env_infos_they_stand_for(
    scenario: tuple[int, list[dict[str, Any]], list[InfoColumns]],
) -> None:
    n, per_env, chunks = scenario
    ours = batch_info_columns(n, chunks)
    expected = batch_infos(per_env)
    assert same(ours, expected), (chunks, ours, expected)
    assert same(ours, gym_infos(per_env)), (chunks, ours)  # one kind per key: well-defined


def _changed(value: Any) -> Any:
    """A value of the same kind as ``value`` that batches differently."""
    if isinstance(value, bool | np.bool_):
        return not value
    if isinstance(value, int | float | np.number):
        return type(value)(value + 1)
    if isinstance(value, str):
        return value + "!"
    if value is None:
        return "!"
    if isinstance(value, list):
        return [*value, 0]
    if isinstance(value, dict):
        return {**value, "z": 0}
    assert isinstance(value, np.ndarray)
    if value.dtype == np.bool_:
        return ~value
    return np.array(value + 1, dtype=value.dtype)


def test_same_notices_wrong_constructions() -> None:
    per_env = [{"k": 1}, {"k": 2}]
    # rows permuted, the column not
    assert not same(
        batch_info_columns(2, [InfoColumns(np.array([1, 0]), {"k": [1, 2]})]), batch_infos(per_env)
    )
    # Python ints sent as a float64 numeric column
    floats = InfoColumns(None, {"k": np.array([1.0, 2.0])}, frozenset({"k"}))
    assert not same(batch_info_columns(2, [floats]), batch_infos(per_env))
    # an env left out of the chunks
    assert not same(
        batch_info_columns(2, [InfoColumns(np.array([0]), {"k": [1]})]), batch_infos(per_env)
    )
    # a 2-D numeric column read as a stacked array
    lists = [{"k": [1, 2]}, {"k": [3, 4]}]
    stacked = InfoColumns(None, {"k": np.array([[1, 2], [3, 4]])})
    assert not same(batch_info_columns(2, [stacked]), batch_infos(lists))


# ---------------------------------------------------------------------- targeted


def _check(n: int, chunks: list[InfoColumns], per_env: list[dict[str, Any]]) -> dict[str, Any]:
    ours = batch_info_columns(n, chunks)
    assert same(ours, batch_infos(per_env)), ours
    assert same(ours, gym_infos(per_env)), ours
    return ours


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_a_numeric_int_column_is_what_python_ints_give(dtype: Any) -> None:
    column = np.array([3, 0, 7], dtype=dtype)
    per_env = [{"k": 3}, {"k": 0}, {"k": 7}]
    ours = _check(3, [InfoColumns(None, {"k": column}, frozenset({"k"}))], per_env)
    assert ours["k"].dtype == np.int64
    assert ours["k"].tolist() == [3, 0, 7]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_numeric_float_column_is_what_python_floats_give(dtype: Any) -> None:
    column = np.array([0.5, -2.0, 1e3], dtype=dtype)
    per_env = [{"k": 0.5}, {"k": -2.0}, {"k": 1e3}]
    ours = _check(3, [InfoColumns(None, {"k": column}, frozenset({"k"}))], per_env)
    assert ours["k"].dtype == np.float64
    assert ours["k"].tolist() == [0.5, -2.0, 1000.0]


def test_a_numeric_bool_column_is_what_python_bools_give() -> None:
    column = np.array([True, False, True])
    per_env = [{"k": True}, {"k": False}, {"k": True}]
    ours = _check(3, [InfoColumns(None, {"k": column}, frozenset({"k"}))], per_env)
    assert ours["k"].dtype == np.bool_
    assert ours["k"].tolist() == [True, False, True]


def test_a_partial_numeric_column_is_what_python_numbers_give() -> None:
    ints = InfoColumns(np.array([2, 0]), {"i": np.array([5, 6])}, frozenset({"i"}))
    floats = InfoColumns(np.array([1]), {"f": np.array([0.25], dtype=np.float32)}, frozenset({"f"}))
    ours = _check(3, [ints, floats], [{"i": 6}, {"f": 0.25}, {"i": 5}])
    assert ours["i"].dtype == np.int64
    assert ours["i"].tolist() == [6, 0, 5]
    assert ours["f"].dtype == np.float64
    assert ours["f"].tolist() == [0.0, 0.25, 0.0]


def test_a_2d_numeric_column_is_an_object_array_of_lists() -> None:
    column = np.array([[1, 2], [3, 4], [5, 6]])
    per_env = [{"k": [1, 2]}, {"k": [3, 4]}, {"k": [5, 6]}]
    for chunks in (
        [InfoColumns(None, {"k": column}, frozenset({"k"}))],
        [
            InfoColumns(np.array([2, 0]), {"k": column[[2, 0]]}, frozenset({"k"})),
            InfoColumns(np.array([1]), {"k": column[[1]]}, frozenset({"k"})),
        ],
    ):
        ours = _check(3, chunks, per_env)
        assert ours["k"].dtype == object
        assert ours["k"].shape == (3,)
        assert all(type(v) is list and all(type(x) is int for x in v) for v in ours["k"])


def test_a_non_numeric_ndarray_column_stacks() -> None:
    column = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    per_env = [{"k": np.array(row)} for row in column]
    for chunks in (
        [InfoColumns(None, {"k": column})],
        [InfoColumns(np.array([2, 0, 1]), {"k": column[[2, 0, 1]]})],
        [InfoColumns(np.array([1]), {"k": column[[1]]}), InfoColumns(None, {})],
    ):
        expected = per_env if len(chunks) == 1 else [{}, per_env[1], {}]
        ours = _check(3, chunks, expected)
        assert ours["k"].dtype == np.float32
        assert ours["k"].shape == (3, 2, 2)
    assert np.array_equal(batch_info_columns(3, [InfoColumns(None, {"k": column})])["k"], column)


@pytest.mark.parametrize(
    ("column", "numeric"),
    [
        (np.array([1, 2, 3]), True),
        (np.array([1.5, 2.5, 3.5]), True),
        (np.array([[1, 2], [3, 4], [5, 6]]), True),
        (np.arange(6.0).reshape(3, 2), False),
        (np.array([1, 2, 3], dtype=np.int32), False),
        ([np.zeros(2), np.ones(2), np.zeros(2)], False),
        ([1, 2, 3], False),
        ([{"pos": 1}, {"pos": 2}, {"pos": 3}], False),
    ],
    ids=["int", "float", "int-2d", "stacked", "int32", "arrays", "ints", "dicts"],
)
def test_final_obs_is_always_an_object_array(column: Any, numeric: bool) -> None:
    names = frozenset({"final_obs"}) if numeric else frozenset()
    if numeric:
        entries = column.tolist()
    elif isinstance(column, np.ndarray):  # a row per env, as the per-slot form copies it
        entries = [np.array(row) for row in column]
    else:
        entries = list(column)
    per_env = [{"final_obs": value} for value in entries]
    full = _check(3, [InfoColumns(None, {"final_obs": column}, names)], per_env)
    partial = _check(
        3,
        [InfoColumns(np.array([2, 0]), {"final_obs": column[:2]}, names)],
        [per_env[1], {}, per_env[0]],
    )
    for ours in (full, partial):
        assert ours["final_obs"].dtype == object
        assert ours["final_obs"].shape == (3,)
    assert partial["final_obs"][1] is None
    assert partial["_final_obs"].tolist() == [True, False, True]


def test_masks_of_a_chunk_covering_some_rows() -> None:
    chunk = InfoColumns(
        np.array([3, 1]),
        {"score": [1.5, 2.5], "note": ["a", "b"], "n": np.array([7, 8])},
        frozenset({"n"}),
    )
    per_env = [{}, {"score": 2.5, "note": "b", "n": 8}, {}, {"score": 1.5, "note": "a", "n": 7}]
    ours = _check(4, [chunk], per_env)
    for key in ("score", "note", "n"):
        assert ours[f"_{key}"].tolist() == [False, True, False, True]
        assert ours[f"_{key}"].dtype == np.bool_
    assert ours["score"].tolist() == [0.0, 2.5, 0.0, 1.5]
    assert ours["note"].tolist() == [None, "b", None, "a"]
    assert ours["n"].tolist() == [0, 8, 0, 7]


def test_a_key_in_two_chunks_with_rows_interleaved() -> None:
    a = InfoColumns(np.array([4, 0, 2]), {"k": np.array([40, 0, 20])}, frozenset({"k"}))
    b = InfoColumns(np.array([3, 1]), {"k": [30, 10], "only_b": ["x", "y"]})
    per_env = [
        {"k": 0},
        {"k": 10, "only_b": "y"},
        {"k": 20},
        {"k": 30, "only_b": "x"},
        {"k": 40},
    ]
    for chunks in ([a, b], [b, a]):
        ours = _check(5, chunks, per_env)
        assert ours["k"].dtype == np.int64
        assert ours["k"].tolist() == [0, 10, 20, 30, 40]
        assert ours["_k"].all()
        assert ours["_only_b"].tolist() == [False, True, False, True, False]
    # and leaving a row out
    c = InfoColumns(np.array([3]), {"k": [30]})
    ours = _check(5, [a, c], [{"k": 0}, {}, {"k": 20}, {"k": 30}, {"k": 40}])
    assert ours["k"].tolist() == [0, 0, 20, 30, 40]
    assert ours["_k"].tolist() == [True, False, True, True, True]


def test_nested_partial_coverage() -> None:
    a = InfoColumns(np.array([2, 0]), {"m": Nested({"x": [2, 0]})})
    b = InfoColumns(np.array([3]), {"m": Nested({"x": [3], "y": ["three"]})})
    per_env = [{"m": {"x": 0}}, {}, {"m": {"x": 2}}, {"m": {"x": 3, "y": "three"}}]
    for chunks in ([a, b], [b, a], [a, InfoColumns(np.array([3]), {"m": [per_env[3]["m"]]})]):
        ours = _check(4, chunks, per_env)
        assert ours["_m"].tolist() == [True, False, True, True]
        assert ours["m"]["x"].tolist() == [0, 0, 2, 3]
        assert ours["m"]["_x"].tolist() == [True, False, True, True]
        assert ours["m"]["y"].tolist() == [None, None, None, "three"]
        assert ours["m"]["_y"].tolist() == [False, False, False, True]
    # an empty Nested: the rows report an empty dict
    ours = _check(3, [InfoColumns(np.array([1]), {"m": Nested()})], [{}, {"m": {}}, {}])
    assert ours["m"] == {}
    assert ours["_m"].tolist() == [False, True, False]
    # a Nested over every row
    full = InfoColumns(None, {"m": Nested({"x": [1, 2], "y": np.array([0.5, 1.5], np.float32)})})
    ours = _check(
        2, [full], [{"m": {"x": 1, "y": np.float32(0.5)}}, {"m": {"x": 2, "y": np.float32(1.5)}}]
    )
    assert ours["m"]["y"].dtype == np.float32


# ---------------------------------------------------------------------- fresh arrays


def _arrays(data: Any, path: str = "") -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
    """Every ndarray of a batched infos dict (not those inside object arrays)."""
    if isinstance(data, np.ndarray):
        yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _arrays(value, f"{path}/{key}")


def _input_arrays(chunks: list[InfoColumns]) -> list[np.ndarray[Any, Any]]:
    found: list[np.ndarray[Any, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, np.ndarray):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for chunk in chunks:
        if chunk.rows is not None:
            found.append(chunk.rows)
        walk(dict(chunk.columns))
    return found


def _scribble(array: np.ndarray[Any, Any]) -> None:
    """Change every entry of ``array`` in place."""
    if array.dtype == object:
        array[...] = "scribbled"
    elif array.dtype == np.bool_:
        np.logical_not(array, out=array)
    else:
        array += 1


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_results_are_fresh_arrays(
    scenario: tuple[int, list[dict[str, Any]], list[InfoColumns]],
) -> None:
    n, per_env, chunks = scenario
    saved = copy.deepcopy(chunks)
    expected = batch_infos(copy.deepcopy(per_env))
    first = batch_info_columns(n, chunks)
    second = batch_info_columns(n, chunks)
    inputs = _input_arrays(chunks)
    firsts = dict(_arrays(first))
    seconds = dict(_arrays(second))
    assert firsts.keys() == seconds.keys()
    for path, array in firsts.items():
        assert array is not seconds[path], path
        assert not np.shares_memory(array, seconds[path]), path
        for given_array in inputs:
            assert not np.shares_memory(array, given_array), path
        for other_path, other in firsts.items():
            if other_path != path:
                assert not np.shares_memory(array, other), (path, other_path)
    for array in firsts.values():
        _scribble(array)
    assert same(second, expected)
    assert same(batch_info_columns(n, chunks), expected)
    for chunk, before in zip(chunks, saved, strict=True):
        assert same(chunk.rows, before.rows)
        assert same(dict(chunk.columns), dict(before.columns))


def test_mutating_a_result_changes_neither_the_next_nor_the_columns() -> None:
    columns = {
        "i": np.array([1, 2, 3]),
        "f": np.array([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]]),
        "a": np.arange(6, dtype=np.float32).reshape(3, 2),
        "b": [True, False, True],
        "m": Nested({"x": [1, 2, 3]}),
    }
    for chunks in (
        [InfoColumns(None, columns, frozenset({"i", "f"}))],
        [
            InfoColumns(
                np.array([2, 0]),
                {
                    **{k: v[:2] for k, v in columns.items() if k != "m"},
                    "m": Nested({"x": [1, 2]}),
                },
                frozenset({"i", "f"}),
            ),
            InfoColumns(np.array([1]), {"i": columns["i"][2:]}, frozenset({"i"})),
        ],
    ):
        saved = copy.deepcopy(chunks)
        reference = batch_info_columns(3, chunks)
        first = batch_info_columns(3, chunks)
        for _, array in _arrays(first):
            _scribble(array)
        assert same(batch_info_columns(3, chunks), reference)
        for chunk, before in zip(chunks, saved, strict=True):
            assert same(dict(chunk.columns), dict(before.columns))


# ---------------------------------------------------------------------- disagreements


@pytest.mark.parametrize("column", [np.array([True, False]), np.array(["ab", "c"])])
def test_a_1d_bool_or_str_column_batches_the_same_however_it_is_chunked(
    column: np.ndarray[Any, Any],
) -> None:
    whole = batch_info_columns(2, [InfoColumns(None, {"k": column})])
    split = batch_info_columns(
        2,
        [
            InfoColumns(np.array([0]), {"k": column[:1]}),
            InfoColumns(np.array([1]), {"k": column[1:]}),
        ],
    )
    assert same(whole, split), (whole, split)


@pytest.mark.parametrize("n", [2, 3])
def test_a_1d_ndarray_column_beside_a_list_of_0d_arrays(n: int) -> None:
    chunks = [
        InfoColumns(np.array([0]), {"k": np.zeros(1, dtype=np.float32)}),
        InfoColumns(np.array([1]), {"k": [np.array(0.0, dtype=np.float32)]}),
    ]
    per_env = [{"k": np.array(0.0, dtype=np.float32)} for _ in range(2)] + [{}] * (n - 2)
    assert same(batch_info_columns(n, chunks), batch_infos(per_env))


@pytest.mark.parametrize("rows", [None, np.array([1, 0])])
def test_final_obs_as_a_nested_column_is_an_object_array(rows: Any) -> None:
    chunk = InfoColumns(rows, {"final_obs": Nested({"pos": [1, 2]})})
    ordered = [1, 2] if rows is None else [2, 1]
    per_env = [{"final_obs": {"pos": p}} for p in ordered]
    assert same(batch_info_columns(2, [chunk]), batch_infos(per_env))


def test_a_nested_in_a_nested_beside_a_list_of_dicts() -> None:
    chunks = [
        InfoColumns(np.array([0]), {"m": Nested({"inner": Nested({"x": [1]})})}),
        InfoColumns(np.array([1]), {"m": [{"inner": {"x": 2}}]}),
    ]
    per_env = [{"m": {"inner": {"x": 1}}}, {"m": {"inner": {"x": 2}}}]
    assert same(batch_info_columns(2, chunks), batch_infos(per_env))


def test_final_obs_from_an_ndarray_column_does_not_alias_the_column() -> None:
    column = np.zeros((2, 3))
    chunk = InfoColumns(None, {"final_obs": column})
    first = batch_info_columns(2, [chunk])
    second = batch_info_columns(2, [chunk])
    first["final_obs"][0][:] = 9.0
    assert not column.any()
    assert not second["final_obs"][0].any()


# ---------------------------------------------------------------------- several chunks
#
# A vector env whose games end now and then sends two chunks a step: a small reset chunk
# (numbers as plain lists, below 16 rows) and a step chunk (numbers as ``numeric``
# ndarrays), with disjoint rows. Merged, a key is typed by its first value in env order
# and nested keys come in order of first appearance: compared with Gymnasium's own
# ``_add_info`` where it is well-defined (key order on its own: ``same`` ignores it),
# with ``batch_infos`` of the per-env dicts where Gymnasium truncates or raises.


def _key_order(data: Any) -> Any:
    if not isinstance(data, dict):
        return None
    return [(key, _key_order(value)) for key, value in data.items()]


def _check_merged(
    n: int, chunks: list[InfoColumns], per_env: list[dict[str, Any]], gym: bool = True
) -> dict[str, Any]:
    ours = batch_info_columns(n, chunks)
    expected = batch_infos(per_env)
    assert same(ours, expected), (ours, expected)
    # keys in the order of first appearance in env order, whatever order the chunks came in
    assert _key_order(ours) == _key_order(expected)
    if gym:
        theirs = gym_infos(per_env)
        assert same(ours, theirs), (ours, theirs)
        assert _key_order(ours) == _key_order(theirs)
    return ours


def _two_chunks(
    n: int, small: list[int], key: str, small_column: Any, big_column: Any, big_numeric: bool
) -> tuple[list[InfoColumns], list[dict[str, Any]]]:
    """``key`` from a chunk at rows ``small`` (a plain list) and one at every other row."""
    big = [i for i in range(n) if i not in small]
    chunks = [
        InfoColumns(np.array(small), {key: small_column}),
        InfoColumns(np.array(big), {key: big_column}, frozenset({key} if big_numeric else ())),
    ]
    per_env: list[dict[str, Any]] = [{} for _ in range(n)]
    big_values = big_column.tolist() if big_numeric else list(big_column)
    for i, value in chain(zip(small, small_column, strict=True), zip(big, big_values, strict=True)):
        per_env[i][key] = value
    return chunks, per_env


@pytest.mark.parametrize("small", [[0, 3], [2, 5], [5]])
@pytest.mark.parametrize(
    ("small_values", "big_column", "dtype"),
    [
        ([0, 7], np.array([1, 2, 3, 4, 5], dtype=np.int64), np.int64),
        ([0, 7], np.array([1, 2, 3, 4, 5], dtype=np.int32), np.int64),
        ([True, False], np.array([False, True, True, False, True]), np.bool_),
        ([0.5, -1.0], np.array([1.5, 2.5, 3.5, 4.5, 0.25], dtype=np.float32), np.float64),
        ([0.5, -1.0], np.array([1, 2, 3, 4, 5]), np.float64),  # a float first only at 0
    ],
    ids=["int", "int32", "bool", "float", "float-int"],
)
def test_plain_list_and_ndarray_numbers_of_one_kind_merge_as_in_gymnasium(
    small: list[int], small_values: list[Any], big_column: Any, dtype: Any
) -> None:
    n = 6
    big_column = big_column[: n - len(small)]
    values = small_values[: len(small)]
    for order in (slice(None), slice(None, None, -1)):
        chunks, per_env = _two_chunks(n, small, "k", values, big_column, True)
        first_kind = type(per_env[0]["k"])
        well_defined = not (first_kind is int and dtype == np.float64)
        ours = _check_merged(n, chunks[order], per_env, gym=well_defined)
        if first_kind is float or all(type(info["k"]) is not float for info in per_env):
            assert ours["k"].dtype == dtype
        assert ours["_k"].all()
        assert ours["k"].tolist() == [info["k"] for info in per_env]


@pytest.mark.parametrize(
    ("small_values", "big_column", "first_small", "dtype", "well_defined"),
    [
        # bool is kept apart from int: the first value in env order decides
        ([True, False], np.array([5, 6, 7]), True, object, False),
        ([True, False], np.array([5, 6, 7]), False, np.int64, True),
        ([3, 4], np.array([True, False, True]), True, np.int64, True),
        ([3, 4], np.array([True, False, True]), False, object, False),
        # int and float: an int first widens the column to float64 (Gymnasium truncates)
        ([3, 4], np.array([0.5, 1.5, 2.5]), True, np.float64, False),
        ([3, 4], np.array([0.5, 1.5, 2.5]), False, np.float64, True),
        # a list of mixed types
        ([3, 4.5], np.array([1, 2, 3]), True, np.float64, False),
        ([True, 1], np.array([1, 2, 3]), False, np.int64, True),
    ],
)
def test_mixed_number_holders_are_typed_by_the_first_value_in_env_order(
    small_values: list[Any],
    big_column: Any,
    first_small: bool,
    dtype: Any,
    well_defined: bool,
) -> None:
    n = 5
    small = [0, 3] if first_small else [1, 4]
    for numeric in (True, False):
        big = big_column if numeric else list(big_column.tolist())
        chunks, per_env = _two_chunks(n, small, "k", small_values, big, numeric)
        for order in (chunks, chunks[::-1]):
            ours = _check_merged(n, order, per_env, gym=well_defined)
            assert ours["k"].dtype == dtype
            assert ours["k"].tolist() == [info["k"] for info in per_env]
            if not well_defined:  # where Gymnasium truncates or raises, this widens
                assert not same(ours, gym_infos(per_env))


def _wordle_chunks(n: int, resets: list[int]) -> tuple[list[InfoColumns], list[dict[str, Any]]]:
    """Infos as a Wordle vector env sends them: a reset chunk and a step chunk."""
    steps = [i for i in range(n) if i not in resets]
    signals = [
        {"greens": i / 10, "yellows": 0.2, "repetitions": 1.0, "correct": float(i % 2)}
        for i in steps
    ]
    reset = InfoColumns(
        np.array(resets),
        {
            "prompt": ["Play" for _ in resets],
            "current_player_id": [0 for _ in resets],
            "legal_players": [[0] for _ in resets],
            "info": [{} for _ in resets],
            "metadata": Nested({"env_id": ["W" for _ in resets], "turn": [0 for _ in resets]}),
        },
    )
    step = InfoColumns(
        np.array(steps),
        {
            "prompt": [f"turn {i}" for i in steps],
            "current_player_id": np.zeros(len(steps), dtype=np.int64),
            "legal_players": np.zeros((len(steps), 1), dtype=np.int64),
            "info": [{"reward_signals": dict(s)} for s in signals],
            "metadata": Nested(
                {
                    "env_id": ["W" for _ in steps],
                    "turn": [i % 6 + 1 for i in steps],
                    "reward_signals": [dict(s) for s in signals],
                }
            ),
        },
        frozenset({"current_player_id", "legal_players"}),
    )
    per_env: list[dict[str, Any]] = [{} for _ in range(n)]
    for chunk in (reset, step):
        assert chunk.rows is not None
        count = len(chunk.rows)
        entries = {
            key: column.rows(count)
            if isinstance(column, Nested)
            else column.tolist()
            if key in chunk.numeric
            else column
            for key, column in chunk.columns.items()
        }
        for j, i in enumerate(chunk.rows.tolist()):
            per_env[i] = {key: values[j] for key, values in entries.items()}
    return [reset, step], per_env


@pytest.mark.parametrize("resets", [[0], [2, 5], [5], [1, 2, 3, 4, 5, 6, 7], [7]])
def test_wordle_reset_and_step_chunks_merge_as_in_gymnasium(resets: list[int]) -> None:
    chunks, per_env = _wordle_chunks(8, resets)
    for order in (chunks, chunks[::-1]):
        ours = _check_merged(8, order, per_env)
        assert ours["current_player_id"].dtype == np.int64
        assert ours["legal_players"].dtype == object
        assert ours["_info"].all()
        assert ours["info"]["_reward_signals"].tolist() == [i not in resets for i in range(8)]
        assert ours["metadata"]["reward_signals"]["greens"].dtype == np.float64
        assert ours["metadata"]["_reward_signals"].tolist() == [i not in resets for i in range(8)]
    # values are not copied
    ours = batch_info_columns(8, chunks)
    legal = chunks[0].columns["legal_players"]
    assert ours["legal_players"][resets[0]] is legal[0]


def test_dict_columns_in_some_chunks_only() -> None:
    a = InfoColumns(np.array([3, 1]), {"d": [{}, {}], "x": [1, 2]})
    b = InfoColumns(np.array([4, 0]), {"d": [{"p": 1.5, "q": "s"}, {"q": "t", "p": 0.5}]})
    c = InfoColumns(np.array([2]), {"x": np.array([7]), "d": [{"r": True}]}, frozenset({"x"}))
    per_env = [
        {"d": {"q": "t", "p": 0.5}},
        {"d": {}, "x": 2},
        {"x": 7, "d": {"r": True}},
        {"d": {}, "x": 1},
        {"d": {"p": 1.5, "q": "s"}},
    ]
    for chunks in ([a, b, c], [c, b, a], [b, c, a], [a, c]):
        expected = per_env
        if len(chunks) == 2:  # without b
            expected = [
                {k: v for k, v in info.items() if i not in (0, 4)} for i, info in enumerate(per_env)
            ]
        ours = _check_merged(5, chunks, expected)
        assert ours["d"].get("_p", np.zeros(5, bool)).tolist() == (
            [True, False, False, False, True] if len(chunks) == 3 else [False] * 5
        )
    # every dict empty: an empty dict column, masked where reported
    ours = _check_merged(5, [a], [{}, {"d": {}, "x": 2}, {}, {"d": {}, "x": 1}, {}])
    assert ours["d"] == {}
    assert ours["_d"].tolist() == [False, True, False, True, False]
    # keys in order of first appearance in env order, whichever chunk comes first
    ours = batch_info_columns(5, [a, c, b])
    assert list(ours["d"]) == ["q", "_q", "p", "_p", "r", "_r"]


def test_nested_in_both_chunks_with_keys_in_one_only() -> None:
    a = InfoColumns(np.array([1, 3]), {"m": Nested({"id": ["a", "b"], "t": [0, 0]})})
    b = InfoColumns(
        np.array([0, 2]),
        {"m": Nested({"id": ["c", "d"], "t": np.array([1, 2]), "s": [{"g": 0.5}, {"g": 1.0}]})},
    )
    per_env = [
        {"m": {"id": "c", "t": 1, "s": {"g": 0.5}}},
        {"m": {"id": "a", "t": 0}},
        {"m": {"id": "d", "t": 2, "s": {"g": 1.0}}},
        {"m": {"id": "b", "t": 0}},
    ]
    for chunks in ([a, b], [b, a]):
        ours = _check_merged(4, chunks, per_env)
        assert ours["m"]["t"].dtype == np.int64
        assert ours["m"]["_s"].tolist() == [True, False, True, False]
        assert ours["m"]["s"]["g"].tolist() == [0.5, 0.0, 1.0, 0.0]


# a value of a key: one kind per (key, chunk), kinds may differ between chunks
CHUNK_KINDS = {
    "int": st.integers(-5, 5),
    "float": st.floats(-5, 5, allow_nan=False),
    "bool": st.booleans(),
    "str": st.text(max_size=2),
    "list": st.lists(st.integers(0, 3), max_size=2),
    "np": st.integers(-5, 5).map(np.int32),
}
NUMERIC = {"int": np.int64, "float": np.float64, "bool": np.bool_}
INNER = ["p", "q", "r"]


@st.composite
def merged_scenarios(draw: st.DrawFn) -> tuple[int, list[dict[str, Any]], list[InfoColumns]]:
    """``(n, per_env, chunks)``: disjoint chunks, each key a list, ndarray, dicts or Nested."""
    n = draw(st.integers(2, 9))
    order = draw(st.permutations(range(n)))
    cuts = sorted(draw(st.lists(st.integers(1, n - 1), max_size=3, unique=True)))
    groups = [order[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    if draw(st.booleans()):
        groups = [sorted(g) for g in groups]
    per_env: list[dict[str, Any]] = [{} for _ in range(n)]
    chunks = []
    for members in groups:
        columns: dict[str, Any] = {}
        numeric = set()
        for key in draw(st.lists(st.sampled_from(["a", "b", "d", "m"]), unique=True)):
            if key in "ab":
                kind = draw(st.sampled_from(sorted(CHUNK_KINDS)))
                values = [draw(CHUNK_KINDS[kind]) for _ in members]
                if kind in NUMERIC and draw(st.booleans()):
                    columns[key] = np.array(values, dtype=NUMERIC[kind])
                    numeric.add(key)
                else:
                    columns[key] = values
            else:  # dicts, each row with the same keys (or none); floats at "p"
                inner = draw(st.lists(st.sampled_from(INNER), unique=True))
                values = [
                    {
                        k: draw(
                            st.floats(-5, 5, allow_nan=False)
                            if k == "p"
                            else st.sampled_from([{"x": 1}, {"x": 2, "y": "z"}, "s"])
                        )
                        for k in inner
                    }
                    for _ in members
                ]
                if key == "m" and draw(st.booleans()):
                    columns[key] = Nested({k: [v[k] for v in values] for k in inner})
                else:
                    columns[key] = values
            for i, value in zip(members, values, strict=True):
                per_env[i][key] = value
        rows = np.array(members, dtype=np.intp)
        if members == list(range(n)) and draw(st.booleans()):
            rows = None
        chunks.append(InfoColumns(rows, columns, frozenset(numeric)))
    return n, per_env, draw(st.permutations(chunks))


def _gym_defined(per_env: list[dict[str, Any]]) -> bool:
    """Whether Gymnasium's ``_add_info`` neither truncates nor raises on these infos."""
    firsts: dict[str, type] = {}

    def visit(info: dict[str, Any], path: str) -> bool:
        for key, value in info.items():
            first = firsts.setdefault(f"{path}/{key}", type(value))
            if (first is dict) != isinstance(value, dict):  # a dict and a non-dict
                return False
            if isinstance(value, dict):
                if not visit(value, f"{path}/{key}"):
                    return False
                continue
            # a number column takes the first's dtype: a later value must fit it
            if issubclass(first, bool):
                fits = type(value) is bool
            elif issubclass(first, int | np.integer):
                fits = isinstance(value, int | np.integer)
            elif issubclass(first, float | np.number):
                fits = isinstance(value, int | float | np.number)
            else:  # an object column
                fits = True
            if not fits:
                return False
        return True

    return all(visit(info, "") for info in per_env)


@settings(max_examples=400, deadline=None)
@given(merged_scenarios())
def test_merged_chunks_batch_as_their_per_env_infos(
    scenario: tuple[int, list[dict[str, Any]], list[InfoColumns]],
) -> None:
    n, per_env, chunks = scenario
    _check_merged(n, list(chunks), per_env, gym=_gym_defined(per_env))


@settings(max_examples=200, deadline=None)
@given(st.one_of(scenarios(), merged_scenarios()), st.data())
def test_the_property_notices_a_wrong_construction(
    scenario: tuple[int, list[dict[str, Any]], list[InfoColumns]], data: st.DataObject
) -> None:
    """The chunks (one or merged) against per-env infos they do NOT stand for: never ``same``."""
    n, per_env, chunks = scenario
    cells = [(i, key) for i, info in enumerate(per_env) for key in info]
    assume(cells)
    i, key = data.draw(st.sampled_from(cells))
    wrong = copy.deepcopy(per_env)
    if data.draw(st.booleans()):
        del wrong[i][key]
    else:
        wrong[i][key] = _changed(wrong[i][key])
    assert not same(batch_info_columns(n, list(chunks)), batch_infos(wrong))


def test_keys_come_in_env_order_whatever_order_the_chunks_came_in() -> None:
    """A later chunk holding sub-env 0 puts its keys first, as Gymnasium's ``_add_info``."""
    late = InfoColumns(np.array([1]), {"x": [1]})
    early = InfoColumns(np.array([0]), {"y": ["a"], "x": [2], "z": [{"b": 1, "a": 2}]})
    per_env: list[dict[str, Any]] = [{"y": "a", "x": 2, "z": {"b": 1, "a": 2}}, {"x": 1}]
    for chunks in ([late, early], [early, late]):
        ours = _check_merged(2, chunks, per_env)
        assert list(ours) == ["y", "_y", "x", "_x", "z", "_z"]
        assert list(ours["z"]) == ["b", "_b", "a", "_a"]
