"""Ctrl-C reaches the client only, and local servers never outlive it (issue 22, finding 4).

A terminal's Ctrl-C and a notebook's "interrupt kernel" signal the whole foreground
process group. Local servers run in a session of their own, so the client alone gets the
``KeyboardInterrupt``: it catches it and its envs go on. A server that is stopped when its
client is killed (its SIGTERM stays pending, its end of input unread) is woken and killed
by the watcher process (``openenv_gym.providers.reaper``).

Each client is a real subprocess in a process group of its own, signalled as a terminal
would; servers are real ``openenv-gym serve`` processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fault_support import counter_servers, detected, no_leftovers, wait_for, wait_gone  # noqa: F401

from openenv_gym.providers import LocalProvider

pytestmark = [
    pytest.mark.integration,
    pytest.mark.usefixtures("no_leftovers", "counter_servers"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, pidfds"),
]

if os.uname().machine not in ("x86_64", "aarch64"):  # see _POLLS
    pytestmark.append(pytest.mark.skip(reason="no table of poll system calls for this CPU"))

SOON = 60.0
"""Seconds a test waits for a line from its client (bounds a hang)."""

VECTOR_CLIENT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from openenv_gym_vector_envs import SLOW, SPEC, counter_codec
    from openenv_gym.vector import OpenEnvVectorEnv

    gate, protocol = sys.argv[1], sys.argv[2]
    envs = OpenEnvVectorEnv(
        SPEC, 64, codec=counter_codec(), num_servers=2, protocol=protocol,
        timeouts={"step": 120},
    )
    envs.reset(seed=0, options={"gate": gate, "episode_length": 100})
    print("servers", *envs._provider.pids, flush=True)
    try:
        print("stepping", flush=True)
        envs.step(np.full(64, SLOW))  # the servers hold it until the gate opens
        print("never interrupted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sys.stdin.readline()  # the test opens the gate, then says go
    obs, *_ = envs.step_wait()  # the interrupted step, finished
    counts = [int(np.asarray(obs).ravel()[0])]
    for _ in range(3):
        obs, *_ = envs.step(np.ones(64, dtype=np.int64))
        counts.append(int(np.asarray(obs).ravel()[0]))
    envs.close()
    print("stepped on", *counts, flush=True)
    """
)

SINGLE_CLIENT = textwrap.dedent(
    """
    import sys
    from openenv_gym_vector_envs import SLOW, SPEC, counter_codec
    from openenv_gym.env import OpenEnvEnv
    from openenv_gym.exceptions import ResetNeededError

    gate, protocol = sys.argv[1], sys.argv[2]
    env = OpenEnvEnv(SPEC, codec=counter_codec(), protocol=protocol, timeouts={"step": 120})
    env.reset(seed=0, options={"gate": gate, "episode_length": 100})
    print("servers", *env._provider.pids, flush=True)
    try:
        print("stepping", flush=True)
        env.step(SLOW)
        print("never interrupted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    sys.stdin.readline()
    try:
        env.step(1)
        print("stepped without a reset", flush=True)
    except ResetNeededError as exc:
        print("reset needed:", exc, flush=True)
    obs, _ = env.reset(seed=5)
    obs2, *_ = env.step(1)
    env.close()
    print("stepped on", obs, obs2, flush=True)
    """
)


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    """The counter env's SLOW gate; opened at teardown whatever happened."""
    path = tmp_path / "gate"
    yield path
    path.touch()


def _spawn(tmp_path: Path, source: str, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "client.py"
    script.write_text(source)
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job
    )


def _line(client: subprocess.Popen[str]) -> str:
    assert client.stdout is not None
    line = client.stdout.readline()  # a hang is the per-test timeout's
    assert line, f"the client ended early (status {client.wait()})"
    return line.strip()


def _running(pid: int) -> bool:
    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    return False


_POLLS = {  # the system calls a client blocks in while it waits for replies
    "x86_64": {7, 23, 232, 270, 271, 281, 441},  # poll select epoll_wait pselect6 ppoll ...
    "aarch64": {22, 72, 73, 441},  # epoll_pwait pselect6 ppoll epoll_pwait2
}


def _waiting_for_replies(pid: int) -> bool:
    """Whether ``pid``'s main thread is blocked in poll / select / epoll right now."""
    try:
        with open(f"/proc/{pid}/syscall", encoding="ascii") as syscall:
            number = syscall.read().split()[0]
    except (OSError, IndexError):
        return False
    return number.isdigit() and int(number) in _POLLS.get(os.uname().machine, set())


