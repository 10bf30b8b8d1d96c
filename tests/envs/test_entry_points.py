"""Environments register by entry points (group ``openenv_gym.envs``): ``pip install`` is all.

A tiny third-party package, built here from the toy counter's code, declares its record as
an entry point and is installed with pip into a fresh venv (which sees this one's packages:
openenv-gym and its dependencies, not the tiny package). There, without any call to
openenv-gym, its id is made with ``gymnasium.make`` (against a local ``openenv-gym serve``
process, which finds it by name too), the CLI lists it and ``serve`` serves it; a second
entry of it that takes the name of a shipped environment is left out with a warning.
:func:`openenv_gym.envs.records_from` is tested on real entry points as well: what is loaded,
and what is left out with a warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import textwrap
import urllib.request
import venv
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

import pytest
import toy_env

from openenv_gym import envs
from openenv_gym.envs import ENTRY_POINTS, records_from

HERE = Path(__file__).resolve().parent
NAME = "tiny_counter"
ID = "tiny/Counter-v0"

PYPROJECT = f"""\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-counter-env"
version = "0.1"

[project.entry-points."{ENTRY_POINTS}"]
{NAME} = "tiny_counter_env.record:RECORD"
echo = "tiny_counter_env.record:ECHO"

[tool.setuptools]
packages = ["tiny_counter_env"]
"""

RECORD = f"""\
from openenv_gym import EnvRecord

RECORD = EnvRecord(
    name="{NAME}",
    env_id="{ID}",
    server="tiny_counter_env.server:CounterEnvironment",
    codec="tiny_counter_env.gym:codec",
    text_interface="tiny_counter_env.gym:text_interface",
    max_episode_steps=20,
    description="a counter: add 0, 1 or 2; done at 5",
)

