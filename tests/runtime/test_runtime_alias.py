"""``openenv_gym.server`` (the runtime's old name) still imports, warns, and is the same code."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # a fresh interpreter: the alias warns once, at its first import
    return subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_old_name_warns_that_it_is_deprecated() -> None:
    done = _run("import openenv_gym.server")
    assert done.returncode != 0
    assert "openenv_gym.server is deprecated: import openenv_gym.runtime" in done.stderr


def test_old_submodules_are_the_runtime_modules_with_their_own_spec() -> None:
    done = _run(
        "import warnings; warnings.simplefilter('ignore')\n"
        "import openenv_gym.runtime.environment as new\n"
        "spec = new.__spec__\n"
        "import openenv_gym.server.environment as old\n"
        "from openenv_gym.server.loader import load_env\n"
        "from openenv_gym.runtime.loader import load_env as load_env_new\n"
        "from openenv_gym.server import environment\n"
        "assert old is new and environment is new, (old, new)\n"
        "assert new.__spec__ is spec and new.__spec__.name == 'openenv_gym.runtime.environment'\n"
        "assert load_env is load_env_new\n"
        "print('ok')"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_model_imported_by_the_old_name_pickles_as_the_new_one() -> None:
    sys.modules.pop("openenv_gym.server", None)
    with pytest.warns(DeprecationWarning, match="import openenv_gym.runtime instead"):
        importlib.import_module("openenv_gym.server")
    from openenv_gym.runtime.environment import Observation as New
    from openenv_gym.server.environment import Observation

    assert Observation is New
    assert type(pickle.loads(pickle.dumps(Observation()))) is New


def test_an_unknown_old_submodule_fails_like_any_missing_module() -> None:
    done = _run("import warnings; warnings.simplefilter('ignore')\nimport openenv_gym.server.nope")
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr
    assert "openenv_gym.runtime.nope" in done.stderr
