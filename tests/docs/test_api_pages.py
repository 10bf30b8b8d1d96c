"""The API reference: a page for every public module, derived from the package itself.

Public modules: every module and subpackage of ``openenv_gym`` whose name does not start
with ``_``, and every module of ``openenv_gym.integrations`` and ``openenv_gym.providers``
(the extras and the providers users import by name), save the command line and a
deprecated alias (:data:`NOT_API`). Each needs a ``::: module`` directive on a page of
``docs/api/`` that the site's nav lists. A module added to the package without a page fails
here. The docstrings those pages render carry no maintainers' notes: no measured figures
(they live in ``benchmarks/README.md``), no issue numbers, no TODOs.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import openenv_gym

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"

NOT_API = {
    "openenv_gym.cli": "the command line: documented as commands in docs/cli.md",
    "openenv_gym.cli_ray": "the ray commands of the command line (docs/cli.md)",
    "openenv_gym.server": "the deprecated alias of openenv_gym.runtime",
}
"""Modules that are not API, and why."""

NAMESPACES = ("openenv_gym.integrations", "openenv_gym.providers")
"""Packages whose every module is public on its own."""

DIRECTIVE = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)


def public_modules() -> list[str]:
    names = [
        f"openenv_gym.{m.name}"
        for m in pkgutil.iter_modules(openenv_gym.__path__)
        if not m.name.startswith("_")
    ]
    for namespace in NAMESPACES:
        package = importlib.import_module(namespace)
        names += [
            f"{namespace}.{m.name}"
            for m in pkgutil.iter_modules(package.__path__)
            if not m.name.startswith("_")
        ]
    return sorted(n for n in names if n not in NOT_API)


def documented() -> dict[str, str]:
    """Every ``::: target`` of docs/api/, with its page."""
    return {
        target: page.name
        for page in sorted(API.glob("*.md"))
        for target in DIRECTIVE.findall(page.read_text(encoding="utf-8"))
    }


def test_every_public_module_has_a_page() -> None:
    pages = documented()
    missing = [name for name in public_modules() if name not in pages]
    assert not missing, f"no docs/api page has a '::: module' directive for {missing}"


def test_every_directive_names_something_real() -> None:
    for target, page in documented().items():
        module, _, attribute = target.rpartition(".")
        try:
            importlib.import_module(target)
        except ImportError:
            assert hasattr(importlib.import_module(module), attribute), (page, target)


def _nav_pages(items: Any) -> list[str]:
    found: list[str] = []
    if isinstance(items, list):
        for item in items:
            found += _nav_pages(item)
    elif isinstance(items, dict):
        for value in items.values():
            found += _nav_pages(value)
    elif isinstance(items, str):
        found.append(items)
    return found


def test_every_api_page_is_in_the_nav() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    nav = set(_nav_pages(config["nav"]))
    for page in API.glob("*.md"):
        assert f"api/{page.name}" in nav, page.name


def test_the_docs_extra_has_a_signature_formatter() -> None:
    """mkdocstrings formats long signatures with black or ruff, when one is installed."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    docs = extras["optional-dependencies"]["docs"]
    assert any(re.match(r"(ruff|black)\b", requirement) for requirement in docs), docs


MAINTAINER_NOTES = re.compile(
    r"\d[\d,.]* ?(µs|us)\b|\bmeasured\b|\bissue \d+|\b(TODO|FIXME|XXX)\b", re.IGNORECASE
)


def _docstrings(module_name: str) -> list[tuple[str, str]]:
    """The docstrings a page of the module renders: the module's and its public names'."""
    module = importlib.import_module(module_name)
    found = [(module_name, inspect.getdoc(module) or "")]
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name, None)
        if obj is None or inspect.ismodule(obj):
            continue
        found.append((f"{module_name}.{name}", inspect.getdoc(obj) or ""))
        if inspect.isclass(obj):
            for attribute, member in vars(obj).items():
                if not attribute.startswith("_") and callable(member):
                    found.append(
                        (f"{module_name}.{name}.{attribute}", inspect.getdoc(member) or "")
                    )
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a name inside a module, not a module
        return False


@pytest.mark.parametrize("module_name", sorted(t for t in documented() if _is_module(t)))
def test_rendered_docstrings_hold_no_maintainers_notes(module_name: str) -> None:
    notes = [
        f"{where}: {match.group(0)!r}"
        for where, doc in _docstrings(module_name)
        for match in MAINTAINER_NOTES.finditer(doc)
    ]
    assert not notes, notes
