"""Wheelhouses: the packages a Docker build installs, built on the host.

A ``docker build`` here never reaches a package index: everything it installs comes from a
wheelhouse made on the host. For our own images that is ``pip wheel`` of openenv-gym and its
dependencies (:func:`build_wheelhouse`); for an image derived from an official OpenEnv image
(:mod:`openenv_gym.providers.derive`) it is our wheel plus the dependencies' wheels for *that
image's* Python and platform (:func:`target_wheelhouse`), which can differ from the host's.

openenv-gym's own wheel is built from this checkout when openenv-gym is installed from one
(``pip install -e .``), else packed from the installed distribution itself
(:func:`installed_wheel`), so an image runs the code that built it, never a release fetched
from an index.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from openenv_gym._version import __version__
from openenv_gym.config import env_str
from openenv_gym.exceptions import ProviderError

__all__ = [
    "TargetPython",
    "build_wheelhouse",
    "cache_dir",
    "fingerprint",
    "installed_wheel",
    "own_wheel",
    "requirements",
    "requires_python",
    "run_logged",
    "source_dir",
    "target_wheelhouse",
]

logger = logging.getLogger("openenv_gym.images")


def source_dir() -> Path | None:
    """The source tree of this checkout (an editable install), if there is one."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "openenv-gym"' in pyproject.read_text("utf-8"):
        return root
    return None


# written by the installer, not part of the wheel (RECORD is written anew)
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"})


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode('ascii')}"


def installed_wheel(directory: Path) -> Path:
    """Pack the installed openenv-gym distribution into a wheel in ``directory``.

    The wheel holds the files its ``RECORD`` lists under site-packages (the packages and the
    ``.dist-info`` metadata, which carries the entry points): console scripts and byte code
    are left out, as are the installer's own files (``INSTALLER``, ``REQUESTED``,
    ``direct_url.json``); ``RECORD`` is written anew.

    Returns:
        The wheel, e.g. ``directory/openenv_gym-0.1.0-py3-none-any.whl``.

    Raises:
        ProviderError: openenv-gym is not installed as a distribution (no ``RECORD``), or a
            file it lists is missing.
    """
    try:
        dist = metadata.distribution("openenv-gym")
    except metadata.PackageNotFoundError as exc:
        raise ProviderError(
            "openenv-gym is not installed as a distribution: pass a source tree or a wheel"
        ) from exc
    files = dist.files
    wheel_meta = dist.read_text("WHEEL")
    if not files or wheel_meta is None:
        raise ProviderError("the installed openenv-gym has no RECORD or WHEEL to pack a wheel from")
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")
    ]
    name = f"openenv_gym-{dist.version}-{tags[0] if tags else 'py3-none-any'}.whl"
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    record: list[str] = []
    dist_info = ""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for file in sorted(files, key=str):
            parts = file.parts
            if parts[0] == ".." or "__pycache__" in parts or file.suffix == ".pyc":
                continue
            if parts[0].endswith(".dist-info"):
                dist_info = parts[0]
                if file.name in _INSTALLER_FILES:
                    continue
            path = Path(str(dist.locate_file(file)))
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ProviderError(f"cannot pack the installed openenv-gym: {exc}") from exc
            arcname = "/".join(parts)
            wheel.writestr(arcname, data)
            record.append(f"{arcname},{_record_hash(data)},{len(data)}")
        if not dist_info:
            raise ProviderError("the installed openenv-gym lists no .dist-info directory")
        record.append(f"{dist_info}/RECORD,,")
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return target


