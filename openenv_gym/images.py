"""``openenv-gym images build``: the wheelhouse and the Docker images of our servers.

The wheelhouse (``pip wheel`` of the project and its dependencies, on the host) is the only
source of packages inside ``docker build``, which never reaches a package index. Its
openenv-gym wheel is built from this checkout when openenv-gym is installed from one (``pip
install -e .``), else packed from the installed distribution itself (:func:`installed_wheel`),
so the image runs the version that built it, never one fetched from an index. The image
is ``servers/Dockerfile`` (shipped as ``openenv_gym_servers/Dockerfile``) built once per
server with ``--build-arg SERVER=NAME``, tagged :func:`~openenv_gym.providers.docker.image_name`.

What is built for an environment is its :class:`ImageRecipe` (:func:`image_recipe`): the
shipped environments (their :class:`~openenv_gym.envs.EnvRecord` says ``image=True``) use
the Dockerfile as it is; any other environment (installed, or added with
:func:`openenv_gym.register_environment`) gets its package's source copied into the image
too, and the image serves its ``module:Class``.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import importlib
import io
import logging
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_gym import envs
from openenv_gym._version import __version__
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.docker import docker_client, image_name

if TYPE_CHECKING:
    import docker

__all__ = [
    "SERVERS",
    "ImageRecipe",
    "build_context",
    "build_images",
    "build_wheelhouse",
    "image_recipe",
    "installed_wheel",
]

logger = logging.getLogger("openenv_gym.images")

SERVERS: tuple[str, ...] = tuple(
    name for name in envs.builtin_names() if envs.environments()[name].image
)
"""The servers an image is built for by default: the shipped environments'."""

_SOURCES = "envs"
"""Where an added environment's package goes in the build context and the image."""


@dataclass(frozen=True)
class ImageRecipe:
    """How the image of one environment is built.

    Attributes:
        name: The environment (``openenv-gym serve NAME``).
        tag: The image, :func:`~openenv_gym.providers.docker.image_name` of ``name``.
        dockerfile: The Dockerfile: ``openenv_gym_servers/Dockerfile``, followed for an
            added environment by the lines that copy its package in and serve it.
        buildargs: ``--build-arg`` values (``SERVER``, ``BASE_IMAGE``).
        labels: The image's labels.
        sources: Directories to put in the build context, by their path in it (an added
            environment's package under ``envs/``).
    """

    name: str
    tag: str
    dockerfile: bytes
    buildargs: Mapping[str, str]
    labels: Mapping[str, str]
    sources: Mapping[str, Path] = field(default_factory=dict)


def _package_dir(target: str) -> Path:
    """The directory of the top-level package (or module) of ``module:Class``."""
    top = target.partition(":")[0].partition(".")[0]
    try:
        module = importlib.import_module(top)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {top!r} to copy it into the image: {exc}") from exc
    file = getattr(module, "__file__", None)
    if file is None:
        raise ConfigurationError(f"{top!r} is not a package with files to copy into the image")
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path


def image_recipe(name: str, *, base_image: str | None = None) -> ImageRecipe:
    """The recipe of the image of environment ``name`` (no Docker needed).

    Raises:
        ConfigurationError: No such environment, or one without an image.
    """
    record = envs.environment(name)
    if record is None or not record.image:
        known = [n for n, r in envs.environments().items() if r.image]
        raise ConfigurationError(f"no image for {[name]}: choose from {', '.join(known)}")
    dockerfile = (resources.files("openenv_gym_servers") / "Dockerfile").read_bytes()
    buildargs = {"SERVER": record.name}
    if base_image:
        buildargs["BASE_IMAGE"] = base_image
    sources: dict[str, Path] = {}
    if record.name not in envs.builtin_names():
        package = _package_dir(record.server)
        where = f"{_SOURCES}/{package.name}"
        sources[where] = package
        # the image has its source, not its distribution: it serves the class by name
        dockerfile += (
            "\n# an environment openenv-gym does not ship: its package, and its class served\n"
            f"COPY {where} /opt/openenv-gym/{where}\n"
            f"ENV PYTHONPATH=/opt/openenv-gym/{_SOURCES} OPENENV_GYM_SERVER={record.server}\n"
        ).encode()
    return ImageRecipe(
        record.name,
        image_name(record.name),
        dockerfile,
        buildargs,
        {"openenv-gym.server": record.name, "openenv-gym.version": __version__},
        sources,
    )


