"""The pieces of ``openenv_gym.check`` that need no server: actions from schemas, reports."""

from __future__ import annotations

import json

import pytest

from openenv_gym.check import CheckReport, CheckResult, Status, check_server, example_action
from openenv_gym.exceptions import ConfigurationError


def _object(properties, required):
    return {"type": "object", "properties": properties, "required": required}


@pytest.mark.parametrize(
    ("schema", "action"),
    [
        (_object({"message": {"type": "string"}}, ["message"]), {"message": "a"}),
        (_object({"message": {"type": "string", "minLength": 3}}, ["message"]), {"message": "aaa"}),
        (_object({"n": {"type": "integer"}}, ["n"]), {"n": 0}),
        (_object({"n": {"type": "integer", "minimum": 2, "maximum": 5}}, ["n"]), {"n": 2}),
        (_object({"n": {"type": "integer", "exclusiveMinimum": 2}}, ["n"]), {"n": 3}),
        (_object({"n": {"type": "integer", "maximum": -4}}, ["n"]), {"n": -4}),
        (_object({"x": {"type": "number", "minimum": 0.5}}, ["x"]), {"x": 0.5}),
        (_object({"b": {"type": "boolean"}}, ["b"]), {"b": False}),
        (_object({"e": {"enum": ["up", "down"]}}, ["e"]), {"e": "up"}),
        (_object({"c": {"const": "move"}}, ["c"]), {"c": "move"}),
        (_object({"d": {"type": "string", "default": "x"}}, ["d"]), {"d": "x"}),
        (_object({"o": {"anyOf": [{"type": "null"}, {"type": "integer"}]}}, ["o"]), {"o": 0}),
        (_object({"t": {"type": ["null", "string"]}}, ["t"]), {"t": "a"}),
        (_object({"l": {"type": "array", "items": {"type": "integer"}}}, ["l"]), {"l": []}),
        (
            _object({"l": {"type": "array", "items": {"type": "integer"}, "minItems": 2}}, ["l"]),
            {"l": [0, 0]},
        ),
        (_object({"message": {"type": "string"}, "metadata": {"type": "object"}}, []), {}),
        (
            {
                "$defs": {"Move": {"enum": ["left", "right"]}},
                **_object({"move": {"$ref": "#/$defs/Move"}}, ["move"]),
            },
            {"move": "left"},
        ),
        (
            {
                "$defs": {"Inner": _object({"k": {"type": "integer"}}, ["k"])},
                **_object({"inner": {"$ref": "#/$defs/Inner"}}, ["inner"]),
            },
            {"inner": {"k": 0}},
        ),
        (
            {"$ref": "#/$defs/A", "$defs": {"A": _object({"s": {"type": "string"}}, ["s"])}},
            {"s": "a"},
        ),
    ],
)
def test_example_action(schema, action):
    assert example_action(schema) == action


@pytest.mark.parametrize(
    "schema",
    [
        _object({"x": {}}, ["x"]),  # no type
        _object({}, ["x"]),  # required but not described
        _object({"x": {"$ref": "#/$defs/Missing"}}, ["x"]),
        _object({"x": {"$ref": "http://elsewhere/schema"}}, ["x"]),
        _object({"x": {"anyOf": [{}, {"not": {}}]}}, ["x"]),
        _object({"l": {"type": "array", "items": {}, "minItems": 1}}, ["l"]),
        {"type": "string"},  # not an object
        {"$ref": "#/$defs/Loop", "$defs": {"Loop": {"$ref": "#/$defs/Loop"}}},
    ],
)
def test_example_action_gives_up(schema):
    assert example_action(schema) is None


def _report():
    return CheckReport(
        "http://127.0.0.1:8000",
        (
            CheckResult("health", Status.PASS, 'GET /health: 200 {"status": "healthy"}'),
            CheckResult("metadata", Status.WARN, "GET /metadata answered HTTP 404"),
            CheckResult("close", Status.FAIL, "did not close", {"close_code": None}),
            CheckResult("batch", Status.SKIP, "not offered"),
        ),
    )


def test_render():
    assert _report().render().splitlines() == [
        "openenv-gym check http://127.0.0.1:8000",
        '  PASS  health    GET /health: 200 {"status": "healthy"}',
        "  WARN  metadata  GET /metadata answered HTTP 404",
        "  FAIL  close     did not close",
        "  SKIP  batch     not offered",
        "FAILED: 1 passed, 1 warning, 1 failed, 1 skipped",
    ]
    assert str(_report()) == _report().render()


def test_to_dict_is_json():
    data = json.loads(json.dumps(_report().to_dict()))
    assert data["ok"] is False
    assert data["counts"] == {"pass": 1, "warn": 1, "fail": 1, "skip": 1}
    assert data["checks"][2] == {
        "name": "close",
        "status": "fail",
        "detail": "did not close",
        "info": {"close_code": None},
    }


def test_lookup_by_name():
    report = _report()
    assert report["metadata"].status == "warn"
    with pytest.raises(KeyError):
        report["nope"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"action": ["not", "a", "map"]},
        {"max_sessions": 0},
        {"max_sessions": True},
        {"seed": "1"},
        {"check_timeout": 0},
    ],
)
def test_bad_arguments(kwargs):
    with pytest.raises(ConfigurationError):
        check_server("http://127.0.0.1:9", **kwargs)