def build_wheelhouse(
    wheelhouse: Path, *, source: str | None = None, extra: Sequence[str] = ()
) -> Path:
    """``pip wheel`` openenv-gym and its dependencies into ``wheelhouse``.

    Args:
        wheelhouse: The directory to fill (created if missing).
        source: What to build: a source tree, a wheel or a requirement (default: this
            checkout if installed from one, else a wheel packed from the installed
            distribution, :func:`installed_wheel`).
        extra: More requirements to put in the wheelhouse.

    Raises:
        ProviderError: pip failed, or the installed distribution could not be packed.
    """
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="openenv-gym-wheel-") as packed:
        if source is None:
            tree = source_dir()
            source = str(tree) if tree is not None else str(installed_wheel(Path(packed)))
        command = [
            sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check",
            "--wheel-dir", str(wheelhouse), source, *extra,
        ]  # fmt: skip
        logger.info("building the wheelhouse: %s", " ".join(command))
        status, tail = run_logged(command, "pip")
    if status != 0:
        raise ProviderError(f"pip wheel failed ({status}):\n{tail}")
    return wheelhouse


def run_logged(command: list[str], prefix: str) -> tuple[int, str]:
    """Run ``command``, logging each line of its output at INFO as it comes.

    Returns:
        The exit status and the last 40 lines of output (for an error message).
    """
    tail: collections.deque[str] = collections.deque(maxlen=40)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            if line:
                tail.append(line)
                logger.info("%s: %s", prefix, line)
    return process.returncode, "\n".join(tail)


def cache_dir() -> Path:
    """Where wheelhouses for derived images are kept (``OPENENV_GYM_CACHE_DIR``).

    Default ``$XDG_CACHE_HOME/openenv-gym``, else ``~/.cache/openenv-gym``.
    """
    configured = env_str("OPENENV_GYM_CACHE_DIR")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "openenv-gym"


_FINGERPRINTED = ("openenv_gym", "servers")


@functools.cache
def fingerprint() -> str:
    """What identifies the openenv-gym an image would get.

    Its version, and for a source tree a digest of the files that go into the wheel too, so
    a derived image built from an older checkout of the same version is not reused.
    """
    tree = source_dir()
    if tree is None:
        return __version__
    digest = hashlib.sha256()
    files = [tree / "pyproject.toml", tree / "setup.py"]
    for package in _FINGERPRINTED:
        files.extend(p for p in (tree / package).rglob("*") if p.is_file())
    for path in sorted(files):
        parts = path.relative_to(tree).parts
        if "__pycache__" in parts or path.suffix == ".pyc" or not path.is_file():
            continue
        digest.update("/".join(parts).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:12]}"