def _source_dir() -> Path | None:
    """The source tree of this checkout (an editable install), if there is one."""
    root = Path(__file__).resolve().parent.parent
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
            tree = _source_dir()
            source = str(tree) if tree is not None else str(installed_wheel(Path(packed)))
        command = [
            sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check",
            "--wheel-dir", str(wheelhouse), source, *extra,
        ]  # fmt: skip
        logger.info("building the wheelhouse: %s", " ".join(command))
        status, tail = _run_logged(command, "pip")
    if status != 0:
        raise ProviderError(f"pip wheel failed ({status}):\n{tail}")
    return wheelhouse


def _run_logged(command: list[str], prefix: str) -> tuple[int, str]:
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


def _stream_build(client: docker.DockerClient, tag: str, **build: Any) -> None:
    """``docker build`` through the low-level API, logging docker's lines as they come.

    Raises:
        ProviderError: The build failed; the message ends with its last log lines.
    """
    tail: collections.deque[str] = collections.deque(maxlen=40)
    for chunk in client.api.build(tag=tag, decode=True, **build):
        text = str(chunk.get("stream", "") or chunk.get("status", "")).rstrip()
        for line in text.splitlines():
            if line.strip():
                tail.append(line)
                logger.info("%s: %s", tag, line)
        if "error" in chunk or "errorDetail" in chunk:
            detail = chunk.get("errorDetail", {}).get("message") or chunk.get("error")
            raise ProviderError(f"building {tag} failed: {detail}\n" + "\n".join(tail))


def _exclude_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name.split("/") else info


def build_context(recipe: ImageRecipe, wheelhouse: Path) -> io.BytesIO:
    """The build context tar of ``recipe``: its Dockerfile, ``build/wheelhouse`` and sources."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(recipe.dockerfile)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(recipe.dockerfile))
        tar.add(str(wheelhouse), arcname="build/wheelhouse")
        for where, path in recipe.sources.items():
            tar.add(str(path), arcname=where, filter=_exclude_caches)
    buffer.seek(0)
    return buffer


def build_images(
    names: Sequence[str] = SERVERS,
    *,
    base_image: str | None = None,
    wheelhouse: Path = Path("build/wheelhouse"),
    wheels: bool = True,
) -> list[str]:
    """Build the wheelhouse (unless ``wheels=False``), then one image per server.

    Returns:
        The tags built, e.g. ``["openenv-gym/wordle:0.1.0"]``.

    Raises:
        ConfigurationError: An unknown server name.
        ProviderError: No docker package or engine, pip or the build failed.
    """
    known = [n for n, r in envs.environments().items() if r.image]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigurationError(f"no image for {unknown}: choose from {', '.join(known)}")
    recipes = [image_recipe(n, base_image=base_image) for n in names]
    client = docker_client()
    import docker

    if wheels:
        build_wheelhouse(wheelhouse)
    if not any(wheelhouse.glob("openenv_gym-*.whl")):
        raise ProviderError(f"no openenv-gym wheel in {wheelhouse}: build the wheelhouse first")
    tags = []
    for recipe in recipes:
        logger.info("building %s", recipe.tag)
        try:
            _stream_build(
                client,
                recipe.tag,
                fileobj=build_context(recipe, wheelhouse),
                custom_context=True,
                buildargs=dict(recipe.buildargs),
                rm=True,
                forcerm=True,
                labels=dict(recipe.labels),
            )
        except docker.errors.DockerException as exc:
            raise ProviderError(f"building {recipe.tag} failed: {exc}") from exc
        tags.append(recipe.tag)
    return tags
