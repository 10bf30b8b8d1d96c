"""Servers in Docker containers: K containers, each ONE server process hosting many envs.

Each container is published on a random port of **127.0.0.1 only**, and labelled
``openenv-gym.managed=1`` plus ``openenv-gym.owner=<pid>`` (and ``openenv-gym.host``).
Containers are removed on ``close()``, when the provider is garbage collected, and at
interpreter exit; after a SIGKILL of the client, ``openenv-gym gc`` (:func:`gc`) removes the
containers whose owner process is gone.

Hardened by default: memory, CPU and pid limits, every capability dropped,
``no-new-privileges``, a read-only root file system with a ``/tmp`` tmpfs. The image runs
as a non-root user (``servers/Dockerfile``). Each server demands a bearer token, a fresh
one per container unless ``OPENENV_GYM_TOKEN`` is set, given to it as
``OPENENV_GYM_TOKEN`` (:meth:`DockerProvider.token`); an image that does not read it
ignores it.

An image that is not ours (an official OpenEnv image) is served by our runtime by default
(``runtime="auto"``): the provider runs its *derived* image
(:mod:`openenv_gym.providers.derive`: the same image with openenv-gym installed, serving the
same app over the batched protocol), derived once and cached. If the image cannot take our
runtime, one warning says why and its own server runs instead (OpenEnv's JSON ``/ws``);
``runtime="native"`` always runs its own server, ``runtime="openenv-gym"`` raises
:class:`~openenv_gym.exceptions.UnsupportedImageError` instead of falling back.

The ``docker`` package is optional: ``pip install 'openenv-gym[docker]'``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openenv_gym._http import get_json
from openenv_gym._version import __version__
from openenv_gym.config import check_seconds, env_float, resolve_token
from openenv_gym.exceptions import (
    AuthenticationError,
    ConfigurationError,
    OpenEnvGymError,
    ProviderError,
    UnsupportedImageError,
)
from openenv_gym.providers import derive
from openenv_gym.providers.base import Provider
from openenv_gym.providers.engine import (
    LABEL_HOST,
    LABEL_MANAGED,
    LABEL_OWNER,
    container_labels,
    docker_client,
)
from openenv_gym.providers.image_command import served_app

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container
    from docker.models.images import Image

__all__ = [
    "DEFAULT_LIMITS",
    "LABEL_HOST",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "OFFICIAL_START_TIMEOUT",
    "DockerProvider",
    "Launch",
    "docker_client",
    "gc",
    "image_name",
]

logger = logging.getLogger("openenv_gym.providers")


DEFAULT_LIMITS: dict[str, Any] = {
    "mem_limit": "1g",
    "nano_cpus": 1_000_000_000,  # one CPU
    "pids_limit": 256,
}
"""Resource limits every container gets unless overridden (``limits=``)."""

OFFICIAL_START_TIMEOUT = 120.0
"""Default seconds for a container of an image that is not ours to turn healthy."""


def image_name(server: str) -> str:
    """The image ``openenv-gym images build`` makes for a built-in server."""
    return f"openenv-gym/{server}:{__version__}"


@dataclass(frozen=True, slots=True)
class Launch:
    """What the provider runs for its image (decided once, at the first start).

    Attributes:
        image: The image to run: the one given, or its derived image.
        command: The command to run it with (None: the image's own).
        runtime: ``"openenv-gym"`` (ours or a derived image: the batched protocol) or
            ``"native"`` (the image's own server: OpenEnv's JSON ``/ws``).
        port: The port the server listens on inside the container.
        ours: Whether the image itself is one of ours (``openenv-gym images build``).
        reason: Why an image runs natively under ``runtime="auto"`` (None otherwise).
    """

    image: str
    command: list[str] | None
    runtime: str
    port: int
    ours: bool = False
    reason: str | None = None


class DockerProvider(Provider):
    """Start ``num_containers`` containers of one image; hand out their loopback URLs.

    Args:
        server: Built-in name (``wordle``, ``echo``, ``catch``): the image is
            :func:`image_name` of it unless ``image=`` is given.
        image: Any image serving OpenEnv's HTTP/WebSocket API: ours, or an official
            OpenEnv image (served by our runtime from a derived image, see ``runtime``).
        num_containers: How many containers K (a vector env spreads its sub-envs over them).
        max_sessions: Env instances per container (``MAX_SESSIONS`` of ours;
            ``OPENENV_GYM_MAX_SESSIONS`` and OpenEnv's ``MAX_CONCURRENT_ENVS`` of a derived
            or native official image); None keeps the image's default.
        runtime: For an image that is not ours: ``"auto"`` (default) serves it with our
            runtime from its derived image (:func:`~openenv_gym.providers.derive.derive`,
            cached), or with its own server when it cannot take ours (one warning says
            why); ``"openenv-gym"`` the same, but raises
            :class:`~openenv_gym.exceptions.UnsupportedImageError` instead of falling back;
            ``"native"``: its own server (OpenEnv's JSON ``/ws``).
        concurrent: Our runtime hosts every session of an env not marked
            ``SUPPORTS_CONCURRENT_SESSIONS`` in one process (``serve --concurrent``), for an
            env whose instances share nothing; by default each such session gets a
            worker process of its own.
        container_port: The port the server listens on inside the container (default 8000,
            or the ``--port`` of an official image's own command).
        start_timeout: Seconds for each container to answer ``GET /health``
            (``OPENENV_GYM_START_TIMEOUT``; default 30 for our images,
            :data:`OFFICIAL_START_TIMEOUT` for others: an official image imports OpenEnv,
            FastMCP and Gradio before it listens).
        limits: Overrides of :data:`DEFAULT_LIMITS` (``mem_limit``, ``nano_cpus``,
            ``pids_limit``).
        environment: More environment variables for the containers.
        client: A ``docker.DockerClient`` (default: :func:`docker_client`).
        token: The bearer token of every server (default: ``OPENENV_GYM_TOKEN``, else a
            fresh random one per container), given to it as ``OPENENV_GYM_TOKEN``; a
            client sends :meth:`token`.
    """

    def __init__(
        self,
        server: str | None = None,
        *,
        image: str | None = None,
        num_containers: int = 1,
        max_sessions: int | None = None,
        runtime: str = "auto",
        concurrent: bool = False,
        container_port: int | None = None,
        start_timeout: float | None = None,
        limits: Mapping[str, Any] | None = None,
        environment: Mapping[str, str] | None = None,
        client: docker.DockerClient | None = None,
        token: str | None = None,
    ) -> None:
        if isinstance(num_containers, bool) or not isinstance(num_containers, int):
            raise ConfigurationError(f"num_containers must be an integer, got {num_containers!r}")
        if num_containers < 1:
            raise ConfigurationError(f"num_containers must be >= 1, got {num_containers}")
        if image is None:
            if server is None or ":" in server or server == "generic":
                raise ConfigurationError(
                    "the docker provider needs image= for anything but a built-in server"
                )
            image = image_name(server)
        if max_sessions is not None and max_sessions < 1:
            raise ConfigurationError(f"max_sessions must be >= 1, got {max_sessions}")
        if runtime not in derive.RUNTIMES:
            raise ConfigurationError(
                f"runtime must be one of {', '.join(map(repr, derive.RUNTIMES))}, got {runtime!r}"
            )
        if concurrent and runtime == "native":
            raise ConfigurationError("concurrent=True is for our runtime, not runtime='native'")
        self.server = server
        self.image = image
        self.num_containers = num_containers
        self.max_sessions = max_sessions
        self.runtime = runtime
        self.concurrent = bool(concurrent)
        self.container_port = container_port
        given = check_seconds(start_timeout, "start_timeout") or env_float(
            "OPENENV_GYM_START_TIMEOUT", None
        )
        self._default_timeout = given is None
        self.start_timeout = given or 30.0
        self.limits = {**DEFAULT_LIMITS, **dict(limits or {})}
        self.environment = dict(environment or {})
        self._token = resolve_token(token or self.environment.get("OPENENV_GYM_TOKEN"))
        self._tokens: list[str] = []  # per container, in order
        self._client = client
        self.containers: list[Container] = []
        self._ids: list[str] = []
        self._urls: list[str] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.launch: Launch | None = None
        """What runs (:class:`Launch`), known once started."""

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client (created on first use)."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    def start(self) -> list[str]:
        """Start the containers and wait until each answers ``GET /health``."""
        if self._urls is not None:
            return list(self._urls)
        client = self.client
        if self.launch is None:
            self.launch = self._decide(client)
            if self._default_timeout and not self.launch.ours:
                self.start_timeout = OFFICIAL_START_TIMEOUT
        if self._finalizer is None:  # also runs at interpreter exit
            self._finalizer = weakref.finalize(self, _remove_all, client, self._ids)
        try:
            for _ in range(self.num_containers):
                self._run_one(client)
            deadline = time.monotonic() + self.start_timeout
            self._urls = [self._wait_healthy(c, deadline) for c in self.containers]
        except BaseException:
            self.close()
            raise
        return list(self._urls)

    def token(self, index: int) -> str | None:
        """The bearer token container ``index`` demands (a restarted one has a new one)."""
        return self._tokens[index] if index < len(self._tokens) else None

    def alive(self, index: int) -> bool:
        """Whether container ``index`` still runs."""
        import docker

        try:
            container = self.containers[index]
            container.reload()
        except (IndexError, docker.errors.DockerException):
            return False
        return bool(container.status == "running")

    def restart(self, index: int) -> str:
        """Remove container ``index`` and start a fresh one in its place; its URL.

        Raises:
            ProviderError: The provider is closed, or the new container failed.
        """
        if self._urls is None:
            raise ProviderError("the docker provider is closed (or was never started)")
        client = self.client
        old = self.containers[index]
        with contextlib.suppress(Exception):  # already gone: nothing to remove
            client.api.remove_container(old.id, force=True)
        with contextlib.suppress(ValueError):
            self._ids.remove(old.id)
        count = len(self.containers)
        try:
            container = self._run_one(client)
        finally:  # _run_one appends what it made: it takes the lost one's place instead
            del self.containers[count:]
            fresh_tokens = self._tokens[count:]
            del self._tokens[count:]
        self.containers[index] = container
        self._tokens[index] = fresh_tokens[0]
        url = self._wait_healthy(container, time.monotonic() + self.start_timeout)
        self._urls[index] = url
        logger.warning("restarted container %d of %s at %s", index, self.image, url)
        return url

    def _decide(self, client: docker.DockerClient) -> Launch:
        """Ours, derived or native: what to run for :attr:`image` (see ``runtime``)."""
        image = self._image(client)
        command = derive.serve_command(image)
        if command is not None or derive.is_ours(image):
            port = self.container_port or 8000
            return Launch(self.image, command, "openenv-gym", port, ours=command is None)
        if self.runtime != "native":
            try:
                derived = derive.derive(self.image, client=client, environment=self.environment)
            except UnsupportedImageError as exc:
                if self.runtime == "openenv-gym":
                    raise
                logger.warning(
                    "%s cannot be served by openenv-gym's runtime (%s): running its own "
                    "server, stepped over OpenEnv's JSON /ws",
                    self.image,
                    exc,
                )
                return Launch(self.image, None, "native", self._native_port(image), reason=str(exc))
            return Launch(
                derived.image, list(derived.serve), "openenv-gym", self.container_port or 8000
            )
        return Launch(self.image, None, "native", self._native_port(image))

    def _image(self, client: docker.DockerClient) -> Image:
        import docker

        try:
            return client.images.get(self.image)
        except docker.errors.ImageNotFound as exc:
            hint = f"; build it with: openenv-gym images build {self.server}" if self.server else ""
            raise ProviderError(f"no image {self.image!r} (never pulled){hint}") from exc
        except docker.errors.DockerException as exc:
            raise ProviderError(f"cannot inspect image {self.image!r}: {exc}") from exc

    def _native_port(self, image: Image) -> int:
        """The port an image's own server listens on: ``container_port``, else its command's."""
        if self.container_port is not None:
            return self.container_port
        config = image.attrs.get("Config") or {}
        try:
            served = served_app(
                config.get("Entrypoint"), config.get("Cmd"), config.get("WorkingDir")
            )
        except UnsupportedImageError:
            return 8000
        return served.port

    def _environment(self, launch: Launch) -> dict[str, str]:
        environment = {"PORT": str(launch.port)}
        if self.max_sessions is not None:
            if launch.ours:
                environment["MAX_SESSIONS"] = str(self.max_sessions)
            else:  # OpenEnv's own apps read MAX_CONCURRENT_ENVS
                environment["MAX_CONCURRENT_ENVS"] = str(self.max_sessions)
                if launch.runtime == "openenv-gym":
                    environment["OPENENV_GYM_MAX_SESSIONS"] = str(self.max_sessions)
        environment.update(self.environment)
        return environment

    def _command(self, launch: Launch) -> list[str] | None:
        if launch.command is None:
            return None
        command = [*launch.command, "--host", "0.0.0.0", "--port", str(launch.port)]
        if self.max_sessions is not None:  # sessions of a class not marked concurrent
            command += ["--max-workers", str(self.max_sessions)]
        return [*command, "--concurrent"] if self.concurrent else command

    def _run_one(self, client: docker.DockerClient) -> Container:
        import docker

        launch = self.launch
        assert launch is not None
        environment = self._environment(launch)
        token = environment["OPENENV_GYM_TOKEN"] = self._token or secrets.token_urlsafe(32)
        try:
            # create + start, never run(): run() pulls a missing image from a registry
            container = client.containers.create(
                launch.image,
                command=self._command(launch),
                detach=True,
                ports={f"{launch.port}/tcp": ("127.0.0.1", None)},
                labels=container_labels(),
                environment=environment,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                read_only=True,
                tmpfs={"/tmp": "rw,nosuid,nodev,size=64m"},
                **self.limits,
            )
        except docker.errors.ImageNotFound as exc:
            raise ProviderError(f"no image {launch.image!r}: it was removed meanwhile") from exc
        except docker.errors.DockerException as exc:
            raise ProviderError(f"cannot start a container of {launch.image!r}: {exc}") from exc
        self.containers.append(container)
        self._tokens.append(token)
        self._ids.append(container.id)
        try:
            container.start()
        except docker.errors.DockerException as exc:
            raise ProviderError(f"cannot start a container of {self.image!r}: {exc}") from exc
        return container

    def _host_port(self, container: Container) -> int | None:
        assert self.launch is not None
        ports = container.attrs.get("NetworkSettings", {}).get("Ports") or {}
        bindings = ports.get(f"{self.launch.port}/tcp") or []
        for binding in bindings:
            if binding.get("HostIp") in ("127.0.0.1", "") and binding.get("HostPort"):
                return int(binding["HostPort"])
        return None

    def _wait_healthy(self, container: Container, deadline: float) -> str:
        import docker

        url: str | None = None
        token = self._tokens[self.containers.index(container)]
        headers = {"Authorization": f"Bearer {token}"}
        while True:
            try:
                container.reload()
            except docker.errors.DockerException as exc:
                raise ProviderError(f"container {container.short_id} vanished: {exc}") from exc
            if container.status in ("exited", "dead"):
                raise self._fail(container, f"exited ({container.attrs['State'].get('ExitCode')})")
            if url is None:
                port = self._host_port(container)
                if port is not None:
                    url = f"http://127.0.0.1:{port}"
            if url is not None:
                try:
                    status, body = get_json(f"{url}/health", timeout=2.0, headers=headers)
                except AuthenticationError as exc:
                    raise self._fail(container, f"refused its token ({exc})") from exc
                except OpenEnvGymError:
                    status, body = 0, None
                if status == 200 and (not isinstance(body, dict) or body.get("status") != "error"):
                    logger.info(
                        "docker server started: container %s of %s at %s",
                        container.short_id,
                        self.image,
                        url,
                    )
                    return url
            if time.monotonic() > deadline:
                raise self._fail(
                    container, f"not healthy at {url}/health within {self.start_timeout} s"
                )
            time.sleep(0.1)

    def _fail(self, container: Container, why: str) -> ProviderError:
        tail = ""
        with contextlib.suppress(Exception):
            tail = container.logs(tail=20).decode("utf-8", "replace").strip()
        return ProviderError(
            f"container {container.short_id} of {self.image!r} {why}"
            + (f"; its last log lines:\n{tail}" if tail else "; it logged nothing")
        )

    def close(self) -> None:
        """Remove every container this provider started. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._urls = None
        self.containers = []
        self._tokens = []

    def __repr__(self) -> str:
        return (
            f"DockerProvider(image={self.image!r}, num_containers={self.num_containers}, "
            f"urls={self._urls})"
        )


def _remove_all(client: docker.DockerClient, ids: list[str]) -> None:
    for container_id in list(ids):
        try:
            client.api.remove_container(container_id, force=True)
        except Exception as exc:  # already gone, engine down: nothing more we can do
            if getattr(getattr(exc, "response", None), "status_code", None) != 404:
                logger.warning("could not remove container %s: %s", container_id[:12], exc)
        else:
            logger.info("docker server stopped: container %s removed", container_id[:12])
    ids.clear()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gc(*, everything: bool = False, client: docker.DockerClient | None = None) -> list[str]:
    """Remove leftover containers labelled by this package; return their ids.

    A container is a leftover when its owner process (``openenv-gym.owner``) no longer runs
    on this host; with ``everything=True`` every labelled container goes.

    Raises:
        ProviderError: No ``docker`` package (the message says how to install it) or no
            engine.
    """
    client = client or docker_client()  # without the package: ProviderError with the hint
    import docker

    removed: list[str] = []
    host = socket.gethostname()
    try:
        containers = client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"})
    except docker.errors.DockerException as exc:
        raise ProviderError(f"cannot list containers: {exc}") from exc
    for container in containers:
        labels = container.labels
        owner = labels.get(LABEL_OWNER, "")
        if not everything and (
            labels.get(LABEL_HOST) != host or (owner.isdigit() and _pid_alive(int(owner)))
        ):
            continue  # another machine's, or its owner still runs
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
        removed.append(container.id)
    return removed
