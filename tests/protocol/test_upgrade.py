"""The keepalive opt-in's headers (``protocol/upgrade.py``): what a server announces, read."""

from __future__ import annotations

import pytest

from openenv_gym.protocol.upgrade import IDLE_TIMEOUT_HEADER, KEEPALIVE_HEADER, parse_idle_timeout


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("900", 900.0),
        ("0.5", 0.5),
        ("none", None),
        (None, None),
        ("", None),
        ("0", None),
        ("-3", None),
        ("inf", None),
        ("nan", None),
        ("soon", None),
    ],
)
def test_an_announced_idle_timeout_is_a_positive_number_or_none(value, seconds):
    assert parse_idle_timeout(value) == seconds


def test_the_header_names_are_the_documented_ones():
    assert (KEEPALIVE_HEADER, IDLE_TIMEOUT_HEADER) == (
        "OpenEnv-Gym-Keepalive",
        "OpenEnv-Gym-Idle-Timeout",
    )
