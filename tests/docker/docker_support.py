"""Helpers of the docker tests (not a test module): the engine's leftovers, official-like images.

The official-like images (``official_like/README.md``) are built once per session on the
local base image, with ``openenv>=0.10,<0.11`` from a host wheelhouse (``pip wheel`` on the
host: nothing is fetched inside a build), and untagged at the end; what they leave is the
cache of derived images, as a user's machine keeps it.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from openenv_gym.providers.docker import LABEL_MANAGED, LABEL_OWNER

BASE_IMAGE = os.environ.get("OPENENV_GYM_TEST_BASE_IMAGE", "local/python-base:bookworm")
ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_LIKE = Path(__file__).parent / "official_like"
OPENENV_REQUIREMENTS = ("openenv>=0.10,<0.11", "uvicorn")
"""What the official-like images install into /app/.venv (from the host wheelhouse)."""
TEST_REPOSITORY = "openenv-gym-test/official"


def ours(client: Any, owner: int | None = None) -> list[Any]:
    """The containers this process (or ``owner``) started and has not removed."""
    label = [f"{LABEL_MANAGED}=1", f"{LABEL_OWNER}={owner or os.getpid()}"]
    return list(client.containers.list(all=True, filters={"label": label}))


# ------------------------------------------------------------------ official-like images


def _wheelhouse() -> Path:
    """``pip wheel`` of openenv and uvicorn on the host, kept under build/ between sessions."""
    wheels = ROOT / "build" / "wheelhouse-official"
    stamp = wheels / ".complete"
    wanted = "\n".join(OPENENV_REQUIREMENTS) + "\n"
    if stamp.is_file() and stamp.read_text("utf-8") == wanted:
        return wheels
    wheels.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
    result = subprocess.run(
        [*command, "--wheel-dir", str(wheels), *OPENENV_REQUIREMENTS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"pip wheel failed:\n{result.stdout}\n{result.stderr}"
    stamp.write_text(wanted, "utf-8")
    return wheels


def _build(client: Any, tag: str, dockerfile: str, files: dict[str, Path], **args: str) -> str:
    """``docker build`` of ``official_like/<dockerfile>`` with ``files`` as its context."""
    started = time.monotonic()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(OFFICIAL_LIKE / dockerfile), arcname="Dockerfile")
        for name, path in files.items():
            tar.add(str(path), arcname=name, filter=_no_caches)
    buffer.seek(0)
    client.images.build(
        fileobj=buffer,
        custom_context=True,
        tag=tag,
        buildargs=args,
        rm=True,
        forcerm=True,
        network_mode="none",
    )
    print(f"built {tag} in {time.monotonic() - started:.1f} s")
    return tag


def _no_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name.split("/") else info


class OfficialImages:
    """Builds each official-like image on first use; untags them all at the end."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.built: dict[str, str] = {}
        self.started = time.time()

    def _venv(self) -> str:
        if "venv" not in self.built:
            tag = f"{TEST_REPOSITORY}-venv:latest"
            wheels = {"wheels": _wheelhouse()}
            self.built["venv"] = _build(
                self.client, tag, "venv.Dockerfile", wheels, BASE_IMAGE=BASE_IMAGE
            )
        return self.built["venv"]

    def get(self, name: str) -> str:
        """The image ``echo``, ``textarena``, ``grid`` or ``script`` (built once)."""
        if name in self.built:
            return self.built[name]
        tag = f"{TEST_REPOSITORY}-{name}:latest"
        venv = {"VENV_IMAGE": self._venv()}
        if name in ("echo", "textarena"):
            env_dir = f"{name}_env"
            files = {env_dir: OFFICIAL_LIKE / env_dir}
            _build(self.client, tag, "env.Dockerfile", files, ENV_DIR=env_dir, **venv)
        elif name == "grid":
            _build(self.client, tag, "grid.Dockerfile", {"envs": OFFICIAL_LIKE / "envs"}, **venv)
        elif name == "script":
            files = {"echo_env": OFFICIAL_LIKE / "echo_env"}
            _build(self.client, tag, "script.Dockerfile", files, **venv)
        elif name == "scratch":  # no Python at all
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as tar:
                text = b"FROM scratch\nCOPY README.md /README.md\n"
                text += b'CMD ["uvicorn", "server.app:app"]\n'  # a command, no Python
                info = tarfile.TarInfo("Dockerfile")
                info.size = len(text)
                tar.addfile(info, io.BytesIO(text))
                tar.add(str(OFFICIAL_LIKE / "README.md"), arcname="README.md")
            buffer.seek(0)
            self.client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True)
        else:
            raise KeyError(name)
        self.built[name] = tag
        return tag

    def close(self) -> None:
        """Untag the test images (derived images keep the layers they were built on)."""
        for tag in self.built.values():
            try:
                self.client.images.remove(tag)
            except Exception as exc:  # still in use by a container: leave it
                print(f"could not untag {tag}: {exc}")
