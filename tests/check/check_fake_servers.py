"""Helpers of tests/check: a small OpenEnv-like server that misbehaves on request, and
our own servers as subprocesses.

:class:`FakeServer` is written with the ``websockets`` library alone (no openenv-gym
code), so the checker is tested against an independent implementation. By default it is
a conformant OpenEnv server (capacity 3, no batched protocol); each :class:`Faults` flag
breaks one thing.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

__all__ = ["FakeServer", "Faults", "our_server"]

SCHEMA = {
    "action": {
        "type": "object",
        "title": "FakeAction",
        "additionalProperties": False,
        "properties": {
            "message": {"type": "string", "minLength": 1},
            "metadata": {"type": "object", "default": {}},
        },
        "required": ["message"],
    },
    "observation": {
        "type": "object",
        "title": "FakeObservation",
        "properties": {
            "echoed": {"type": "string"},
            "done": {"type": "boolean", "default": False},
            "reward": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
            "metadata": {"type": "object", "default": {}},
        },
        "required": ["echoed"],
    },
    "state": {
        "type": "object",
        "title": "State",
        "properties": {
            "episode_id": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "step_count": {"type": "integer", "default": 0},
        },
    },
}


@dataclass(frozen=True)
class Faults:
    """What the fake server gets wrong (nothing by default)."""

    no_observation_key: bool = False  # observation frames carry "obs" instead of "observation"
    reward: Any = 0.5  # the reward sent in every observation frame
    no_schema: bool = False  # GET /schema answers 404
    no_metadata: bool = False  # GET /metadata answers 404
    ignore_close: bool = False  # {"type":"close"} is ignored: the socket stays open
    silent: frozenset[str] = field(default_factory=frozenset)  # request types never answered
    unseeded: bool = False  # every reset gives a new observation
    capacity: int = 3
    health: Any = field(default_factory=lambda: {"status": "healthy"})  # GET /health body
    invalid_json_code: str = "INVALID_JSON"  # the code answered to a frame that is not JSON
    close_on_bad_json: bool = False  # a frame that is not JSON ends the session (no reply)
    accept_extra: bool = False  # step accepts unknown action fields
    state_type: str = "state"  # the frame type of the reply to state
    close_code: int = 1000  # code of the server's close after {"type":"close"}
    capacity_silent: bool = False  # at capacity: close without a CAPACITY_REACHED frame


class FakeServer:
    """An OpenEnv-like server on its own thread and event loop.

    Use as a context manager; :attr:`url` is its base URL.
    """

    def __init__(self, faults: Faults | None = None) -> None:
        self.faults = faults or Faults()
        self.active = 0
        self.resets = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: Server | None = None

    def __enter__(self) -> FakeServer:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        port = next(iter(self._server.sockets)).getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> Server:
        return await serve(
            self._session, "127.0.0.1", 0, process_request=self._http, compression=None
        )

    def _http(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == "/ws":
            return None
        bodies = {"/health": self.faults.health}
        if not self.faults.no_schema:
            bodies["/schema"] = SCHEMA
        if not self.faults.no_metadata:
            bodies["/metadata"] = {"name": "fake", "version": "0.0.1"}
        if path not in bodies:
            return connection.respond(http.HTTPStatus.NOT_FOUND, '{"detail":"Not Found"}')
        return connection.respond(http.HTTPStatus.OK, json.dumps(bodies[path]))

    def _observation(self, text: str) -> str:
        observation = {"echoed": text, "metadata": {}}
        key = "obs" if self.faults.no_observation_key else "observation"
        data = {key: observation, "reward": self.faults.reward, "done": False}
        return json.dumps({"type": "observation", "data": data})

    @staticmethod
    def _error(code: str, message: str, **extra: Any) -> str:
        return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})

    async def _session(self, ws: ServerConnection) -> None:
        if self.active >= self.faults.capacity:
            if self.faults.capacity_silent:
                await ws.close()
                return
            await ws.send(
                self._error(
                    "CAPACITY_REACHED",
                    f"Server at capacity: {self.active}/{self.faults.capacity}",
                    active_sessions=self.active,
                    max_sessions=self.faults.capacity,
                )
            )
            await ws.close()
            return
        self.active += 1
        steps = 0
        try:
            async for frame in ws:
                try:
                    message = json.loads(frame)
                except ValueError:
                    if self.faults.close_on_bad_json:
                        break
                    await ws.send(self._error(self.faults.invalid_json_code, "Invalid JSON"))
                    continue
                kind = message.get("type") if isinstance(message, dict) else None
                if kind in self.faults.silent:
                    continue
                if kind == "close":
                    if self.faults.ignore_close:
                        continue
                    break
                if kind == "reset":
                    steps = 0
                    self.resets += 1
                    seed = message.get("data", {}).get("seed")
                    text = f"reset {self.resets}" if self.faults.unseeded else f"seed {seed}"
                    await ws.send(self._observation(text))
                elif kind == "step":
                    data = message.get("data")
                    if (
                        not isinstance(data, dict)
                        or (set(data) - {"message", "metadata"} and not self.faults.accept_extra)
                        or not isinstance(data.get("message"), str)
                    ):
                        await ws.send(self._error("VALIDATION_ERROR", "Invalid message", errors=[]))
                        continue
                    steps += 1
                    await ws.send(self._observation(data["message"]))
                elif kind == "state":
                    state = {"episode_id": None, "step_count": steps}
                    if self.faults.state_type == "observation":
                        await ws.send(self._observation("state"))
                    else:
                        await ws.send(json.dumps({"type": self.faults.state_type, "data": state}))
                else:
                    await ws.send(self._error("UNKNOWN_TYPE", f"Unknown message type: {kind}"))
        finally:
            self.active -= 1
        await ws.close(self.faults.close_code)


@contextlib.contextmanager
def our_server(name: str, *args: str) -> Iterator[str]:
    """``python -m openenv_gym serve NAME --port 0 *args``; yields its URL, then reaps it."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openenv_gym",
            "serve",
            name,
            "--port",
            "0",
            "--exit-with-stdin",
            *args,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("http://"), f"no URL from the server: {line!r}"
        yield line
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(15)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        assert not psutil.pid_exists(proc.pid)