# a name openenv-gym's own Echo has: left out, with a warning
ECHO = EnvRecord(name="echo", env_id="tiny/Echo-v0", server="x:Y", codec="x:codec")
"""


def _entry(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=ENTRY_POINTS)


# ------------------------------------------------------------------ records_from


def test_an_entry_names_a_record_or_a_function_making_one() -> None:
    found = records_from(
        [
            _entry("toy_counter", "toy_env:RECORD"),
            _entry("echo", "openenv_gym_servers.echo.record:record"),
        ]
    )
    assert list(found) == ["toy_counter", "echo"]
    assert found["toy_counter"] is toy_env.RECORD
    assert found["echo"] == envs.environment("echo")


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        ([_entry("toy_counter", "no_such_module_here:RECORD")], "ModuleNotFoundError"),
        ([_entry("toy_counter", "toy_env:NO_SUCH_NAME")], "AttributeError"),
        ([_entry("other", "toy_env:RECORD")], "names the record 'toy_counter'"),
        ([_entry("toy_counter", "toy_env.gym:codec")], "not an EnvRecord"),
        (
            [_entry("echo", "openenv_gym_servers.echo.record:record")] * 2,
            "'echo' is registered already",
        ),
    ],
)
def test_an_entry_that_does_not_fit_is_left_out_with_a_warning(
    entries: list[metadata.EntryPoint], why: str
) -> None:
    with pytest.warns(RuntimeWarning, match=f"leaves out an environment: .*{why}"):
        found = records_from(entries)
    assert len(found) == len(entries) - 1


def test_an_id_taken_first_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "clashing_env.py").write_text(
        "from openenv_gym import EnvRecord\n"
        "A = EnvRecord(name='a_env', env_id='x/Same-v0', server='m:C', codec='m:c')\n"
        "B = EnvRecord(name='b_env', env_id='x/Same-v0', server='m:C', codec='m:c')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning, match="'x/Same-v0' is the id of 'a_env'"):
        found = records_from([_entry("a_env", "clashing_env:A"), _entry("b_env", "clashing_env:B")])
    assert list(found) == ["a_env"]


def test_openenv_gyms_own_come_first_and_their_absence_is_reported() -> None:
    entries = metadata.entry_points(group=ENTRY_POINTS)
    toy = _entry("toy_counter", "toy_env:RECORD")  # no distribution: not ours
    shipped, others = envs.installed([toy, *entries])
    assert list(shipped) == ["wordle", "echo", "catch"]  # by rank
    assert others == {"toy_counter": toy_env.RECORD}
    with pytest.warns(RuntimeWarning, match="declares no 'openenv_gym.envs' entry point"):
        assert envs.installed([toy]) == ({}, {"toy_counter": toy_env.RECORD})


# ------------------------------------------------------------------ pip install, fresh venv


def _tiny_package(root: Path) -> Path:
    """The toy counter as an installable package registering ``tiny_counter``."""
    package = root / "tiny_counter_env"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text('"""A tiny third-party environment."""\n')
    (package / "record.py").write_text(RECORD)
    for module in ("server.py", "gym.py"):
        code = (HERE / "toy_env" / module).read_text()
        (package / module).write_text(code.replace("toy_counter", NAME))
    return root


def _fresh_venv(where: Path) -> str:
    """A venv without pip of its own that also sees this interpreter's site-packages."""
    venv.create(where, with_pip=False)
    python = str(where / "bin" / "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    ours = sysconfig.get_paths()["purelib"]  # with the .pth files of editable installs
    (Path(site) / "_openenv_gym_test.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


def _run(python: str, *args: str, cwd: Path) -> str:
    done = subprocess.run(
        [python, *args], capture_output=True, text=True, cwd=cwd, timeout=120, env=_ENV
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

_MAKE = f"""
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import gymnasium, openenv_gym
print([str(w.message).split(": ", 1)[1] for w in caught if w.category is RuntimeWarning])
print(openenv_gym.envs.environment("echo").env_id, "tiny/Echo-v0" in gymnasium.registry)
env = gymnasium.make("{ID}")  # the local provider starts `openenv-gym serve {NAME}`
obs, _ = env.reset(seed=4)
after, reward, terminated, truncated, _ = env.step(2)
print(obs.tolist(), after.tolist(), reward, terminated, env.spec.max_episode_steps)
env.close()
"""


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pip_install_is_all_it_takes(tmp_path: Path) -> None:
    source = _tiny_package(tmp_path / "src")
    python = _fresh_venv(tmp_path / "venv")
    work = tmp_path / "work"  # no package in the working directory
    work.mkdir()
    _run(
        python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
        "--disable-pip-version-check", str(source), cwd=work,
    )  # fmt: skip
    assert find_spec("tiny_counter_env") is None  # installed in the fresh venv only

    out = _run(python, "-c", textwrap.dedent(_MAKE), cwd=work).split("\n")
    assert out[0] == str(
        ["entry point 'echo' (tiny_counter_env.record:ECHO) of group 'openenv_gym.envs': "
         "'echo' is registered already"]
    )  # fmt: skip
    assert out[1:3] == ["openenv/Echo-v0 False", "[1] [3] 2.0 False 20"]

    rows = json.loads(_run(python, "-m", "openenv_gym", "envs", "--json", cwd=work))
    (row,) = [r for r in rows if r["id"] == ID]
    assert (row["server"], row["action"]) == (NAME, "Discrete(3)")

    served = subprocess.Popen(
        [python, "-m", "openenv_gym", "serve", NAME, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=work, env=_ENV,
    )  # fmt: skip
    try:
        url = served.stdout.readline().strip() if served.stdout else ""
        assert url.startswith("http://127.0.0.1:"), served.stderr.read() if served.stderr else ""
        with urllib.request.urlopen(f"{url}/health", timeout=30) as reply:
            assert json.load(reply)["status"] == "healthy"
        with urllib.request.urlopen(f"{url}/schema", timeout=30) as reply:
            assert "amount" in json.load(reply)["action"]["properties"]
    finally:
        served.kill()
        served.communicate(timeout=30)
