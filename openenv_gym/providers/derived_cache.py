"""The cache of derived images: finding, listing and removing them, and fallback markers.

A derived image is labelled with the id of the image it was derived from
(:data:`LABEL_DERIVED_FROM`) and the openenv-gym it holds (:data:`LABEL_FINGERPRINT`), and
tagged ``openenv-gym-derived/<base name>:<version>-<key>``. An image that cannot take our
runtime for a reason that will not change gets a *marker* instead: an image with no layer of
its own (``FROM base`` + labels) whose :data:`LABEL_NATIVE` says why, so the next process
falls back at once. ``openenv-gym images list`` / ``rm`` read and prune both.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openenv_gym._version import __version__
from openenv_gym.exceptions import ProviderError, UnsupportedImageError
from openenv_gym.providers.engine import build_context, docker_client, stream_build
from openenv_gym.providers.wheels import fingerprint

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

__all__ = [
    "DERIVED_REPOSITORY",
    "LABEL_BASE",
    "LABEL_DERIVED_FROM",
    "LABEL_FINGERPRINT",
    "LABEL_NATIVE",
    "LABEL_SERVE",
    "LABEL_SERVER",
    "CachedImage",
    "Derived",
    "cached",
    "derived_images",
    "get_image",
    "is_ours",
    "mark",
    "remove_derived",
    "serve_command",
    "tags",
    "unhostable",
]

logger = logging.getLogger("openenv_gym.providers")

LABEL_DERIVED_FROM = "openenv-gym.derived-from"
"""On a derived image (and a marker): the id of the image it was derived from."""
LABEL_BASE = "openenv-gym.base"
"""The name the base image was given by (``registry.hf.space/openenv-echo-env:latest``)."""
LABEL_FINGERPRINT = "openenv-gym.fingerprint"
"""The openenv-gym it holds (:func:`~openenv_gym.providers.wheels.fingerprint`)."""
LABEL_SERVE = "openenv-gym.serve"
"""On a derived image: the serve command as a JSON list (host and port left out)."""
LABEL_NATIVE = "openenv-gym.native"
"""On a marker image: why the base image runs with its own server."""
LABEL_SERVER = "openenv-gym.server"
"""On our own images (``servers/Dockerfile``)."""

DERIVED_REPOSITORY = "openenv-gym-derived"
"""Derived images are tagged ``openenv-gym-derived/<base name>:<version>-<key>``."""

unhostable: dict[str, str] = {}
"""Base image id -> why our runtime could not host its app, in this process only (that can
depend on the container's environment, so no marker is kept)."""


@dataclass(frozen=True, slots=True)
class Derived:
    """What :func:`derive` made (or found in the cache) for a base image.

    Attributes:
        base: The base image's name as given.
        base_id: Its id.
        image: The derived image's tag.
        serve: The serve command (host and port left out), as in :data:`LABEL_SERVE`.
        cached: Whether it came from the cache.
    """

    base: str
    base_id: str
    image: str
    serve: tuple[str, ...]
    cached: bool = False


def is_ours(image: Image) -> bool:
    """Whether ``image`` already runs openenv-gym's server (ours, or a derived one)."""
    labels = image.labels or {}
    return LABEL_SERVER in labels or LABEL_SERVE in labels


def serve_command(image: Image) -> list[str] | None:
    """The serve command of a derived image (None: not a derived image)."""
    text = (image.labels or {}).get(LABEL_SERVE)
    if not text:
        return None
    command = json.loads(text)
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        raise ProviderError(f"image {image.short_id} has a malformed {LABEL_SERVE} label")
    return command


def _slug(name: str) -> str:
    name = name.split("@", 1)[0].lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:80] or "image"


def _key(base_id: str) -> str:
    return hashlib.sha256(f"{base_id}\n{fingerprint()}".encode()).hexdigest()[:12]


def tags(base: str, base_id: str) -> tuple[str, str]:
    """(the derived image's tag, its marker's tag)."""
    tag = f"{DERIVED_REPOSITORY}/{_slug(base)}:{__version__}-{_key(base_id)}"
    return tag, f"{tag}-native"


def get_image(client: docker.DockerClient, name: str) -> Image:
    """The local image ``name`` (never pulled).

    Raises:
        ProviderError: No such image, or the engine failed.
    """
    import docker

    try:
        return client.images.get(name)
    except docker.errors.ImageNotFound as exc:
        raise ProviderError(f"no image {name!r} (the docker provider never pulls)") from exc
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot inspect image {name!r}: {exc}") from exc