def _interrupt_the_group(client: subprocess.Popen[str]) -> None:
    """Once the client waits inside its step: Ctrl-C as a terminal sends it (SIGINT to
    the client's whole process group)."""
    assert _line(client) == "stepping"
    wait_for(lambda: _waiting_for_replies(client.pid), "the client waiting for the replies")
    os.killpg(client.pid, signal.SIGINT)


def _finish(client: subprocess.Popen[str], gate: Path) -> str:
    gate.touch()
    assert client.stdin is not None
    client.stdin.write("go\n")
    client.stdin.flush()
    return _line(client)


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_ctrl_c_during_a_vector_step_reaches_the_client_only(
    tmp_path: Path, gate: Path, protocol: str
) -> None:
    client = _spawn(tmp_path, VECTOR_CLIENT, str(gate), protocol)
    try:
        servers = [int(pid) for pid in _line(client).split()[1:]]
        assert len(servers) == 2
        _interrupt_the_group(client)
        assert _line(client) == "interrupted"
        assert all(_running(pid) for pid in servers), "Ctrl-C reached the servers"
        last = _finish(client, gate)
        # the interrupted step counted 0 -> 1 on every sub-env; then +1 per step
        assert last == "stepped on 1 2 3 4", last
        assert client.wait(SOON) == 0
        assert not wait_gone(set(servers)), "servers outlived their client"
    finally:
        if client.poll() is None:
            client.kill()
        client.wait()


@pytest.mark.parametrize("protocol", ["batch", "json"])
def test_ctrl_c_during_a_single_step_asks_for_a_reset_then_goes_on(
    tmp_path: Path, gate: Path, protocol: str
) -> None:
    client = _spawn(tmp_path, SINGLE_CLIENT, str(gate), protocol)
    try:
        servers = [int(pid) for pid in _line(client).split()[1:]]
        _interrupt_the_group(client)
        assert _line(client) == "interrupted"
        assert all(_running(pid) for pid in servers)
        said = _finish(client, gate)
        assert said.startswith("reset needed: the last call was interrupted"), said
        assert _line(client) == "stepped on 5 6"  # the new episode, clean
        assert client.wait(SOON) == 0
        assert not wait_gone(set(servers))
    finally:
        if client.poll() is None:
            client.kill()
        client.wait()


STOPPED_CLIENT = textwrap.dedent(
    """
    import time
    from openenv_gym.providers import LocalProvider

    provider = LocalProvider("echo", num_servers=3)
    provider.start()
    print(*provider.pids, flush=True)
    time.sleep(600)
    """
)


def test_servers_stopped_when_their_client_is_sigkilled_are_killed(tmp_path: Path) -> None:
    client = _spawn(tmp_path, STOPPED_CLIENT)
    servers: list[int] = []
    try:
        servers = [int(pid) for pid in _line(client).split()]
        for pid in servers:
            os.kill(pid, signal.SIGSTOP)
        os.kill(client.pid, signal.SIGKILL)
        killed = time.monotonic()
        client.wait(SOON)
        left = wait_gone(set(servers), 30.0)
        assert not left, f"stopped servers outlived their SIGKILLed client: {sorted(left)}"
        detected("stopped servers gone after their client's SIGKILL", killed)
        assert not wait_gone(_watchers(client.pid)), "the watcher outlived its work"
    finally:
        for pid in servers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if client.poll() is None:
            client.kill()
        client.wait()


def _watchers(client: int) -> set[int]:
    """The watcher processes (``providers/reaper.py``) of process ``client``."""
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline[-2:-1] and cmdline[-2].endswith("reaper.py") and cmdline[-1] == str(client):
            found.add(process.pid)
    return found


def test_closing_stops_a_stopped_server_and_the_watcher_ends_with_it() -> None:
    provider = LocalProvider("echo", num_servers=2)
    provider.start()
    pids = provider.pids
    watchers = _watchers(os.getpid())
    assert len(watchers) == 1  # one while any local server runs, detached (no child of ours)
    assert not watchers & {child.pid for child in psutil.Process().children(recursive=True)}
    os.kill(pids[0], signal.SIGSTOP)
    started = time.monotonic()
    provider.close()  # wakes the stopped one (SIGCONT): it reads the end of its input
    detected("close() of a provider with a stopped server", started)
    assert not wait_gone(set(pids))
    assert not wait_gone(watchers), "the watcher outlived the last server"
