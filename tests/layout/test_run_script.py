"""The README's first command, ``bash scripts/run``, installs what its example imports.

The docs tests run that command's example in the test venv (which has every extra), so a
package the script forgets to install would only show on a fresh machine: here each
third-party module ``examples/wordle_throughput.py`` imports must come from openenv-gym's
own dependencies, one of the extras the script installs, or a requirement it names.
"""

from __future__ import annotations

import ast
import re
import shlex
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "wordle_throughput.py"
OURS = {"openenv_gym", "openenv_gym_servers"}


def _name(requirement: str) -> str:
    """A requirement's distribution name, as an import name (``tyro>=0.8`` -> ``tyro``)."""
    return re.split(r"[\s;<>=!~\[]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def _installed_by_run() -> set[str]:
    """What ``scripts/run`` pip-installs: our dependencies, the extras it asks for, the rest."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_name(r) for r in project["dependencies"]}
    script = (ROOT / "scripts" / "run").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in script.splitlines() if "pip install" in ln and " -e " in ln]
    words = shlex.split(line)
    for word in words[words.index("-e") + 1 :]:
        if word.startswith(".["):
            for extra in word[2:-1].split(","):
                names |= {_name(r) for r in project["optional-dependencies"][extra]}
        elif not word.startswith("-"):
            names.add(_name(word))
    return names


def _third_party_imports() -> set[str]:
    tree = ast.parse(EXAMPLE.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - OURS - {"__future__"}


def test_the_run_script_installs_every_module_its_example_imports() -> None:
    imported = _third_party_imports()
    assert {"gymnasium", "numpy", "tyro"} <= imported  # the parse sees the example's imports
    missing = imported - _installed_by_run()
    assert not missing, f"scripts/run does not install {sorted(missing)} (README's first command)"
