"""A watcher process that stops this process's local servers once it is gone, however it went.

A local server exits when its client's lifeline (its standard input) closes, and on Linux
also gets SIGTERM when the client dies (``PR_SET_PDEATHSIG``). Neither reaches a server
that is *stopped* (SIGSTOP, a debugger, a job-control stop): the end of its input waits
unread and the SIGTERM stays pending until it runs again, so it would stay behind for
good. The watcher covers that, and a server that does not exit when asked:

* :class:`Reaper` (in the client) starts one watcher process while any local server
  runs, and tells it each server's pid as it starts and once it is reaped; the watcher
  exits when the last one is reaped;
* the watcher (:func:`main`: detached, no child of the client, in a session of its own,
  so a terminal's Ctrl-C does not reach it) waits for the client to end: the end of its
  input (the client's pipe, close-on-exec and closed in children forked from Python) or
  the client's pid exiting (a pidfd: a child forked outside Python keeps the pipe). Then
  it sends every server still there SIGTERM and SIGCONT (to the server's process group:
  its own children too), waits up to :data:`GRACE` seconds for it to exit, and SIGKILLs
  the group of any that did not.

Servers are held by pidfd (Linux >= 5.3), so a pid reused after a server exited is never
signalled. Where there is no pidfd (not Linux), no watcher runs.

The watcher runs this file as a script (``python -I -S reaper.py``): it imports nothing
but the standard library, and starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time

__all__ = ["GRACE", "Reaper", "main"]

GRACE = 5.0
"""Seconds a server has to exit after its client is gone, before it is SIGKILLed."""

SUPPORTED = hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")
"""Whether the watcher can run here (Linux, Python >= 3.9)."""


class Reaper:
    """The client's side: one watcher process while any local server runs.

    Thread-safe. A process forked from this one must call :meth:`forget_all` (its copy
    of the pipe would otherwise keep the watcher waiting after this process ended).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None  # exits once the watcher forked
        self._pids: set[int] = set()

    def watch(self, pid: int) -> None:
        """Have the watcher stop server ``pid`` once this process is gone. Never raises."""
        if not SUPPORTED:
            return
        with self._lock:
            self._pids.add(pid)
            if self._proc is None or not self._send(f"+{pid}\n"):  # none yet, or it died
                self._end()
                self._proc = self._start()
                self._send("".join(f"+{known}\n" for known in sorted(self._pids)))

    def forget(self, pid: int) -> None:
        """Server ``pid`` was reaped: nothing to stop. The last one ends the watcher."""
        with self._lock:
            if pid not in self._pids:
                return
            self._pids.discard(pid)
            if not self._pids:  # no server left: the watcher exits at the end of its input
                self._end()
            else:
                self._send(f"-{pid}\n")

    def forget_all(self) -> None:
        """In a forked child: close the inherited pipe; the parent's watcher lives on."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        proc, self._proc = self._proc, None
        self._pids = set()
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()

    @staticmethod
    def _start() -> subprocess.Popen[bytes] | None:
        try:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid())],
                stdin=subprocess.PIPE,  # close-on-exec: no server inherits it
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is not for it
            )
        except OSError:
            return None

    def _send(self, lines: str) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(lines.encode())
            proc.stdin.flush()
        except (OSError, ValueError):  # the watcher is gone (EPIPE)
            return False
        return True

    def _end(self) -> None:
        """Close the pipe (the watcher exits) and reap the process that started it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(GRACE)  # it forked the watcher and exited long ago
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------- the watcher


def main(argv: list[str]) -> int:
    """The watcher: ``reaper.py CLIENT_PID``; reads ``+PID`` / ``-PID`` lines on stdin."""
    client = int(argv[0])
    try:
        client_fd = os.pidfd_open(client)
    except OSError:  # already gone: its servers got their SIGTERM
        return 0
    if os.getppid() != client:  # gone, and its pid already reused
        return 0
    if os.fork() > 0:  # the client reaps this process; the watcher goes on detached,
        os._exit(0)  # so it is no child of the client (and no leftover to its tests)
    servers: dict[int, int] = {}  # pid -> pidfd
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(client_fd, select.POLLIN)
    pending = b""
    ended = False
    while not ended:
        events = poller.poll()
        if any(fd == client_fd for fd, _ in events):  # the client exited: read what it
            os.set_blocking(0, False)  # said before it went, then stop its servers
            ended = True
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            data = b""
        if not data:
            ended = True  # the end of the pipe: the client is gone, or has no server left
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            _apply(line, client, servers)
    _stop(servers)
    return 0


def _apply(line: bytes, client: int, servers: dict[int, int]) -> None:
    if len(line) < 2 or not line[1:].isdigit():
        return
    pid = int(line[1:])
    if line[:1] == b"-":
        fd = servers.pop(pid, None)
        if fd is not None:
            os.close(fd)
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return
    if _parent(pid) != client:  # exited and the pid reused already: not ours
        os.close(fd)
        return
    servers[pid] = fd


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return -1


def _signal(pid: int, fd: int, sig: int) -> bool:
    """Signal the server's process group while it runs (its pid is then not reused)."""
    try:
        signal.pidfd_send_signal(fd, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)  # its own group (start_new_session): its children too
    with contextlib.suppress(OSError):
        signal.pidfd_send_signal(fd, sig)  # in case it left that group
    return True


def _stop(servers: dict[int, int]) -> None:
    alive = {pid: fd for pid, fd in servers.items() if _signal(pid, fd, signal.SIGTERM)}
    for pid, fd in alive.items():
        _signal(pid, fd, signal.SIGCONT)  # a stopped one runs again, and takes the SIGTERM
    deadline = time.monotonic() + GRACE
    while alive:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        poller = select.poll()
        for fd in alive.values():
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(left * 1000.0):
            alive = {p: f for p, f in alive.items() if f != fd}
    for pid, fd in alive.items():
        _signal(pid, fd, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
