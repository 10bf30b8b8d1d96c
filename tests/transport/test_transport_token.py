"""One place decides the default bearer token: ``config.resolve_token`` (issue 24).

Every caller -- the clients' headers, the providers, ``openenv-gym serve`` -- asks it, and
``OPENENV_GYM_TOKEN`` is read nowhere else in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from openenv_gym._http import with_token
from openenv_gym.config import resolve_token
from openenv_gym.providers.local import LocalProvider
from openenv_gym.runtime.settings import ServerConfig

PACKAGE = Path(__file__).resolve().parents[2] / "openenv_gym"
VAR = "OPENENV_GYM_TOKEN"


def _reads_of_the_variable(tree: ast.AST) -> list[int]:
    """Lines where ``VAR`` is read from the environment (env_str, os.environ, getenv)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            key, what = node.args[0], ast.unparse(node.func)
            readers = ("env_str", "os.getenv", "getenv", "os.environ.get", "environ.get")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key, what = node.slice, ast.unparse(node.value)
            readers = ("os.environ", "environ")
        else:
            continue
        if isinstance(key, ast.Constant) and key.value == VAR and what in readers:
            lines.append(node.lineno)
    return lines


def test_the_variable_is_read_in_one_place_only() -> None:
    reads = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if (found := _reads_of_the_variable(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert list(reads) == ["config.py"], reads
    assert len(reads["config.py"]) == 1


def test_the_scan_finds_each_way_of_reading_it() -> None:
    source = (
        f"env_str({VAR!r})\nos.environ.get({VAR!r})\nos.getenv({VAR!r})\n"
        f"os.environ[{VAR!r}]\nenv[{VAR!r}] = 'x'\nself.environment.get({VAR!r})\n"
    )
    assert _reads_of_the_variable(ast.parse(source)) == [1, 2, 3, 4]


def test_a_given_token_wins_then_the_variable_then_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VAR, raising=False)
    assert resolve_token() is None
    assert resolve_token("given") == "given"
    monkeypatch.setenv(VAR, "from-env")
    assert resolve_token() == "from-env"
    assert resolve_token("given") == "given"
    assert resolve_token("") == "from-env"  # empty means none given, as an empty variable
    monkeypatch.setenv(VAR, "")
    assert resolve_token() is None


def test_every_caller_takes_its_default_from_the_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, "shared-secret")
    assert with_token(None, None) == {"Authorization": "Bearer shared-secret"}
    assert with_token({"authorization": "Bearer mine"}, None) == {"authorization": "Bearer mine"}
    provider = LocalProvider("echo", num_servers=2)
    try:
        assert [provider.token(0), provider.token(1)] == ["shared-secret"] * 2
    finally:
        provider.close()
    assert ServerConfig.from_env().token == "shared-secret"
    monkeypatch.delenv(VAR)
    provider = LocalProvider("echo", num_servers=2)
    try:
        fresh = [provider.token(0), provider.token(1)]
    finally:
        provider.close()
    assert all(fresh)
    assert fresh[0] != fresh[1]  # none set: a fresh one per server
    assert ServerConfig.from_env().token is None
