"""A server on a thread of its own, for a process that does other things (a Ray actor).

``openenv-gym serve`` owns its process and its event loop. A Ray actor owns neither: Ray
calls the actor's methods on a thread of its own, so the server runs on a second thread
with its own loop (uvloop unless ``OPENENV_GYM_NO_UVLOOP`` is set), and dies with the
process when the actor is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable

from openenv_gym.config import env_flag
from openenv_gym.exceptions import OpenEnvGymError
from openenv_gym.runtime.apps import AppTarget
from openenv_gym.runtime.serving import DEFAULT_MAX_WORKERS, host
from openenv_gym.runtime.settings import ServerConfig

__all__ = ["ServerThread"]

logger = logging.getLogger("openenv_gym.runtime")


def _new_loop() -> asyncio.AbstractEventLoop:
    if not env_flag("OPENENV_GYM_NO_UVLOOP"):
        with contextlib.suppress(ImportError):
            import uvloop

            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def _nothing() -> None:
    return None


class ServerThread:
    """One :class:`~openenv_gym.runtime.app.EnvServer` serving on a daemon thread.

    Args:
        spec: A built-in server name (``wordle``) or ``package.module:Class`` (None with
            ``app``).
        config: Bind address, port, token and limits.
        app: An OpenEnv app module to host instead (:mod:`openenv_gym.runtime.apps`):
            ``MODULE:ATTR`` or its :class:`~openenv_gym.runtime.apps.AppTarget`.
        app_dir: An OpenEnv env directory to host instead; it becomes this process's
            working directory, as upstream's ``cd /app/env``.
        concurrent: Host every session in this process, whatever the class says.
        max_workers: Most worker processes for a class not marked concurrent
            (:mod:`openenv_gym.runtime.serving`).

    The environment is loaded and built once in the constructor (so a bad ``spec``
    fails there; worker processes, if any, start there too). Next: :meth:`start`, then
    :meth:`stop`.
    """

    def __init__(
        self,
        spec: str | None,
        config: ServerConfig,
        *,
        app: AppTarget | str | None = None,
        app_dir: str | os.PathLike[str] | None = None,
        concurrent: bool = False,
        max_workers: int = DEFAULT_MAX_WORKERS,
    ) -> None:
        if isinstance(app, str):
            app = AppTarget.parse(app)
        if app_dir is not None:
            app = AppTarget.from_dir(app_dir)
            app.enter()
        self._hosted = host(
            config,
            env=None if app is not None else spec,
            app=app,
            concurrent=concurrent,
            max_workers=max_workers,
        )
        self.server = self._hosted.server
        self.spec = self._hosted.spec
        self._thread: threading.Thread | None = None
        self._bound = threading.Event()
        self._error: Exception | None = None
        self._stop: Callable[[], object] = _nothing

    def start(self, timeout: float = 30.0) -> str:
        """Bind and serve on the thread; return the URL once the socket listens.

        Raises:
            OpenEnvGymError: The address cannot be bound (or not within ``timeout``).
        """
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"openenv-gym-server-{self.spec}", daemon=True
            )
            self._thread.start()
        if not self._bound.wait(timeout):
            raise OpenEnvGymError(f"{self.spec} server did not bind within {timeout} s")
        if self._error is not None:
            config = self.server.config
            self._hosted.close_workers()
            raise OpenEnvGymError(
                f"cannot listen on {config.host}:{config.port}: {self._error}"
            ) from self._error
        return self.server.url

    def _run(self) -> None:
        loop = _new_loop()
        try:
            loop.run_until_complete(self._serve(loop))
        finally:
            loop.close()

    async def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        stopped = asyncio.Event()
        self._stop = lambda: loop.call_soon_threadsafe(stopped.set)
        try:
            await self.server.start()
        except Exception as exc:
            self._error = exc
            return
        finally:
            self._bound.set()
        await stopped.wait()
        await self._hosted.aclose()

    @property
    def url(self) -> str:
        """The base URL (after :meth:`start`)."""
        return self.server.url

    def stop(self, timeout: float = 10.0) -> None:
        """Close every connection and stop the thread. Idempotent."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._hosted.close_workers()
            return
        with contextlib.suppress(RuntimeError):  # the loop closed in the meantime
            self._stop()
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("%s server did not stop within %s s", self.spec, timeout)
        self._hosted.close_workers()
