"""docs/check.md's sample output against our Wordle server is a real run's (issue 15)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from check_fake_servers import our_server

from openenv_gym.cli import main

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "check.md"


def _normalised(text: str) -> str:
    """The port and the close time vary from run to run."""
    text = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:PORT", text)
    return re.sub(r"with code 1000 after [\d.]+ ms", "with code 1000 after T ms", text)


def test_wordle_sample_is_what_check_prints(capsys):
    page = DOC.read_text(encoding="utf-8")
    sample = page.split("Sample output, against our Wordle server", 1)[1]
    sample = sample.split("```text\n", 1)[1].split("```", 1)[0]
    with our_server("wordle") as url:
        assert main(["check", url]) == 0
    printed = capsys.readouterr().out
    assert _normalised(printed) == _normalised(sample)
