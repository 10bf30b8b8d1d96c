"""The Python blocks of these docs pages run as written, one interpreter per page.

As for the README (:mod:`code_blocks`): blocks in order, later ones using what earlier ones
made, URLs of servers the reader is assumed to run pointed at local servers of the env
they name (:data:`SERVERS`). Each page runs in a fresh folder, its working directory, and
with ``MINARI_DATASETS_PATH`` there (Minari writes under the home folder otherwise).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from code_blocks import REMOTE, blocks, run, script

from openenv_gym.providers import LocalProvider

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

PAGES = ["docs/recording.md", "docs/install.md", "docs/check.md"]
"""Pages whose every Python block this test runs (the README: test_readme_blocks.py)."""

SERVERS = {**REMOTE, "http://127.0.0.1:8000": "wordle"}
"""Servers the pages name, and the local server each stands for."""


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_a_page_run(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = blocks(page, "python")
    assert python, f"{page} has no Python block"
    named = {u for block in python for u in block.remote_urls()} | {
        u for block in python for u in SERVERS if u in block.code
    }
    unknown = named - set(SERVERS)
    assert not unknown, f"{page} names {unknown}: add them to SERVERS"
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "docs-blocks")  # the local servers' token
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    providers: dict[str, LocalProvider] = {}
    urls: dict[str, str] = {}
    try:
        for url in sorted(named):
            env = SERVERS[url]
            if env not in providers:
                providers[env] = LocalProvider(env)
            urls[url] = providers[env].start()[0]
        result = run(script(python, urls, tmp_path), tmp_path, timeout=560)
    finally:
        for provider in providers.values():
            provider.close()
    assert result.returncode == 0, f"{page}:\n{result.stderr[-4000:]}"
