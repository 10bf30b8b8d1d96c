"""Reading an image's Python by running it once: version, platform, uvicorn's interpreter.

:func:`probe` runs :data:`PROBE` with the image's own Python (no network, read-only root, no
capabilities), following the interpreter of the image's ``uvicorn`` script when it is
another one (a virtual environment), and returns :class:`ImageFacts`: what wheels that Python
takes (:meth:`ImageFacts.target`) and the ``app:`` of the server directory's
``openenv.yaml``. :func:`run_once` is the one-off container both this and the derived image's
check run use.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openenv_gym.exceptions import ProviderError, UnsupportedImageError
from openenv_gym.providers.engine import container_labels
from openenv_gym.providers.image_command import ServedApp
from openenv_gym.providers.wheels import TargetPython, requires_python

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

__all__ = ["HARDENED", "PROBE", "ImageFacts", "probe", "run_once"]

HARDENED: dict[str, Any] = {
    "network_disabled": True,
    "read_only": True,
    "tmpfs": {"/tmp": "rw,nosuid,nodev,size=64m"},
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges"],
    "mem_limit": "1g",
}
"""How a one-off container runs: no network, read-only, no capabilities."""

# Runs in the image (its Python, any 3.x): how it would choose wheels, which interpreter
# runs uvicorn (followed once), and the app the directory's openenv.yaml names.
PROBE = r"""
import json, os, platform, re, shutil, sys, sysconfig
def shebang(path):
    try:
        with open(path, "rb") as f:
            lines = f.read(1024).decode("utf-8", "replace").splitlines()
    except Exception:
        return None
    if not lines or not lines[0].startswith("#!"):
        return None
    words = lines[0][2:].split()
    if words and "python" in os.path.basename(words[0]):
        return words[0]
    if len(words) > 1 and os.path.basename(words[0]) == "env" and "python" in words[1]:
        return shutil.which(words[1])
    for line in lines[1:4]:
        if line.startswith("'''exec' "):
            return line.split()[1]
    return None
uvicorn = shutil.which("uvicorn")
runner = shebang(uvicorn) if uvicorn else None
if runner and os.path.abspath(runner) != os.path.abspath(sys.executable) \
        and not os.environ.get("OPENENV_GYM_PROBED") and os.access(runner, os.X_OK):
    os.environ["OPENENV_GYM_PROBED"] = "1"
    os.execv(runner, [runner, "-c", sys.argv[1], sys.argv[1]])
libc, libc_version = platform.libc_ver()
if not libc:
    for name in os.listdir("/lib") if os.path.isdir("/lib") else []:
        if name.startswith("ld-musl-"):
            libc = "musl"
            try:
                import subprocess
                out = subprocess.run(["/lib/" + name], capture_output=True, text=True).stderr
                libc_version = re.search(r"Version (\d+\.\d+)", out).group(1)
            except Exception:
                libc_version = "1.1"
app = None
try:
    with open("openenv.yaml") as f:
        for line in f:
            found = re.match(r"\s*app\s*:\s*['\"]?([\w.]+:[\w.]+)", line)
            if found:
                app = found.group(1)
except OSError:
    pass
versions = {}
try:
    from importlib import metadata
    for name in ("openenv", "openenv-core", "openenv-gym", "uvicorn"):
        try:
            versions[name] = metadata.version(name)
        except Exception:
            pass
except ImportError:
    pass
