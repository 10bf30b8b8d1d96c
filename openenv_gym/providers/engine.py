"""The Docker engine: its client, the labels of what we start there, and builds.

Shared by the docker provider (:mod:`openenv_gym.providers.docker`), image derivation
(:mod:`openenv_gym.providers.derive`) and ``openenv-gym images``. The ``docker`` package is
optional: ``pip install 'openenv-gym[docker]'``.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import socket
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_gym.exceptions import ProviderError

if TYPE_CHECKING:
    import docker

__all__ = [
    "LABEL_HOST",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "build_context",
    "container_labels",
    "docker_client",
    "stream_build",
]

logger = logging.getLogger("openenv_gym.providers")

LABEL_MANAGED = "openenv-gym.managed"
LABEL_OWNER = "openenv-gym.owner"
LABEL_HOST = "openenv-gym.host"

_INSTALL_HINT = "the docker provider needs the docker package: pip install 'openenv-gym[docker]'"


def docker_client() -> docker.DockerClient:
    """A client for the local engine (``DOCKER_HOST`` etc. are honoured).

    Raises:
        ProviderError: The ``docker`` package is missing, or no engine answers.
    """
    try:
        import docker
    except ImportError as exc:
        raise ProviderError(_INSTALL_HINT) from exc
    try:
        return docker.from_env()
    except docker.errors.DockerException as exc:
        raise ProviderError(f"no Docker engine: {exc}") from exc


def container_labels() -> dict[str, str]:
    """The labels of the provider's containers: a leftover is found by ``openenv-gym gc``."""
    return {LABEL_MANAGED: "1", LABEL_OWNER: str(os.getpid()), LABEL_HOST: socket.gethostname()}


def build_context(text: str, wheels: Sequence[Path] = ()) -> io.BytesIO:
    """A build context: the Dockerfile ``text`` and ``wheels/`` holding ``wheels``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
        for wheel in wheels:
            tar.add(str(wheel), arcname=f"wheels/{wheel.name}")
    buffer.seek(0)
    return buffer


def stream_build(
    client: docker.DockerClient, tag: str, *, log: logging.Logger = logger, **build: Any
) -> None:
    """``docker build`` through the low-level API, logging docker's lines as they come.

    ``log`` gets each line at INFO, as ``"<tag>: <line>"``.

    Raises:
        ProviderError: The build failed; the message ends with its last log lines.
    """
    import docker

    tail: collections.deque[str] = collections.deque(maxlen=40)
    try:
        for chunk in client.api.build(tag=tag, decode=True, **build):
            text = str(chunk.get("stream", "") or chunk.get("status", "")).rstrip()
            for line in text.splitlines():
                if line.strip():
                    tail.append(line)
                    log.info("%s: %s", tag, line)
            if "error" in chunk or "errorDetail" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk.get("error")
                raise ProviderError(f"building {tag} failed: {detail}\n" + "\n".join(tail))
    except docker.errors.DockerException as exc:
        raise ProviderError(f"building {tag} failed: {exc}") from exc
