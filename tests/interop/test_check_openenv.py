"""``openenv-gym check`` against an app made by OpenEnv's own ``create_app``, under uvicorn.

Self-contained: the app is written to a file and run by this interpreter (which has
openenv) as a subprocess that prints its URL, serves until its standard input closes,
and is reaped by the test.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from openenv_gym.check import CHECK_NAMES, Status, check_server
from openenv_gym.cli import main

pytest.importorskip("openenv")

pytestmark = pytest.mark.openenv

APP = textwrap.dedent(
    '''
    """A message env built on OpenEnv's base classes, served by OpenEnv's create_app."""

    import inspect
    import socket
    import sys
    import threading

    import uvicorn
    from openenv.core.env_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State


    class MessageAction(Action):
        message: str


    class MessageObservation(Observation):
        echoed: str = ""


    class MessageEnv(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self):
            super().__init__()
            self._state = State(episode_id=None, step_count=0)

        def reset(self, seed=None, episode_id=None, **kwargs):
            self._state = State(episode_id=episode_id, step_count=0)
            return MessageObservation(echoed=f"seed {seed}", reward=0.0, done=False)

        def step(self, action, timeout_s=None, **kwargs):
            self._state.step_count += 1
            return MessageObservation(echoed=action.message, reward=1.0, done=False)

        @property
        def state(self):
            return self._state


    kwargs = {"max_concurrent_envs": int(sys.argv[1])}
    if "env_name" in inspect.signature(create_app).parameters:
        kwargs["env_name"] = "message"
    app = create_app(MessageEnv, MessageAction, MessageObservation, **kwargs)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))


    def watch_stdin():
        while sys.stdin.read(1):
            pass
        server.should_exit = True


    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])
    '''
)


@contextlib.contextmanager
def openenv_app(tmp_path: Path, capacity: int) -> Iterator[str]:
    """Serve the app with ``max_concurrent_envs=capacity``; yields its URL."""
    script = tmp_path / "check_openenv_app.py"
    script.write_text(APP)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(capacity)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            proc.kill()
            _, err = proc.communicate(timeout=15)
            raise AssertionError(f"the OpenEnv app did not start: {url!r}\n{err}")
        yield url
    finally:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        assert not psutil.pid_exists(proc.pid)


def test_an_openenv_app_passes(tmp_path):
    with openenv_app(tmp_path, capacity=3) as url:
        report = check_server(url)
    assert report.ok, report.render()
    statuses = {r.name: r.status for r in report.results}
    assert statuses == {**dict.fromkeys(CHECK_NAMES, Status.PASS), "batch": Status.SKIP}, (
        report.render()
    )
    assert report["session"].info["action"] == {"message": "a"}
    assert report["capacity"].info == {"capacity": 3}
    assert "CAPACITY_REACHED on session 4, max_sessions 3" in report["capacity"].detail
    assert report["close"].info["close_code"] == 1000
    assert report["errors"].detail.startswith(
        "INVALID_JSON, UNKNOWN_TYPE, VALIDATION_ERROR, session kept"
    )
    assert report["batch"].detail.startswith("not offered")


def test_cli_on_an_openenv_app_with_capacity_one(tmp_path, capsys):
    with openenv_app(tmp_path, capacity=1) as url:
        status = main(["check", url, "--action", '{"message": "hello"}'])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "capacity 1 session (CAPACITY_REACHED on session 2, max_sessions 1)" in out
    assert 'step {"message": "hello"}' in out
    assert out.splitlines()[-1] == "OK: 8 passed, 0 warnings, 0 failed, 1 skipped"
