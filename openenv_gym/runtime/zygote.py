"""The processes behind an environment that is not marked concurrent: a zygote and its workers.

An OpenEnv environment class that does not set ``SUPPORTS_CONCURRENT_SESSIONS = True`` may
keep state per process (module globals, a C library's singleton), so OpenEnv's server
hosts one session per process. Our runtime keeps that promise and still batches: each
session lives in a worker process of its own, and the server talks to its workers
(:mod:`openenv_gym.runtime.workers`).

The **zygote** (:func:`main`, a process of its own) imports the app module
once, as the server did (:func:`openenv_gym.runtime.apps.load_app`), and then only forks:
each worker starts with the module imported, in a few milliseconds. It makes no
environment instance itself, so nothing of one is inherited.

A **worker** hosts at most one instance at a time, for one session after another, and
answers requests in order. Both speak frames of ``u32 length + pickle`` over Unix stream
sockets; the worker's socket comes to the zygote with its ``fork`` request
(``SCM_RIGHTS``). Only the server's own processes are on either end: the frames are
trusted, and never reach a network.

No orphans: the zygote exits when its control socket closes (the server exited, however
it did), killing its workers first; a worker is killed (``PR_SET_PDEATHSIG``) when the
zygote dies, and exits when its own socket closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import inspect
import json
import logging
import os
import pickle
import select
import signal
import socket
import struct
import sys
from collections.abc import Callable
from typing import Any

from openenv_gym.runtime.mcp import hold_open

__all__ = [
    "FRAME_LIMIT",
    "RemoteError",
    "main",
    "pack",
    "read_frame",
    "send_frame",
]

logger = logging.getLogger("openenv_gym.runtime")

FRAME_LIMIT = 1 << 30
"""Largest frame between the server and its zygote or workers (1 GiB: a bug, not input)."""

_HEAD = struct.Struct("!I")
_REAP_EVERY = 1.0
_PR_SET_PDEATHSIG = 1


class RemoteError(Exception):
    """An exception raised in a worker that pickle cannot carry: its type and message.

    Its ``str`` is the original's message, so error replies read the same as in process.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteError, (self.kind, str(self)))


# ----------------------------------------------------------------------------- frames


def pack(value: Any) -> bytes:
    """One frame: length, then ``value`` pickled."""
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(body)) + body