print(json.dumps({
    "python": sys.executable, "version": list(sys.version_info[:3]),
    "implementation": sys.implementation.name, "machine": platform.machine(),
    "libc": libc, "libc_version": libc_version, "uvicorn": uvicorn, "app": app,
    "cwd": os.getcwd(), "uid": os.getuid(), "versions": versions,
}))
"""


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """An image's Python, read by running it once (:data:`PROBE`).

    Attributes:
        python: The interpreter that serves the app (uvicorn's), an absolute path.
        version: ``sys.version_info[:3]``.
        implementation: ``cpython``, ``pypy``...
        machine: ``x86_64``, ``aarch64``...
        libc: ``glibc`` or ``musl`` ("" if unknown).
        libc_version: e.g. ``2.36``.
        app: The ``app:`` of ``openenv.yaml`` in the server's directory, if there is one.
        versions: Installed versions of ``openenv``, ``openenv-core``, ``uvicorn``.
    """

    python: str
    version: tuple[int, int, int]
    implementation: str
    machine: str
    libc: str
    libc_version: str
    app: str | None
    versions: Mapping[str, str]

    @classmethod
    def from_probe(cls, data: Mapping[str, Any]) -> ImageFacts:
        """From the probe's JSON line."""
        major, minor, micro = (int(v) for v in data["version"][:3])
        return cls(
            str(data["python"]),
            (major, minor, micro),
            str(data["implementation"]),
            str(data["machine"]),
            str(data.get("libc") or ""),
            str(data.get("libc_version") or ""),
            data.get("app") or None,
            dict(data.get("versions") or {}),
        )

    def target(self) -> TargetPython:
        """The wheel target of this Python.

        Raises:
            UnsupportedImageError: Not CPython, older than openenv-gym needs, or a libc we
                know no wheel tags for.
        """
        version = f"{self.version[0]}.{self.version[1]}"
        if self.implementation != "cpython":
            raise UnsupportedImageError(f"its Python ({self.python}) is {self.implementation}")
        oldest = requires_python()
        if self.version[:2] < oldest:
            raise UnsupportedImageError(
                f"its Python ({self.python}) is {version}; openenv-gym needs "
                f">= {oldest[0]}.{oldest[1]}"
            )
        found = re.match(r"(\d+)\.(\d+)", self.libc_version)
        if self.libc not in ("glibc", "musl") or found is None:
            raise UnsupportedImageError(
                f"its Python ({self.python}) runs on a C library we have no wheels for "
                f"({self.libc or 'unknown'} {self.libc_version})"
            )
        return TargetPython(
            self.version[:2],
            self.implementation,
            self.machine,
            self.libc,
            (int(found.group(1)), int(found.group(2))),
        )


def probe(client: docker.DockerClient, image: Image, served: ServedApp) -> ImageFacts:
    """Run the image's Python once (no network, read-only) and read :class:`ImageFacts`.

    Raises:
        UnsupportedImageError: No Python, or one that cannot run the probe.
    """
    candidates = [served.python] if served.python else ["python3", "python"]
    failures: list[str] = []
    for python in candidates:
        status, output = run_once(
            client, image.id, [python, "-c", PROBE, PROBE], served.workdir, timeout=60.0
        )
        if status is None:
            failures.append(output)
            continue
        for line in reversed(output.splitlines()):
            if line.startswith("{"):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    return ImageFacts.from_probe(json.loads(line))
        raise UnsupportedImageError(
            f"its {python} could not report its version and platform "
            f"(exit {status}): {output.strip()[-300:]}"
        )
    raise UnsupportedImageError(
        f"no Python in the image (tried {', '.join(candidates)} on its PATH: "
        f"{'; '.join(f[-120:] for f in failures)})"
    )


def run_once(
    client: docker.DockerClient,
    image: str,
    entrypoint: list[str],
    workdir: str,
    *,
    timeout: float,
) -> tuple[int | None, str]:
    """Run ``entrypoint`` in ``image`` to its end.

    Returns:
        The exit status (None: it could not start) and the output.
    """
    import docker

    container = None
    try:
        container = client.containers.create(
            image,
            entrypoint=entrypoint,
            command=[],
            working_dir=workdir or None,
            labels=container_labels(),
            **HARDENED,
        )
        try:
            container.start()
        except docker.errors.APIError as exc:
            return None, str(getattr(exc, "explanation", None) or exc)
        result = container.wait(timeout=timeout)
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return int(result.get("StatusCode", 1)), output
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot run {image[:19]} once: {exc}") from exc
    except Exception as exc:  # requests' ReadTimeout from wait(): it did not finish
        raise ProviderError(f"running {image[:19]} once did not finish: {exc}") from exc
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)
