"""mkdocs hooks: bring pages that live outside ``docs/`` into the site without moving them.

``benchmarks/README.md`` (with the plots under ``benchmarks/results/``) and ``CHANGELOG.md``
stay where they are, the files of record on GitHub and in the sdist; the site serves them as
``benchmarks/`` and ``changelog/``. Listed in ``mkdocs.yml`` under ``hooks``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

__all__ = ["EXTERNAL_PAGES", "on_files"]

ROOT = Path(__file__).resolve().parent.parent

EXTERNAL_PAGES: dict[str, str] = {
    "benchmarks/index.md": "benchmarks/README.md",
    "changelog.md": "CHANGELOG.md",
}
"""Site path (under ``docs/``, as the nav names it) -> file in the repository."""

_ASSETS: dict[str, str] = {"benchmarks/results": "*.png"}
"""Folders whose files the external pages link to (relative links keep working)."""


def on_files(files: Files, config: Any) -> Files:
    """Add the external pages and their images to the site's files (mkdocs hook)."""
    for src_uri, path in EXTERNAL_PAGES.items():
        files.append(File.generated(config, src_uri, abs_src_path=str(ROOT / path)))
    for folder, pattern in _ASSETS.items():
        for path in sorted((ROOT / folder).glob(pattern)):
            src_uri = f"{folder}/{path.name}"
            files.append(File.generated(config, src_uri, abs_src_path=str(path)))
    return files
