"""Shared by the TRL / vLLM tests: offline settings and the tiny tokenizer."""

from __future__ import annotations

import os
from typing import Any

import pytest

# no model hub on these machines; TRL's "experimental feature" warning is noise in tests
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    """The tiny offline tokenizer (needs transformers and TRL's chat template)."""
    pytest.importorskip("trl")
    from openenv_gym.integrations.tiny import tiny_tokenizer

    return tiny_tokenizer()
