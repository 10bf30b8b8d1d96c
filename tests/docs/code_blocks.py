"""Helpers of tests/docs: the fenced code blocks of the README and the docs, and running them.

Not a test module. A Python block runs as written, in one interpreter per page (a later
block sees what an earlier one defined, as a reader would have it), with two substitutions
only: every remote URL is pointed at a local server of the env it names (:data:`REMOTE`),
and a block that starts with ``# NAME.py`` is a file the reader writes, saved under that
name in the working directory instead of run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S
)
URL = re.compile(r"""https?://[^\s"'`)>]+""")

REMOTE = {
    "https://openenv-wordle.hf.space": "wordle",
    "https://openenv-echo-env.hf.space": "echo",
    "https://my-space.hf.space": "echo",
}
"""The remote servers the pages name, and the local server each is pointed at."""

LOCAL = (
    "http://127.0.0.1",
    "http://localhost",
    "https://download.pytorch.org",
    "https://github.com",
)
"""URLs that are not servers to stand in for (local ones, and where pip or git go)."""


@dataclass(frozen=True)
class Block:
    """One fenced block of a page."""

    page: str
    line: int
    lang: str
    code: str

    @property
    def file_name(self) -> str | None:
        """``NAME.py`` when the block is a file to write (its first line is ``# NAME.py``)."""
        first = self.code.split("\n", 1)[0].strip()
        match = re.fullmatch(r"#\s*([\w./-]+\.py)", first)
        return match.group(1) if match else None

    def remote_urls(self) -> list[str]:
        return [u for u in URL.findall(self.code) if not u.startswith(LOCAL)]


def blocks(page: str, lang: str | None = None) -> list[Block]:
    """The fenced blocks of ``page`` (relative to the repository), in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        if lang is not None and match.group("lang") != lang:
            continue
        line = text.count("\n", 0, match.start()) + 1
        code = textwrap.dedent(match.group("body"))
        found.append(Block(page, line, match.group("lang"), code))
    return found


def script(page_blocks: list[Block], urls: dict[str, str], folder: Path) -> str:
    """One program of a page's Python blocks: files written, remote URLs pointed locally."""
    parts = []
    for block in page_blocks:
        code = block.code
        for remote, local in urls.items():
            code = code.replace(remote, local)
        if block.file_name is not None:
            (folder / block.file_name).write_text(code, encoding="utf-8")
            continue
        parts.append(f"# --- {block.page}:{block.line}\n{code}")
    return "\n".join(parts)


def run(program: str, folder: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``program`` with this interpreter in ``folder`` (a reader's working directory)."""
    return subprocess.run(
        [sys.executable, "-c", program],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), *sys.path])},
        check=False,
    )
