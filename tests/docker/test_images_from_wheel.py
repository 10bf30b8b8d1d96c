"""``openenv-gym images build`` outside a checkout: the image gets the installed distribution.

openenv-gym is built into a wheel, installed into a fresh venv and run from a temporary
directory (no source tree in reach): the wheelhouse must then hold a wheel packed from that
installation (``openenv_gym.images.installed_wheel``), never one fetched from a package index.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from openenv_gym._version import __version__
from openenv_gym.providers.docker import docker_client

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("OPENENV_GYM_TEST_BASE_IMAGE", "local/python-base:bookworm")


def _run(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _contents(wheel: Path) -> dict[str, bytes]:
    """The wheel's files and their bytes, RECORD aside (its order is not part of the wheel)."""
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist() if not n.endswith("/RECORD")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel built from this checkout, a fresh venv with it and the docker extra)."""
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp), str(ROOT)], tmp)
    (wheel,) = tmp.glob("openenv_gym-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp)
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[docker]"], tmp)
    return wheel, venv


def test_installed_wheel_packs_what_the_wheel_installed(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, venv = installed
    out = _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sys; from pathlib import Path; from openenv_gym.images import installed_wheel;"
            " print(installed_wheel(Path(sys.argv[1])))",
            str(tmp_path / "packed"),
        ],
        tmp_path,
    )
    packed = Path(out.strip())
    assert packed.name == wheel.name
    assert _contents(packed) == _contents(wheel)
    # pip accepts it (RECORD hashes and sizes are checked on install)
    target = tmp_path / "target"
    _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-t", str(target), str(packed)],
        tmp_path,
    )
    assert (target / "openenv_gym_servers" / "wordle" / "data" / "valid_words.txt").is_file()


@pytest.mark.docker
def test_images_build_outside_a_checkout_uses_the_installed_distribution(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, venv = installed
    client: Any = docker_client()
    wheelhouse = tmp_path / "wheelhouse"
    out = _run(
        [
            str(venv / "bin" / "openenv-gym"),
            "images",
            "build",
            "echo",
            "--base-image",
            BASE_IMAGE,
            "--wheelhouse",
            str(wheelhouse),
        ],
        tmp_path,
    )
    tag = f"openenv-gym/echo:{__version__}"
    assert out.split() == [tag]
    (ours,) = wheelhouse.glob("openenv_gym-*.whl")
    assert _contents(ours) == _contents(wheel)
    assert client.images.get(tag).labels["openenv-gym.version"] == __version__
    printed = client.containers.run(tag, ["openenv-gym", "--version"], remove=True)
    assert __version__ in printed.decode()
