"""Errors a user meets with bad arguments: typed, one line, and saying what to do (issue 15).

Each test here failed on the behaviour the issue reported: ``autoreset_mode="SAME_STEP"``
refused without the valid values, an invalid Wordle action answered with the whole Text
charset over several lines, ``call("state")`` after ``send()`` a several-KB group error,
plain ``ValueError`` / ``TypeError`` out of public methods, ``Timeouts(...)`` deaf to the
``OPENENV_GYM_*`` variables, ``num_servers=0`` and ``batch_size=0`` silently taken for 1 and N.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import openenv_gym
from openenv_gym.check import check_server
from openenv_gym.config import Timeouts, check_count
from openenv_gym.env import OpenEnvEnv
from openenv_gym.exceptions import (
    ArgumentTypeError,
    ConfigurationError,
    EnvClosedError,
    EnvErrorGroup,
    InvalidActionError,
    OpenEnvGymError,
    PendingCallError,
)
from openenv_gym.providers import DockerProvider, LocalProvider, UrlProvider, make_provider
from openenv_gym.vector import OpenEnvVectorEnv, parse_autoreset_mode

gymnasium.register_envs(openenv_gym)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, tuple[str, str | None]]]:
    """One echo and one wordle server: name -> (url, token)."""
    started = {name: LocalProvider(name) for name in ("echo", "wordle")}
    try:
        yield {name: (p.start()[0], p.token(0)) for name, p in started.items()}
    finally:
        for provider in started.values():
            provider.close()


def _vector(servers: dict[str, tuple[str, str | None]], name: str, n: int, **kw: Any):
    url, token = servers[name]
    return OpenEnvVectorEnv(name, n, base_url=url, token=token, **kw)


# ------------------------------------------------------------------ autoreset_mode


@pytest.mark.parametrize(
    "spelling",
    ["SAME_STEP", "same_step", "Same_Step", "SameStep", "samestep", AutoresetMode.SAME_STEP],
)
def test_autoreset_mode_takes_member_names_in_any_case_values_and_the_enum(spelling, servers):
    assert parse_autoreset_mode(spelling) is AutoresetMode.SAME_STEP
    with _vector(servers, "echo", 2, autoreset_mode=spelling) as envs:
        assert envs.autoreset_mode is AutoresetMode.SAME_STEP
        assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP


@pytest.mark.parametrize("bad", ["SAME-STEP", "", 1, None])
def test_unknown_autoreset_mode_lists_the_valid_values(bad):
    with pytest.raises(ConfigurationError) as info:
        parse_autoreset_mode(bad)
    message = str(info.value)
    assert all(name in message for name in ("'NEXT_STEP'", "'SAME_STEP'", "'DISABLED'"))
    assert "\n" not in message


def test_vector_env_refuses_an_unknown_autoreset_mode_with_the_valid_values(servers):
    with pytest.raises(ConfigurationError, match="'NEXT_STEP', 'SAME_STEP', 'DISABLED'"):
        _vector(servers, "echo", 2, autoreset_mode="same step")


# ------------------------------------------------------------------ invalid actions


@pytest.fixture(scope="module")
def wordle(servers) -> Iterator[OpenEnvEnv]:
    url, token = servers["wordle"]
    env = OpenEnvEnv("wordle", base_url=url, token=token)
    env.reset(seed=1)
    yield env
    env.close()


@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("x" * 10_000, "10000 characters, more than the 256 allowed"),
        ("[cr\x00ne]", r"character '\x00' at index 3 is not in the charset"),
        (5, "an int, not a str"),
        (b"[crane]", "a bytes, not a str"),
        ("", "0 characters, fewer than the 1 needed"),
    ],
)
def test_invalid_wordle_action_says_what_is_wrong_in_one_short_line(wordle, action, says):
    with pytest.raises(InvalidActionError) as info:
        wordle.step(action)
    message = str(info.value)
    assert says in message
    assert "Text(1, 256, printable ASCII)" in message  # not the charset spelled out
    assert "\n" not in message
    assert len(message) < 200, message  # the 10,000-character action is shortened


def test_invalid_vector_actions_say_what_is_wrong_per_sub_env(servers):
    with _vector(servers, "wordle", 2) as envs:
        envs.reset(seed=1)
        with pytest.raises(EnvErrorGroup) as info:
            envs.step(("[crane]", "y" * 5_000))
    error = info.value.errors[1]
    assert isinstance(error, InvalidActionError)
    assert "5000 characters, more than the 256 allowed" in str(error)
    assert "\n" not in str(info.value)
    assert len(str(info.value)) < 300


# ------------------------------------------------------------------ call order


def test_call_state_while_sent_steps_are_pending_says_call_recv_first(servers):
    with _vector(servers, "echo", 64) as envs:
        envs.reset(seed=0)
        envs.send(envs.action_space.sample())
        with pytest.raises(PendingCallError) as info:
            envs.call("state")
        assert str(info.value) == "steps sent with send() are pending: call recv() first"
        envs.recv(batch_size=64)
        assert len(envs.call("state")) == 64  # usable again once received
        envs.step_async(envs.action_space.sample())
        with pytest.raises(PendingCallError, match=r"call step_wait\(\) first"):
            envs.call("state")
        envs.step_wait()


# ------------------------------------------------------------------ typed errors


_BAD_VECTOR_ARGS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"num_servers": 0}, ConfigurationError, "num_servers must be a positive integer"),
    ({"num_servers": "2"}, ArgumentTypeError, "num_servers must be a positive integer"),
    ({"batch_size": 0}, ConfigurationError, "batch_size must be a positive integer"),
    ({"frame_size": "x"}, ArgumentTypeError, "frame_size must be a positive integer"),
    ({"envs_per_server": 0}, ConfigurationError, "envs_per_server must be a positive integer"),
    ({"max_episode_steps": "10"}, ArgumentTypeError, "max_episode_steps must be a positive"),
    ({"timeouts": 5}, ConfigurationError, "timeouts must be a Timeouts, a mapping"),
    ({"timeouts": {"stepp": 1}}, ArgumentTypeError, "unknown timeout(s) 'stepp'"),
    ({"headers": 5}, ArgumentTypeError, "headers must be a mapping"),
    ({"codec": "wordle"}, ArgumentTypeError, "codec must be a Codec"),
    ({"provider": 5}, ArgumentTypeError, "provider must be 'local', 'docker', 'ray', 'url'"),
    ({"base_url": 5}, ArgumentTypeError, "base_url must be a URL, a list of URLs or None"),
]


_VECTOR_ONLY = {"num_servers", "batch_size", "frame_size", "envs_per_server"}


@pytest.mark.parametrize(
    ("factory", "kwargs", "kind", "message"),
    [("vector", *case) for case in _BAD_VECTOR_ARGS]
    + [("env", *case) for case in _BAD_VECTOR_ARGS if not set(case[0]) & _VECTOR_ONLY],
)
def test_bad_constructor_arguments_raise_typed_errors(factory, kwargs, kind, message):
    """Refused before any server starts; the builtin base class stays (``except ValueError``)."""
    build: Callable[[], Any] = (
        (lambda: OpenEnvVectorEnv("echo", 2, **kwargs))
        if factory == "vector"
        else (lambda: OpenEnvEnv("echo", **kwargs))
    )
    with pytest.raises(kind) as info:
        build()
    assert isinstance(info.value, OpenEnvGymError)
    assert isinstance(info.value, ValueError)  # ConfigurationError, ArgumentTypeError too
    assert isinstance(info.value, TypeError) == (kind is ArgumentTypeError)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_method_arguments_raise_typed_errors(servers):
    with _vector(servers, "echo", 2) as envs:
        calls: list[tuple[Callable[[], Any], type[Exception]]] = [
            (lambda: envs.reset(seed=[1, 2, 3]), ConfigurationError),
            (lambda: envs.reset(options={"reset_mask": [True, False]}), ArgumentTypeError),
            (lambda: envs.reset(options={"reset_mask": np.array([True])}), ConfigurationError),
            (lambda: envs.reset(options={"reset_mask": np.array([1, 0])}), ArgumentTypeError),
            (lambda: envs.reset(options={"reset_mask": np.zeros(2, bool)}), ConfigurationError),
            (lambda: envs.set_attr("max_episode_steps", [1, 2]), ConfigurationError),
        ]
        for call, kind in calls:
            with pytest.raises(kind):
                call()
        envs.reset(seed=0)
        with pytest.raises(ConfigurationError, match=r"env_ids must be distinct indices"):
            envs.send(["a"], env_ids=[5])
        envs.step(("a", "b"))  # nothing was left pending
    url, token = servers["echo"]
    with OpenEnvEnv("echo", base_url=url, token=token) as env:
        # one seed rule for every env (issue 25, item 3): tests/gym/test_seeds_and_errors.py
        with pytest.raises(ArgumentTypeError, match="seed must be a non-negative integer"):
            env.reset(seed="7")
        with pytest.raises(ArgumentTypeError, match=r"options must be a dict or None, got 5$"):
            env.reset(options=5)  # the message names what was given
        env.reset(seed=7)


@pytest.mark.parametrize(
    "build",
    [
        lambda: LocalProvider("echo", start_timeout="30"),
        lambda: LocalProvider("echo", start_timeout=-1),
        lambda: DockerProvider("echo", start_timeout=0),
        lambda: UrlProvider(5),
        lambda: UrlProvider({"url": "http://127.0.0.1:1"}),
    ],
)
def test_provider_arguments_raise_configuration_errors(build):
    with pytest.raises(ConfigurationError) as info:
        build()
    assert "\n" not in str(info.value)


def test_providers_and_check_server_raise_typed_errors():
    with pytest.raises(ArgumentTypeError):
        make_provider("echo", provider=object())
    with pytest.raises(ArgumentTypeError):
        make_provider("echo", base_url=["http://127.0.0.1:1", 2])
    with pytest.raises(ArgumentTypeError, match="url must be a string"):
        check_server(5)
    with pytest.raises(ArgumentTypeError, match="timeouts must be a Timeouts or None"):
        check_server("http://127.0.0.1:1", timeouts={"step": 1})


@pytest.mark.parametrize(
    ("value", "kind"),
    [(0, ConfigurationError), (-3, ConfigurationError), (True, ArgumentTypeError)],
)
def test_check_count(value, kind):
    with pytest.raises(kind, match="n must be a positive integer"):
        check_count(value, "n")
    assert check_count(np.int64(3), "n") == 3


# ------------------------------------------------------------------ Timeouts and the variables


def test_timeouts_read_the_variables_however_they_are_made(monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_STEP_TIMEOUT", "7")
    monkeypatch.setenv("OPENENV_GYM_CLOSE_TIMEOUT", "off")
    expected = Timeouts(connect=10.0, step=7.0, close=None)
    assert Timeouts() == expected  # was Timeouts(10, 60, 5): the variables were ignored
    assert Timeouts.of(None) == Timeouts.of({}) == Timeouts.from_env() == expected
    assert Timeouts(connect=3) == Timeouts.of({"connect": 3}) == Timeouts(3, 7.0, None)
    assert Timeouts(step=2) == Timeouts.of({"step": 2})  # an argument wins over a variable
    assert Timeouts(step=2).step == 2


def test_timeouts_refuse_a_bad_variable_only_where_it_is_used(monkeypatch):
    monkeypatch.setenv("OPENENV_GYM_STEP_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="OPENENV_GYM_STEP_TIMEOUT='soon'"):
        Timeouts()
    assert Timeouts(step=1).step == 1  # given: the variable is not read


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("nan")])
def test_timeouts_refuse_bad_values(bad):
    with pytest.raises(ConfigurationError, match="must be a number of seconds > 0, or None"):
        Timeouts(step=bad)


# ------------------------------------------------------------------ context managers


def test_with_make_closes_the_env_and_its_server():
    with gymnasium.make("openenv/Echo-v0") as env:
        env.reset(seed=0)
        provider = env.unwrapped._provider
        process = provider.servers[0].process
    with pytest.raises(EnvClosedError):
        env.reset()
    assert process is not None
    assert process.wait(10) is not None


# ------------------------------------------------------------------ Literal types


def test_string_options_are_literal_types_listing_what_is_accepted():
    import typing

    from openenv_gym.assemble import ON_SERVER_LOSS
    from openenv_gym.config import AutoresetModeName, OnServerLoss, ProtocolName
    from openenv_gym.providers.ray import PLACEMENTS, Placement, RayProvider
    from openenv_gym.transport.session import Protocol

    assert set(typing.get_args(ProtocolName)) == set(typing.get_args(Protocol))
    assert set(typing.get_args(OnServerLoss)) == set(ON_SERVER_LOSS)
    assert set(typing.get_args(Placement)) == set(PLACEMENTS)
    for name in typing.get_args(AutoresetModeName):
        assert isinstance(parse_autoreset_mode(name), AutoresetMode)

    def option_hints(cls: type) -> dict[str, object]:
        # the options are defined once, in the TypedDict of ``**options: Unpack[...]``
        (options,) = typing.get_args(typing.get_type_hints(cls.__init__)["options"])
        return typing.get_type_hints(options)

    for cls in (OpenEnvEnv, OpenEnvVectorEnv):
        hints = option_hints(cls)
        assert hints["protocol"] == ProtocolName | None
        assert hints["on_server_loss"] == OnServerLoss
    hints = option_hints(OpenEnvVectorEnv)
    assert hints["autoreset_mode"] == AutoresetMode | AutoresetModeName
    assert typing.get_type_hints(RayProvider.__init__)["placement"] == Placement | None


@pytest.mark.parametrize(
    ("space", "value", "says"),
    [
        # a ragged list: np.shape raises on it; the message must not (found in review)
        (gymnasium.spaces.Box(0, 1, (2,)), [[1, 2], [3]], "outside the space"),
        # a 0-d array stands for its value, as Discrete.contains takes it
        (gymnasium.spaces.Discrete(3), np.array(7), "outside [0, 2]"),
        (gymnasium.spaces.Box(0, 1, (2,)), [0.5], "shape (1,), not (2,)"),
    ],
)
def test_action_error_never_fails_on_the_value_it_describes(space, value, says):
    from openenv_gym.spaces import action_error

    message = action_error(space, value)
    assert message.endswith(says), message
    assert "\n" not in message


def test_an_infinite_timeout_means_no_timeout():
    # worked before the timeouts were checked; kept (found in review): inf is stored as None
    assert Timeouts(step=float("inf")).step is None
    assert Timeouts.of({"connect": float("inf")}).connect is None
    with pytest.raises(ConfigurationError, match="got nan"):
        Timeouts(step=float("nan"))


def test_an_unknown_timeout_field_is_still_a_type_error():
    with pytest.raises(TypeError, match="unknown timeout"):
        Timeouts.of({"stp": 3})
