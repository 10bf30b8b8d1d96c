"""Local servers die with their client, even when the client forked before it was killed.

A forked child inherits every file descriptor, the write end of the server's stdin
lifeline too: if it kept that open, a SIGKILLed client's server would live as long as the
child. The local provider closes the lifeline in children forked from Python, and (Linux)
the server also gets SIGTERM when its client dies (``PR_SET_PDEATHSIG``), which covers a
child forked outside Python, which keeps the pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest
from fault_support import HANG, detected, no_leftovers, wait_gone  # noqa: F401

from openenv_gym._http import get_json
from openenv_gym.exceptions import OpenEnvGymError
from openenv_gym.providers import LocalProvider

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leftovers")]

CLIENT = textwrap.dedent(
    """
    import ctypes, os, sys, time
    from openenv_gym.providers import LocalProvider

    provider = LocalProvider("echo")
    provider.start()
    how = sys.argv[1]
    if how == "python":
        child = os.fork()  # runs the at-fork hooks (multiprocessing's "fork" does too)
    elif how == "libc":
        child = ctypes.PyDLL(None).fork()  # no Python hooks: the child keeps every fd
    else:
        child = -1
    if child == 0:
        time.sleep(600)
        os._exit(0)
    print(provider.pids[0], child, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("how", ["no-fork", "python", "libc"])
def test_server_exits_when_its_forked_client_is_sigkilled(tmp_path: Path, how: str) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    client = subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert client.stdout is not None
        server_pid, child = (int(word) for word in client.stdout.readline().split())
        assert psutil.pid_exists(server_pid)
        if how != "no-fork":
            assert psutil.Process(child).ppid() == client.pid  # the forked child sleeps
        os.kill(client.pid, signal.SIGKILL)
        killed = time.monotonic()
        client.wait(HANG)
        assert not wait_gone({server_pid}, HANG), f"the server outlived its client ({how})"
        detected(f"server exit after its client's SIGKILL ({how})", killed)
        if how != "no-fork":
            assert psutil.pid_exists(child)  # the child was alive all along
    finally:
        if child > 0:
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
        if client.poll() is None:
            client.kill()
        client.wait()
        if client.stdout is not None:
            client.stdout.close()


def serves(provider: LocalProvider, times: int = 2) -> bool:
    """Whether server 0 runs and answers ``/health`` ``times`` times in a row.

    A server told to stop (SIGTERM, its stdin closed) sets its stop event, which its loop
    handles before it reads a new connection: the second round trip, begun after the
    first ended, no longer gets an answer.
    """
    url = provider.start()[0]
    headers = {"Authorization": f"Bearer {provider.token(0)}"}
    for _ in range(times):
        try:
            if get_json(f"{url}/health", 5.0, headers=headers)[0] != 200:
                return False
        except OpenEnvGymError:
            return False
    return provider.alive(0)


def _arm_death_signal() -> None:  # pragma: no cover - runs in the child, before exec
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_started_from_a_short_lived_thread_outlives_the_thread() -> None:
    """The kernel sends a child's death signal when the *thread* that forked it ends.

    The worker starts a server through the provider and, the same way by hand, a witness
    process armed to die (SIGKILL) when the worker ends. Once the witness is dead the
    kernel has sent the worker's children their death signals: a server armed to that
    thread would have had its SIGTERM by then. It must be alive and serving.
    """
    made: list[LocalProvider] = []
    witnesses: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        provider = LocalProvider("echo")
        provider.start()
        made.append(provider)
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        witnesses.append(subprocess.Popen(sleeper, preexec_fn=_arm_death_signal))

    worker = threading.Thread(target=start)
    worker.start()
    worker.join(HANG)
    (provider,) = made
    (witness,) = witnesses
    try:
        assert witness.wait(HANG) == -signal.SIGKILL  # the worker's death signals went out
        assert serves(provider)
    finally:
        if witness.poll() is None:
            witness.kill()
            witness.wait()
        provider.close()


def test_a_forked_child_that_closes_the_provider_leaves_the_server_alone() -> None:
    provider = LocalProvider("echo")
    try:
        provider.start()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            code = 0
            try:
                provider.close()  # not its server: it only drops its copies of the pipes
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        # whatever the child did is done; had it stopped the server, two round trips in a
        # row would not both be answered
        assert serves(provider)
    finally:
        provider.close()
