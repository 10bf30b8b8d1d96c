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


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.data())
def test_the_property_notices_a_wrong_construction(
    scenario: tuple[int, list[dict[str, Any]], list[InfoColumns]], data: st.DataObject
) -> None:
    """The chunks compared with per-env infos they do NOT stand for: never ``same``."""
    n, per_env, chunks = scenario
    cells = [(i, key) for i, info in enumerate(per_env) for key in info]
    assume(cells)
    i, key = data.draw(st.sampled_from(cells))
    wrong = copy.deepcopy(per_env)
    if data.draw(st.booleans()):
        del wrong[i][key]
    else:
        wrong[i][key] = _changed(wrong[i][key])
    assert not same(batch_info_columns(n, chunks), batch_infos(wrong))


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