def send_frame(sock: socket.socket, value: Any, fds: list[int] | None = None) -> None:
    """Send one frame (blocking), with file descriptors if given."""
    data = pack(value)
    if fds:
        sent = socket.send_fds(sock, [data], fds)
        data = data[sent:]
    if data:
        sock.sendall(data)


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, need = [], size
    while need:
        chunk = sock.recv(min(need, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        need -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket, *, fds: bool = True) -> tuple[Any, list[int]] | None:
    """Read one frame (blocking) and any descriptors sent with it; None at end of stream.

    ``fds=False``: a socket that never carries descriptors (a worker's), read with plain
    ``recv`` (no ancillary buffer per frame).

    Raises:
        ValueError: The frame is over :data:`FRAME_LIMIT`.
    """
    if fds:
        head, received, _, _ = socket.recv_fds(sock, _HEAD.size, 4)
    else:
        head, received = sock.recv(_HEAD.size), []
    if not head:
        return None
    if len(head) < _HEAD.size:
        rest = _recv_exactly(sock, _HEAD.size - len(head))
        if rest is None:
            return None
        head += rest
    (size,) = _HEAD.unpack(head)
    if size > FRAME_LIMIT:
        raise ValueError(f"frame of {size} bytes")
    body = _recv_exactly(sock, size)
    if body is None:
        return None
    return pickle.loads(body), list(received)


def _carried(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a :class:`RemoteError` standing for it."""
    try:
        pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return RemoteError(type(exc).__name__, str(exc))
    return exc


# ----------------------------------------------------------------------------- zygote


def _death_signal(signum: int) -> None:
    """Ask Linux for ``signum`` when the parent (the zygote) ends."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)


class _Zygote:
    """Forks workers on request; reaps them; kills them all when the server goes."""

    def __init__(self, control: socket.socket, factory: Callable[[], Any]) -> None:
        self.control = control
        self.factory = factory
        self.children: set[int] = set()

    def serve(self) -> None:
        while True:
            ready, _, _ = select.select([self.control], [], [], _REAP_EVERY)
            self._reap()
            if not ready:
                continue
            try:
                frame = read_frame(self.control)
            except (OSError, ValueError, pickle.UnpicklingError):
                frame = None
            if frame is None:
                return  # the server is gone
            request, fds = frame
            self._answer(request, fds)

    def _answer(self, request: Any, fds: list[int]) -> None:
        verb = request[0] if isinstance(request, tuple) and request else None
        if verb == "fork" and len(fds) == 1:
            send_frame(self.control, ("forked", self._fork(fds[0])))
        elif verb == "kill":
            pid = request[1]
            if pid in self.children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        else:
            for fd in fds:
                os.close(fd)

    def _fork(self, fd: int) -> int:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            status = 1
            try:
                _death_signal(signal.SIGKILL)
                if os.getppid() != parent:  # the zygote died before the signal was armed
                    os._exit(1)
                self.control.close()
                status = _Worker(socket.socket(fileno=fd), self.factory).run()
            finally:
                os._exit(status)
        os.close(fd)
        self.children.add(pid)
        return pid

    def _reap(self) -> None:
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.discard(pid)

    def kill_all(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.children.clear()


# ----------------------------------------------------------------------------- worker


class _Worker:
    """One instance at a time, requests answered in order, on a loop of its own.

    Requests (tuples, the verb first) and what they answer (``("ok", value)`` or
    ``("err", exception)``):

    * ``("create",)``: a new instance (an open one is closed first) -> its state;
    * ``("reset", kwargs)`` / ``("step", action, kwargs)`` -> ``(observation, state)``,
      where state is the instance's ``state`` after the call (or the exception reading
      it raised);
    * ``("close",)``: close the instance -> None;
    * ``("probe",)``: make an instance, read its metadata and class, close it;
    * ``("mcp_enter",)`` / ``("mcp_exit",)``: hold the instance's MCP session open, or
      not; ``("tools", "list")`` / ``("tools", "call", name, arguments)``: the MCP
      client's ``list_tools()`` / ``call_tool(...)`` (a session must be held).
    """

    def __init__(self, sock: socket.socket, factory: Callable[[], Any]) -> None:
        self.sock = sock
        self.factory = factory
        self.env: Any = None
        self.awaits: dict[str, bool] = {}
        self.mcp_exit: asyncio.Event | None = None
        self.mcp_task: asyncio.Task[None] | None = None

    def run(self) -> int:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's Ctrl-C is the server's
        loop = asyncio.new_event_loop()
        try:
            self._serve(loop)
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(self._release_mcp())
            self._close_env()
            loop.close()
        return 0

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        """Requests in order, read blocking: a loop runs only for a call that awaits.

        A sync ``step`` / ``reset`` is called here, with no event loop turn (most of what a
        worker costs per step is the round trip); a coroutine (an MCP tool call, the
        class's own ``step_async``) runs on ``loop``, where a held MCP session lives on
        between requests.
        """
        sock = self.sock
        while True:
            try:
                frame = read_frame(sock, fds=False)
            except (OSError, ValueError, pickle.UnpicklingError):
                return  # the server is gone (or mad)
            if frame is None:
                return
            request = frame[0]
            try:
                reply: tuple[str, Any] = ("ok", self._answer_now(request, loop))
            except Exception as exc:
                reply = ("err", _carried(exc))
            try:
                data = pack(reply)
            except Exception as exc:
                data = pack(("err", RemoteError(type(exc).__name__, f"cannot send reply: {exc}")))
            try:
                sock.sendall(data)
            except OSError:
                return

    def _answer_now(self, request: tuple[Any, ...], loop: asyncio.AbstractEventLoop) -> Any:
        verb = request[0]
        if verb in ("step", "reset") and not self.awaits.get(verb + "_async"):
            env = self._env()
            if verb == "step":
                return self._with_state(env.step(request[1], **request[2]))
            return self._with_state(env.reset(**request[1]))
        return loop.run_until_complete(self._answer(request))

    async def _answer(self, request: tuple[Any, ...]) -> Any:
        verb = request[0]
        if verb == "step":
            return self._with_state(await self._call("step", request[1], **request[2]))
        if verb == "reset":
            return self._with_state(await self._call("reset", **request[1]))
        if verb == "tools":
            return await self._tools(request[1:])
        if verb == "create":
            await self._create()
            return self._state()
        if verb == "close":
            await self._release_mcp()
            self._close_env()
            return None
        if verb == "mcp_enter":
            return await self._hold_mcp()
        if verb == "mcp_exit":
            return await self._release_mcp()
        if verb == "probe":
            return await self._probe()
        raise ValueError(f"unknown request {verb!r}")

    async def _create(self) -> None:
        await self._release_mcp()
        self._close_env()
        env = self.factory()
        self.env = env
        kind = type(env)
        self.awaits = {name: _own_coroutine(kind, name) for name in ("step_async", "reset_async")}

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        env = self._env()
        if self.awaits.get(name + "_async"):
            return await getattr(env, name + "_async")(*args, **kwargs)
        return getattr(env, name)(*args, **kwargs)

    def _env(self) -> Any:
        if self.env is None:
            raise RuntimeError("no environment instance in this worker")
        return self.env

    def _state(self) -> Any:
        try:
            return self._env().state
        except Exception as exc:
            return _carried(exc)

    def _with_state(self, observation: Any) -> tuple[Any, Any]:
        return observation, self._state()

    async def _probe(self) -> dict[str, Any]:
        await self._create()
        env = self.env
        try:
            getter = getattr(env, "get_metadata", None)
            metadata = getter() if callable(getter) else None
            try:
                pickle.dumps(metadata)
            except Exception:
                metadata = None
            return {
                "kind": type(env),
                "concurrent": bool(getattr(type(env), "SUPPORTS_CONCURRENT_SESSIONS", False)),
                "mcp": getattr(env, "mcp_client", None) is not None,
                "metadata": metadata,
            }
        finally:
            self._close_env()

    async def _hold_mcp(self) -> None:
        env = self._env()
        opener = getattr(env, "mcp_session", None)
        if not callable(opener):
            client = env.mcp_client
            opener = lambda: client  # noqa: E731 - FastMCP's client is its own context
        entered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        leave = self.mcp_exit = asyncio.Event()
        self.mcp_task = asyncio.get_running_loop().create_task(hold_open(opener, entered, leave))
        await entered

    async def _release_mcp(self) -> None:
        task, leave = self.mcp_task, self.mcp_exit
        self.mcp_task = self.mcp_exit = None
        if task is None or leave is None:
            return
        leave.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10.0)

    async def _tools(self, request: tuple[Any, ...]) -> Any:
        client = self._env().mcp_client
        if request[0] == "list":
            return await client.list_tools()
        _, name, arguments = request
        return await client.call_tool(name=name, arguments=arguments)

    def _close_env(self) -> None:
        env, self.env = self.env, None
        close = getattr(env, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                logger.warning("environment close() raised", exc_info=True)


def _own_coroutine(kind: type, name: str) -> bool:
    """Whether ``kind`` has a coroutine ``name`` of its own, not OpenEnv's base class's.

    OpenEnv's server awaits an environment's own ``step_async`` / ``reset_async`` (an MCP
    environment's calls its tools); the base class's only call ``step`` / ``reset``.
    """
    method = getattr(kind, name, None)
    if not inspect.iscoroutinefunction(method):
        return False
    owner = next((k for k in kind.__mro__ if name in vars(k)), None)
    return owner is not None and not (
        owner.__name__ == "Environment" and owner.__module__.startswith("openenv.")
    )


# ----------------------------------------------------------------------------- entry


def main(argv: list[str] | None = None) -> int:
    """The zygote's entry: ``main([TARGET_JSON, CONTROL_FD, LOG_LEVEL])``: import, then fork.

    ``TARGET_JSON`` is ``{"app": AppTarget.as_dict()}`` or ``{"env": "module:Class"}``.
    Answers its control socket first with ``("ready", name)`` once the environment is
    imported (or ``("error", message)``), then serves ``fork`` and ``kill`` requests
    until the socket closes. Started with ``python -c`` (not ``-m``), so that the classes
    of this module pickle under their own name.
    """
    from openenv_gym.runtime.apps import AppTarget, load_app
    from openenv_gym.runtime.loader import load_env

    args = sys.argv[1:] if argv is None else argv
    target = json.loads(args[0])
    control = socket.socket(fileno=int(args[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when we go
    logging.basicConfig(level=args[2] if len(args) > 2 else "WARNING")
    try:
        if "app" in target:
            app_target = AppTarget.from_dict(target["app"])
            app_target.enter()
            app, _ = load_app(app_target)
            factory, name = app.env, app.name
        else:
            factory, name = load_env(target["env"]), target["env"]
    except Exception as exc:
        send_frame(control, ("error", f"{type(exc).__name__}: {exc}"))
        return 1
    send_frame(control, ("ready", name))
    zygote = _Zygote(control, factory)
    try:
        zygote.serve()
    finally:
        zygote.kill_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
