"""Waiting until a thread is blocked inside the transport (not a test module).

A test of "interrupt a blocked call" must interrupt a call that is blocked, not one that
has not started yet (which works too, and tests less). The call runs on a thread; this
waits until that thread sleeps in the kernel with :mod:`openenv_gym.transport` code at the
top of its Python stack (below any standard-library frames): blocked in ``poll``/``select``
(or on a lock) inside the transport. A deadline only stops a hang.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
import time
from pathlib import Path

__all__ = ["wait_until_blocked"]

TRANSPORT = str(Path("openenv_gym") / "transport")


def _sleeping(native_id: int) -> bool:
    """Whether the thread sleeps in the kernel (state S or D in /proc)."""
    try:
        with open(f"/proc/self/task/{native_id}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state in ("S", "D")


STDLIB = sysconfig.get_paths()["stdlib"]


def _in_transport(ident: int) -> bool:
    """Whether the thread's innermost frame outside the standard library (``selectors``,
    ``threading``...) runs transport code."""
    frame = sys._current_frames().get(ident)
    while frame is not None and frame.f_code.co_filename.startswith(STDLIB):
        frame = frame.f_back
    return frame is not None and TRANSPORT in frame.f_code.co_filename


def wait_until_blocked(thread: threading.Thread, within: float = 30.0) -> None:
    """Return once ``thread`` is blocked inside the transport; fail after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        ident, native = thread.ident, thread.native_id
        if ident is not None and native is not None and _in_transport(ident) and _sleeping(native):
            return
        if not thread.is_alive() or time.monotonic() > deadline:
            raise AssertionError("the call never blocked in the transport")
        time.sleep(0.005)
