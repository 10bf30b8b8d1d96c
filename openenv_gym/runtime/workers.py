"""The worker processes of a server: a pool of them, forked by a zygote, one instance each.

An environment class that is not marked ``SUPPORTS_CONCURRENT_SESSIONS`` never has two
instances alive in one process (OpenEnv's promise: such a server takes one session). The
server still batches: a :class:`WorkerPool` keeps up to ``max_workers`` worker processes,
forked by a zygote that imported the environment once (:mod:`openenv_gym.runtime.zygote`),
each hosting one instance at a time (:mod:`openenv_gym.runtime.remote`: the class the
runtime hosts in place of the real one).

* A :class:`Worker` answers one request at a time, in order; our end matches replies to
  requests in that order, on the server's event loop (never blocking it).
* A worker that dies (a crash, a kill) fails its pending calls with :class:`WorkerError`
  and leaves the pool.
* A worker whose instance is closed goes back to the pool (it hosts the next session, as
  OpenEnv's server hosts one session after another); one that does not close it within
  ``close_timeout`` is killed.
* Workers die with the server, however the server ends (the zygote watches its control
  socket, the workers their parent).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import pickle
import socket
import subprocess
import sys
import time
from typing import Any

from openenv_gym.exceptions import AppError, OpenEnvGymError
from openenv_gym.runtime.zygote import FRAME_LIMIT, pack, read_frame, send_frame

__all__ = [
    "DEFAULT_MAX_WORKERS",
    "Probe",
    "Worker",
    "WorkerError",
    "WorkerPool",
]

logger = logging.getLogger("openenv_gym.runtime")

DEFAULT_MAX_WORKERS = 32
"""Worker processes a server keeps at most (``--max-workers``): its session capacity."""

_HEAD = 4


class WorkerError(OpenEnvGymError):
    """The worker process of an instance is gone, or no worker could be had."""


class Probe:
    """What a worker found on making one instance (at start-up, before serving).

    Attributes:
        kind: The instance's class.
        concurrent: Its ``SUPPORTS_CONCURRENT_SESSIONS``.
        mcp: Whether it has an MCP client (an ``MCPEnvironment``).
        metadata: Its ``get_metadata()`` (None if it has none or it cannot be sent).
    """

    def __init__(self, found: dict[str, Any]) -> None:
        self.kind: type = found["kind"]
        self.concurrent: bool = found["concurrent"]
        self.mcp: bool = found["mcp"]
        self.metadata: Any = found["metadata"]


# ----------------------------------------------------------------------------- one worker


class Worker:
    """The server's end of one worker process: requests out, replies matched in order.

    Args:
        pool: The pool it belongs to.
        sock: Our end of its socket.
        pid: Its process id.
    """

    def __init__(self, pool: WorkerPool, sock: socket.socket, pid: int) -> None:
        self.pool = pool
        self.sock = sock
        self.pid = pid
        self.gone: str | None = None
        self._pending: collections.deque[asyncio.Future[Any]] = collections.deque()
        self._transport: asyncio.Transport | None = None
        self._opening: asyncio.Task[asyncio.Transport] | None = None
        self._dropped = False

    def call_now(self, request: tuple[Any, ...]) -> Any:
        """Send ``request`` and wait for its answer, blocking (start-up only)."""
        try:
            send_frame(self.sock, request)
            frame = read_frame(self.sock)
        except (OSError, ValueError, pickle.UnpicklingError) as exc:
            frame = None
            self.gone = f"failed: {exc}"
        if frame is None:
            self.gone = self.gone or "exited"
            raise WorkerError(f"worker process {self.pid} {self.gone}")
        return _unwrap(frame[0])

    async def call(self, request: tuple[Any, ...]) -> Any:
        """Send ``request``; its answer (the worker's exception raised here)."""
        if self.gone is not None:
            raise WorkerError(f"worker process {self.pid} {self.gone}")
        transport = self._transport or await self._open()
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(reply)
        transport.write(pack(request))
        return _unwrap(await reply)

    async def _open(self) -> asyncio.Transport:
        """Our transport over the worker's socket, made once (concurrent callers share it)."""
        if self._opening is None:
            self._opening = asyncio.get_running_loop().create_task(self._connect())
        return await asyncio.shield(self._opening)

    async def _connect(self) -> asyncio.Transport:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_unix_connection(lambda: _Replies(self), sock=self.sock)
        self._transport = transport
        return transport

    def _replied(self, reply: Any) -> None:
        """The next reply, for the oldest request (replies come in order)."""
        if not self._pending:
            self._lost("sent a reply nobody asked for")
            return
        waiter = self._pending.popleft()
        if not waiter.done():
            waiter.set_result(reply)

    def _lost(self, why: str) -> None:
        if self.gone is None:
            self.gone = why
            log = logger.debug if self.pool.closed else logger.warning
            log("worker process %d %s", self.pid, why)
        error = WorkerError(f"worker process {self.pid} {self.gone}")
        while self._pending:
            waiter = self._pending.popleft()
            if not waiter.done():
                waiter.set_exception(error)
        if self._dropped:  # again, as the transport we closed reports its end
            return
        self._dropped = True
        self.pool.dropped(self)
        self.shut()

    def shut(self) -> None:
        """Close our end (the worker then exits) and ask the zygote to kill it."""
        if self.gone is None:
            self.gone = "was stopped"
        self.hang_up()
        self.pool.kill(self.pid)

    def hang_up(self) -> None:
        """Close our end of the socket (the worker exits when it sees that)."""
        with contextlib.suppress(Exception):  # the loop may be closed already
            if self._transport is not None:
                self._transport.close()
            else:
                self.sock.close()


class _Replies(asyncio.Protocol):
    """Our end of a worker's socket: frames (length, pickle) parsed as bytes arrive.

    A protocol rather than streams: a reply is matched where its last byte is read, with
    no task to wake per read (a step of a worker-hosted instance is one request and one
    reply; streams cost a wake-up and two awaits per reply).
    """

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.buffer = bytearray()
        self.why = "exited"

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= _HEAD:
            size = int.from_bytes(buffer[:_HEAD], "big")
            if size > FRAME_LIMIT:
                self._fail(f"sent a frame of {size} bytes")
                return
            if len(buffer) < _HEAD + size:
                return
            try:
                reply = pickle.loads(buffer[_HEAD : _HEAD + size])
            except Exception as exc:  # a reply that does not unpickle: the stream is lost
                self._fail(f"sent a reply that cannot be read ({exc!r})")
                return
            del buffer[: _HEAD + size]
            self.worker._replied(reply)

    def _fail(self, why: str) -> None:
        self.why = why
        self.buffer.clear()
        self.worker._lost(why)

    def connection_lost(self, exc: Exception | None) -> None:
        self.worker._lost(self.why)


def _unwrap(reply: Any) -> Any:
    status, value = reply
    if status == "ok":
        return value
    raise value


# ----------------------------------------------------------------------------- the pool


class WorkerPool:
    """Worker processes for one environment, forked by a zygote on demand.

    Args:
        target: What the zygote imports: ``{"app": AppTarget.as_dict()}`` or
            ``{"env": "module:Class"}``.
        max_workers: Most worker processes alive at once.
        start_timeout: Seconds the zygote may take to import the environment.
        close_timeout: Seconds a worker may take to close an instance before it is killed.

    Next: :meth:`start` (blocking, before serving), then :meth:`lease` / :meth:`retire`
    on the server's loop, and :meth:`close` when the server stops.
    """

    def __init__(
        self,
        target: dict[str, Any],
        max_workers: int = DEFAULT_MAX_WORKERS,
        *,
        start_timeout: float = 600.0,
        close_timeout: float = 10.0,
        lease_timeout: float = 60.0,
    ) -> None:
        self.target = target
        self.max_workers = max_workers
        self.start_timeout = start_timeout
        self.close_timeout = close_timeout
        self.lease_timeout = lease_timeout
        self.workers: set[Worker] = set()
        self._idle: list[Worker] = []
        self._zygote: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._control_lock: asyncio.Lock | None = None
        self._changed: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    # -------------------------------------------------------------- start-up (blocking)
    def start(self) -> Probe:
        """Start the zygote, fork one worker and make one instance there; what it found.

        The worker stays in the pool. Blocks (call it before serving).

        Raises:
            AppError: The zygote could not import the environment.
            WorkerError: The zygote or the worker died, or did not answer in time.
        """
        ours, theirs = socket.socketpair()
        command = [
            sys.executable,
            "-c",
            "import sys; from openenv_gym.runtime.zygote import main; sys.exit(main())",
            json.dumps(self.target),
            str(theirs.fileno()),
            logging.getLevelName(logger.getEffectiveLevel()),
        ]
        try:
            self._zygote = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(),
                pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        except OSError as exc:
            raise WorkerError(f"cannot start the worker zygote: {exc}") from exc
        finally:
            theirs.close()
        self._control = ours
        try:
            ours.settimeout(self.start_timeout)
            frame = self._read_control()
            if frame[0] == "error":
                raise AppError(f"the worker zygote could not load the environment: {frame[1]}")
            worker = self._fork_now()
            probe = Probe(worker.call_now(("probe",)))
            ours.settimeout(None)
        except BaseException:
            self.close()
            raise
        self._idle.append(worker)
        logger.info(
            "worker zygote %d ready for %s (up to %d workers)",
            self._zygote.pid,
            frame[1],
            self.max_workers,
        )
        return probe

    def _read_control(self) -> Any:
        assert self._control is not None
        try:
            frame = read_frame(self._control)
        except (OSError, ValueError, pickle.UnpicklingError) as exc:
            raise WorkerError(
                f"the worker zygote did not answer (within {self.start_timeout:g} s "
                f"at start-up): {exc}"
            ) from exc
        if frame is None:
            status = self._zygote.wait() if self._zygote is not None else None
            raise WorkerError(f"the worker zygote exited (status {status}) before answering")
        return frame[0]

    def _fork_now(self) -> Worker:
        assert self._control is not None
        ours, theirs = socket.socketpair()
        try:
            send_frame(self._control, ("fork",), [theirs.fileno()])
        finally:
            theirs.close()
        reply = self._read_control()
        worker = Worker(self, ours, reply[1])
        self.workers.add(worker)
        return worker

    # -------------------------------------------------------------- serving (the loop)
    async def lease(self) -> Worker:
        """A worker for one instance: an idle one, a new one, or the next one freed.

        Raises:
            WorkerError: The pool is closed, the zygote is gone, or no worker was freed
                within ``lease_timeout``.
        """
        deadline = time.monotonic() + self.lease_timeout
        while True:
            if self.closed:
                raise WorkerError("the worker pool is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.gone is None:
                    return worker
            if len(self.workers) < self.max_workers:
                return await self._fork()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerError(
                    f"all {self.max_workers} worker processes are busy (--max-workers)"
                )
            changed = self._changed = self._changed or asyncio.Event()
            changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)

    async def _fork(self) -> Worker:
        control = self._control
        if control is None:
            raise WorkerError("the worker pool is not started")
        lock = self._control_lock = self._control_lock or asyncio.Lock()
        async with lock:
            loop = asyncio.get_running_loop()
            ours, theirs = socket.socketpair()
            try:
                data = pack(("fork",))
                control.setblocking(False)
                await _send_with_fd(loop, control, data, theirs.fileno())
                head = await _recv_exactly(loop, control, _HEAD)
                body = await _recv_exactly(loop, control, int.from_bytes(head, "big"))
            except (OSError, EOFError) as exc:
                ours.close()
                raise WorkerError(f"the worker zygote is gone ({exc!r})") from exc
            finally:
                theirs.close()
        worker = Worker(self, ours, pickle.loads(body)[1])
        self.workers.add(worker)
        return worker

    def retire(self, worker: Worker) -> None:
        """Close the worker's instance, then put it back (or kill it if it does not answer)."""
        task = asyncio.get_running_loop().create_task(self._retire(worker))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retire(self, worker: Worker) -> None:
        try:
            await asyncio.wait_for(worker.call(("close",)), self.close_timeout)
        except Exception as exc:
            if worker.gone is None:
                logger.warning("worker process %d did not close its instance: %r", worker.pid, exc)
                worker.shut()
                self.dropped(worker)
            return
        if self.closed:
            worker.shut()
            return
        self._idle.append(worker)
        self._signal()

    def dropped(self, worker: Worker) -> None:
        """``worker`` is gone: it no longer counts against ``max_workers``."""
        self.workers.discard(worker)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        self._signal()

    def _signal(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def kill(self, pid: int) -> None:
        """Ask the zygote to SIGKILL worker ``pid`` (only if it is its live child)."""
        if self._control is None or self.closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # start-up: nothing else uses the socket
            with contextlib.suppress(OSError):
                send_frame(self._control, ("kill", pid))
            return
        task = loop.create_task(self._kill(pid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _kill(self, pid: int) -> None:
        lock = self._control_lock = self._control_lock or asyncio.Lock()
        async with lock:
            control = self._control
            if control is not None:
                with contextlib.suppress(OSError):
                    control.setblocking(False)
                    await asyncio.get_running_loop().sock_sendall(control, pack(("kill", pid)))

    def close(self) -> None:
        """Stop every worker and the zygote (blocks until the zygote is gone). Idempotent."""
        self.closed = True
        for task in list(self._tasks):
            task.cancel()
        control, self._control = self._control, None
        if control is not None:
            control.close()  # the zygote kills its workers, then exits
        for worker in list(self.workers):
            worker.hang_up()
        self.workers.clear()
        self._idle.clear()
        zygote = self._zygote
        if zygote is not None and zygote.poll() is None:
            try:
                zygote.wait(10.0)
            except subprocess.TimeoutExpired:
                zygote.kill()
                zygote.wait()


async def _send_with_fd(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, data: bytes, fd: int
) -> None:
    """Send ``data`` with ``fd`` attached (``SCM_RIGHTS``) on a non-blocking socket."""
    while True:
        try:
            sent = socket.send_fds(sock, [data], [fd])
            break
        except BlockingIOError:
            await _writable(loop, sock)
    if sent < len(data):
        await loop.sock_sendall(sock, data[sent:])


async def _writable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_writer(sock.fileno())


async def _recv_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await loop.sock_recv(sock, size - len(data))
        if not chunk:
            raise EOFError("end of stream")
        data += chunk
    return data
