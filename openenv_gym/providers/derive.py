"""Derived images: an official OpenEnv image, served by openenv-gym's runtime.

An official OpenEnv image runs ``uvicorn`` on the app its ``server/app.py`` builds with
OpenEnv's ``create_app``; clients can only speak OpenEnv's JSON ``/ws`` to it. A *derived*
image is that image plus openenv-gym, installed into the image's own Python environment
(e.g. ``/app/.venv``), whose command is ``openenv-gym serve --app MODULE:ATTR`` on the same
app: the batched protocol, with the same env code, dependencies and files.

:func:`derive` makes one, in steps that each say why when they cannot go on
(:class:`~openenv_gym.exceptions.UnsupportedImageError`):

1. read the image's entrypoint, command, working directory and environment
   (:func:`~openenv_gym.providers.image_command.served_app`): which ``module:attr`` uvicorn
   serves, from where (or, for a ``python -m`` command, the ``openenv.yaml`` of its directory);
2. run the image's Python once (no network, read-only) to read its version and platform
   (:func:`~openenv_gym.providers.image_probe.probe`), following uvicorn's own interpreter
   when it is another one;
3. build, on the host, a wheelhouse for *that* Python (:mod:`~openenv_gym.providers.wheels`);
   nothing is fetched inside the container;
4. ``docker build`` ``FROM`` the image: install from the wheelhouse with the image's own
   Python (pip run from its wheel: uv-made environments have no pip), then the same
   hardening as our images (uid 10001, ``HEALTHCHECK`` on ``/health``, labels);
5. run the derived image once (no network) until the server prints its URL: an app our
   runtime cannot host fails here, with the server's own message.

Derived images are cached (:mod:`~openenv_gym.providers.derived_cache`): labelled with the
base image's id and openenv-gym's :func:`~openenv_gym.providers.wheels.fingerprint`. An image
that cannot be derived for a reason that will not change (no Python, a Python we have no
wheels for, a command we cannot read) gets a label-only marker image carrying the reason, so
the next process falls back at once. ``openenv-gym images list`` / ``rm`` show and remove both.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_gym._version import __version__
from openenv_gym.exceptions import ProviderError, UnsupportedImageError
from openenv_gym.providers.derived_cache import (
    DERIVED_REPOSITORY,
    LABEL_BASE,
    LABEL_DERIVED_FROM,
    LABEL_FINGERPRINT,
    LABEL_SERVE,
    CachedImage,
    Derived,
    cached,
    derived_images,
    get_image,
    is_ours,
    mark,
    remove_derived,
    serve_command,
    tags,
    unhostable,
)
from openenv_gym.providers.engine import (
    build_context,
    container_labels,
    docker_client,
    stream_build,
)
from openenv_gym.providers.image_command import ServedApp, served_app
from openenv_gym.providers.image_probe import HARDENED, ImageFacts, probe
from openenv_gym.providers.wheels import fingerprint, own_wheel, target_wheelhouse

if TYPE_CHECKING:
    import docker
    from docker.models.images import Image

__all__ = [
    "DERIVED_REPOSITORY",
    "RUNTIMES",
    "USER",
    "CachedImage",
    "Derived",
    "derive",
    "derived_images",
    "dockerfile",
    "is_ours",
    "remove_derived",
    "serve_command",
]

logger = logging.getLogger("openenv_gym.providers")

RUNTIMES = ("auto", "native", "openenv-gym")
"""``DockerProvider(runtime=...)``: derive or fall back; its own server; derive or raise."""

USER = "10001:10001"
"""The unprivileged user a derived image runs as (as our own images)."""

_WHEELS = "/tmp/openenv-gym-wheels"

_INSTALL = (
    "import glob, shutil, subprocess, sys\n"
    f"w = {_WHEELS!r}\n"
    "pip = sorted(glob.glob(w + '/pip-*.whl'))[-1]\n"
    "subprocess.check_call([sys.executable, pip + '/pip', 'install', '--no-index',"
    " '--find-links', w, '--no-cache-dir', '--disable-pip-version-check',"
    " '--no-warn-script-location', '--root-user-action=ignore', '--break-system-packages',"
    " 'openenv-gym==' + sys.argv[1]])\n"
    "shutil.rmtree(w)\n"
)

_HEALTH = (
    "import os, urllib.request as u; t = os.environ.get('OPENENV_GYM_TOKEN'); "
    "u.urlopen(u.Request('http://127.0.0.1:%s/health' % os.environ.get('PORT', '8000'), "
    "headers={'Authorization': 'Bearer ' + t} if t else {}), timeout=2)"
)


_lock = threading.Lock()


def derive(
    base: str,
    *,
    client: docker.DockerClient | None = None,
    tag: str | None = None,
    environment: Mapping[str, str] | None = None,
    cache: Path | None = None,
    check_timeout: float = 120.0,
) -> Derived:
    """The derived image of ``base``: from the cache, else built (and checked) now.

    Args:
        base: The image (a name or an id); it must exist locally (never pulled).
        client: A ``docker.DockerClient`` (default: the local engine).
        tag: Also tag the derived image so (e.g. for a registry a cluster pulls from).
        environment: Variables for the check run (the provider passes its own).
        cache: Where wheelhouses are kept (default
            :func:`~openenv_gym.providers.wheels.cache_dir`).
        check_timeout: Seconds for the derived image's server to start in the check run.

    Raises:
        UnsupportedImageError: The image cannot take our runtime; ``str`` says why.
        ProviderError: No such image, no engine, a failed build.
    """
    client = client or docker_client()
    image = get_image(client, base)
    if is_ours(image):
        raise UnsupportedImageError(f"{base} already runs openenv-gym's server: nothing to derive")
    with _lock:
        if image.id in unhostable:
            raise UnsupportedImageError(unhostable[image.id])
        found = cached(client, base, image)
        if found is not None:
            if tag:
                _tag(client, found.image, tag)
            return found
        derived = _derive(client, base, image, tag, environment, cache, check_timeout)
    return derived


def _derive(
    client: docker.DockerClient,
    base: str,
    image: Image,
    tag: str | None,
    environment: Mapping[str, str] | None,
    cache: Path | None,
    check_timeout: float,
) -> Derived:
    config = image.attrs.get("Config") or {}
    derived_tag, marker_tag = tags(base, image.id)
    try:
        served = served_app(config.get("Entrypoint"), config.get("Cmd"), config.get("WorkingDir"))
        facts = probe(client, image, served)
        target = facts.target()
        serve = _serve_args(served, facts)
    except UnsupportedImageError as exc:
        mark(client, base, image, marker_tag, str(exc))
        raise
    logger.info(
        "deriving %s: Python %s at %s (%s %s), serving %s from %s",
        base,
        ".".join(map(str, facts.version)),
        facts.python,
        facts.libc,
        facts.libc_version,
        " ".join(serve[3:]),
        served.workdir,
    )
    wheels = target_wheelhouse(target, cache)  # a download failure may pass: not marked
    ours = own_wheel(cache)
    text = dockerfile(image.id, served, facts, serve, config)
    labels = {
        LABEL_DERIVED_FROM: image.id,
        LABEL_BASE: base,
        LABEL_FINGERPRINT: fingerprint(),
        LABEL_SERVE: json.dumps(serve),
        "openenv-gym.version": __version__,
        "openenv-gym.native-port": str(served.port),
    }
    context = build_context(text, [*sorted(wheels.glob("*.whl")), ours])
    stream_build(
        client,
        derived_tag,
        fileobj=context,
        custom_context=True,
        labels=labels,
        rm=True,
        forcerm=True,
        network_mode="none",
    )
    try:
        _check(client, derived_tag, serve, environment, check_timeout)
    except UnsupportedImageError as exc:
        unhostable[image.id] = str(exc)
        with contextlib.suppress(Exception):
            client.images.remove(derived_tag, force=True)
        raise
    if tag:
        _tag(client, derived_tag, tag)
    logger.info("derived %s from %s", derived_tag, base)
    return Derived(base, image.id, derived_tag, tuple(serve))


def _serve_args(served: ServedApp, facts: ImageFacts) -> list[str]:
    """``python -m openenv_gym serve --app ...`` for the app the image serves."""
    head = [facts.python, "-m", "openenv_gym", "serve"]
    if served.target is not None:
        return [*head, "--app", served.target]
    if facts.app is not None:
        return [*head, "--app-dir", served.workdir]
    raise UnsupportedImageError(
        f"cannot tell which app the image serves: its command `{served.command}` names no "
        f"uvicorn app, and {served.workdir} has no openenv.yaml naming one"
    )


def dockerfile(
    base_id: str,
    served: ServedApp,
    facts: ImageFacts,
    serve: Sequence[str],
    config: Mapping[str, Any],
) -> str:
    """The Dockerfile of a derived image (its build context: this and ``wheels/``)."""
    env = {
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/tmp",
        "PORT": "8000",
        "OPENENV_GYM_MAX_SESSIONS": "256",
        "MAX_CONCURRENT_ENVS": "256",
    }
    lines = [
        "# derived by openenv-gym: the image's own app, served by openenv-gym's runtime",
        f"FROM {base_id}",
        "USER root",
        f"COPY wheels {_WHEELS}",
        f"RUN {json.dumps([facts.python, '-c', _INSTALL, __version__])}",
        f"WORKDIR {served.workdir}",
        "ENV " + " ".join(f"{k}={v}" for k, v in env.items()),
    ]
    if served.app_dir is not None:
        lines.append(f"ENV PYTHONPATH={served.app_dir}${{PYTHONPATH:+:$PYTHONPATH}}")
    lines += [
        f"USER {USER}",
        "EXPOSE 8000",
        "HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 "
        f"CMD {json.dumps([facts.python, '-c', _HEALTH])}",
    ]
    if served.in_entrypoint:  # else the entrypoint wraps the command (tini, a set-up script)
        lines.append("ENTRYPOINT []")
    lines.append(f"CMD {json.dumps([*serve, '--host', '0.0.0.0', '--port', '8000'])}")
    return "\n".join(lines) + "\n"


def _tag(client: docker.DockerClient, image: str, tag: str) -> None:
    import docker

    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:
        repository, version = tag, "latest"
    try:
        client.images.get(image).tag(repository, version)
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot tag {image} as {tag}: {exc}") from exc


def _check(
    client: docker.DockerClient,
    tag: str,
    serve: Sequence[str],
    environment: Mapping[str, str] | None,
    timeout: float,
) -> None:
    """Start the derived image's server once (loopback only) until it prints its URL.

    Raises:
        UnsupportedImageError: The server exited: our runtime cannot host the app.
        ProviderError: It neither started nor exited within ``timeout``.
    """
    import docker

    env = dict(environment or {})
    env["OPENENV_GYM_TOKEN"] = secrets.token_urlsafe(16)
    command = [*serve, "--host", "127.0.0.1", "--port", "8000"]
    container = None
    try:
        container = client.containers.create(
            tag,
            command=command,
            labels=container_labels(),
            environment=env,
            **HARDENED,
        )
        container.start()
        deadline = time.monotonic() + timeout
        while True:
            output = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
            if re.search(r"^https?://", output, re.MULTILINE):
                return
            container.reload()
            if container.status in ("exited", "dead"):
                logs = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
                lines = [line for line in logs.strip().splitlines() if line.strip()]
                why = lines[-1] if lines else f"exit {container.attrs['State'].get('ExitCode')}"
                raise UnsupportedImageError(
                    f"openenv-gym's runtime cannot host its app: {why.strip()[-400:]}"
                )
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"the derived image {tag} did not start its server within {timeout} s"
                )
            time.sleep(0.1)
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot run the derived image {tag}: {exc}") from exc
    finally:
        if container is not None:
            with contextlib.suppress(Exception):
                container.remove(force=True)