def own_wheel(cache: Path | None = None) -> Path:
    """openenv-gym's own wheel (built once per :func:`fingerprint`, kept in the cache).

    Raises:
        ProviderError: pip could not build it, or the installed distribution not be packed.
    """
    directory = (cache or cache_dir()) / "wheels" / fingerprint()
    found = sorted(directory.glob("openenv_gym-*.whl"))
    if found:
        return found[-1]
    directory.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=directory.parent))
    try:
        tree = source_dir()
        if tree is None:
            installed_wheel(work)
        else:
            command = [
                sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--no-deps",
                "--wheel-dir", str(work), str(tree),
            ]  # fmt: skip
            status, tail = run_logged(command, "pip")
            if status != 0:
                raise ProviderError(f"pip wheel of {tree} failed ({status}):\n{tail}")
        _publish(work, directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sorted(directory.glob("openenv_gym-*.whl"))[-1]


def _publish(work: Path, directory: Path) -> None:
    """Move a finished ``work`` directory to ``directory`` (another process may have won)."""
    try:
        os.replace(work, directory)
    except OSError:
        if not directory.is_dir():
            raise


@dataclass(frozen=True, slots=True)
class TargetPython:
    """The Python of an image, as far as choosing wheels for it goes.

    Attributes:
        version: ``(major, minor)``.
        implementation: ``sys.implementation.name`` (wheels are chosen for ``cpython``).
        machine: ``platform.machine()``, e.g. ``x86_64``, ``aarch64``.
        libc: ``glibc`` or ``musl``.
        libc_version: e.g. ``(2, 36)``.
    """

    version: tuple[int, int]
    implementation: str
    machine: str
    libc: str
    libc_version: tuple[int, int]

    @property
    def tag(self) -> str:
        """``cp311-glibc_2_36-x86_64``: names the wheelhouse of this target."""
        major, minor = self.libc_version
        return f"cp{self.version[0]}{self.version[1]}-{self.libc}_{major}_{minor}-{self.machine}"

    def platforms(self) -> list[str]:
        """The wheel platform tags this Python accepts, newest first (PEP 600 / 656).

        >>> TargetPython((3, 11), "cpython", "x86_64", "glibc", (2, 18)).platforms()[:3]
        ['manylinux_2_18_x86_64', 'manylinux_2_17_x86_64', 'manylinux2014_x86_64']
        """
        major, minor = self.libc_version
        if self.libc == "musl":
            return [f"musllinux_{major}_{m}_{self.machine}" for m in range(minor, -1, -1)]
        tags: list[str] = []
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        for m in range(minor, 4, -1):
            tags.append(f"manylinux_{major}_{m}_{self.machine}")
            if major == 2 and m in legacy:
                tags.append(f"{legacy[m]}_{self.machine}")
        tags.append(f"linux_{self.machine}")
        return tags


def requirements() -> list[str]:
    """openenv-gym's own requirements (no extras), as pip takes them."""
    try:
        required = metadata.requires("openenv-gym") or []
    except metadata.PackageNotFoundError as exc:
        raise ProviderError("openenv-gym is not installed as a distribution") from exc
    return sorted(r for r in required if not re.search(r"\bextra\s*==", r))


def requires_python() -> tuple[int, int]:
    """The oldest Python openenv-gym supports, from its ``Requires-Python`` (``>=3.11``)."""
    with contextlib.suppress(metadata.PackageNotFoundError):
        spec = " ".join(metadata.metadata("openenv-gym").get_all("Requires-Python") or ())
        found = re.search(r">=\s*(\d+)\.(\d+)", spec)
        if found:
            return int(found.group(1)), int(found.group(2))
    return (3, 11)


def target_wheelhouse(target: TargetPython, cache: Path | None = None) -> Path:
    """A wheelhouse of openenv-gym's dependencies, and pip, for the Python ``target``.

    ``pip download --only-binary=:all:`` on the host, for the target's version, ABI and
    platform tags; kept in the cache by target and requirements, so a second image with the
    same Python reuses it. openenv-gym's own wheel is :func:`own_wheel` (pure Python).

    Raises:
        ProviderError: pip found no wheels for that target (or could not reach an index).
    """
    wanted = [*requirements(), "pip"]
    key = hashlib.sha256("\n".join([target.tag, *wanted]).encode()).hexdigest()[:12]
    root = (cache or cache_dir()) / "wheelhouses"
    directory = root / f"{target.tag}-{key}"
    if (directory / ".complete").is_file():
        return directory
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".download-", dir=root))
    try:
        version = f"{target.version[0]}{target.version[1]}"
        command = [
            sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
            "--only-binary=:all:", "--dest", str(work),
            "--python-version", f"{target.version[0]}.{target.version[1]}",
            "--implementation", "cp", "--abi", f"cp{version}", "--abi", "abi3", "--abi", "none",
        ]  # fmt: skip
        for platform_tag in target.platforms():
            command += ["--platform", platform_tag]
        logger.info("downloading wheels for %s: %s", target.tag, " ".join(wanted))
        status, tail = run_logged([*command, *wanted], "pip")
        if status != 0:
            raise ProviderError(
                f"no wheels of openenv-gym's dependencies for CPython "
                f"{target.version[0]}.{target.version[1]} on {target.platforms()[0]}: "
                f"pip download failed ({status}):\n{tail}"
            )
        (work / ".complete").write_text(" ".join(wanted) + "\n", "utf-8")
        _publish(work, directory)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return directory
