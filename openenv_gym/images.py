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

Images derived from official OpenEnv images (``openenv-gym images derive``, ``list``,
``rm``) are made by :mod:`openenv_gym.providers.derive`.
"""

from __future__ import annotations

import importlib
import io
import logging
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from openenv_gym import envs
from openenv_gym._version import __version__
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers.docker import image_name
from openenv_gym.providers.engine import docker_client, stream_build
from openenv_gym.providers.wheels import build_wheelhouse, installed_wheel

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
    if wheels:
        build_wheelhouse(wheelhouse)
    if not any(wheelhouse.glob("openenv_gym-*.whl")):
        raise ProviderError(f"no openenv-gym wheel in {wheelhouse}: build the wheelhouse first")
    tags = []
    for recipe in recipes:
        logger.info("building %s", recipe.tag)
        stream_build(
            client,
            recipe.tag,
            log=logger,
            fileobj=build_context(recipe, wheelhouse),
            custom_context=True,
            buildargs=dict(recipe.buildargs),
            rm=True,
            forcerm=True,
            labels=dict(recipe.labels),
        )
        tags.append(recipe.tag)
    return tags
