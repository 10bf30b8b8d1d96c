"""Local servers log where they started and that they stopped, at INFO (docs/logging.md)."""

from __future__ import annotations

import logging
import re

import pytest

from openenv_gym.providers import LocalProvider

pytestmark = pytest.mark.integration


def test_local_server_start_and_stop_are_logged_with_url_and_pid(caplog):
    caplog.set_level(logging.INFO, logger="openenv_gym.providers")
    provider = LocalProvider("echo")
    try:
        [url] = provider.start()
        [pid] = provider.pids
    finally:
        provider.close()
    messages = [
        (r.name, r.levelno, r.getMessage())
        for r in caplog.records
        if r.name.startswith("openenv_gym")
    ]
    assert (
        "openenv_gym.providers",
        logging.INFO,
        f"local server started: echo at {url} (pid {pid})",
    ) in messages
    stopped = [m for _, level, m in messages if level == logging.INFO and "stopped" in m]
    assert len(stopped) == 1, messages  # once, though close() stops it twice (finalizer, atexit)
    assert re.fullmatch(
        rf"local server stopped: echo at {re.escape(url)} \(pid {pid}, exit status -?\d+\)",
        stopped[0],
    )
    assert url.startswith("http://127.0.0.1:")


def test_nothing_is_logged_at_the_default_level(caplog):
    caplog.set_level(logging.WARNING, logger="openenv_gym")
    provider = LocalProvider("echo")
    try:
        provider.start()
    finally:
        provider.close()
    assert [r for r in caplog.records if r.name.startswith("openenv_gym")] == []