def cached(client: docker.DockerClient, base: str, image: Image) -> Derived | None:
    """The cached derived image of ``image`` for this openenv-gym, if there is one.

    Raises:
        UnsupportedImageError: A marker says the image cannot take our runtime.
    """
    import docker

    labels = [f"{LABEL_DERIVED_FROM}={image.id}", f"{LABEL_FINGERPRINT}={fingerprint()}"]
    try:
        found = client.images.list(filters={"label": labels})
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot list images: {exc}") from exc
    for candidate in found:
        reason = (candidate.labels or {}).get(LABEL_NATIVE)
        if reason:
            raise UnsupportedImageError(reason)
    for candidate in found:
        command = serve_command(candidate)
        if command is not None:
            tags = candidate.tags or [candidate.id]
            return Derived(base, image.id, tags[0], tuple(command), cached=True)
    return None


def mark(client: docker.DockerClient, base: str, image: Image, tag: str, reason: str) -> None:
    """A label-only image saying why ``image`` runs natively (no layer: no disk)."""
    labels = {
        LABEL_DERIVED_FROM: image.id,
        LABEL_BASE: base,
        LABEL_FINGERPRINT: fingerprint(),
        LABEL_NATIVE: reason,
        "openenv-gym.version": __version__,
    }
    try:
        stream_build(
            client,
            tag,
            fileobj=build_context(f"FROM {image.id}\n"),
            custom_context=True,
            labels=labels,
            rm=True,
            network_mode="none",
        )
    except ProviderError as exc:  # the marker only saves time; the reason is what matters
        logger.debug("could not record why %s runs natively: %s", base, exc)


@dataclass(frozen=True, slots=True)
class CachedImage:
    """One entry of the cache (:func:`derived_images`).

    Attributes:
        tag: The derived image's tag (or the marker's).
        base: The base image's name as given when it was derived.
        base_id: The base image's id.
        fingerprint: The openenv-gym it holds.
        native: Why the base runs natively (a marker), or None (a derived image).
        size: Bytes (the derived image's whole size, base included).
        current: Whether it is for this openenv-gym (:func:`fingerprint`).
    """

    tag: str
    base: str
    base_id: str
    fingerprint: str
    native: str | None
    size: int
    current: bool


def derived_images(client: docker.DockerClient | None = None) -> list[CachedImage]:
    """The derived images and markers on this engine, newest openenv-gym first."""
    import docker

    client = client or docker_client()
    try:
        images = client.images.list(filters={"label": LABEL_DERIVED_FROM})
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot list images: {exc}") from exc
    current = fingerprint()
    rows = []
    for image in images:
        labels = image.labels or {}
        rows.append(
            CachedImage(
                (image.tags or [image.short_id])[0],
                labels.get(LABEL_BASE, ""),
                labels.get(LABEL_DERIVED_FROM, ""),
                labels.get(LABEL_FINGERPRINT, ""),
                labels.get(LABEL_NATIVE) or None,
                int(image.attrs.get("Size") or 0),
                labels.get(LABEL_FINGERPRINT) == current,
            )
        )
    return sorted(rows, key=lambda r: (not r.current, r.base, r.tag))


def remove_derived(
    bases: Sequence[str] = (),
    *,
    stale_only: bool = False,
    client: docker.DockerClient | None = None,
) -> list[str]:
    """Remove derived images and markers (of ``bases`` only, if given); their tags.

    Args:
        bases: Base images whose derived images to remove (none: all): by the name they
            were derived under (any version of that image), or by an image's id.
        stale_only: Only those for another openenv-gym than this one.
        client: A ``docker.DockerClient``.
    """
    import docker

    client = client or docker_client()
    wanted: set[str] = set(bases)
    for base in bases:
        with contextlib.suppress(ProviderError):  # gone: its name still matches
            wanted.add(get_image(client, base).id)
    removed = []
    for row in derived_images(client):
        if wanted and not {row.base, row.base_id} & wanted:
            continue
        if stale_only and row.current:
            continue
        try:
            client.images.remove(row.tag, force=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.DockerException as exc:
            raise ProviderError(f"cannot remove {row.tag}: {exc}") from exc
        removed.append(row.tag)
    unhostable.clear()
    return removed
