"""Method (c), the official OpenEnv stack; runs under the interpreter that has ``openenv``.

    python _openenv_side.py serve --env echo --max-concurrent-envs 1024   # prints its port
    python _openenv_side.py client    # then {"cmd": "open", "spec": {"url", "env", "n"}}
    python _openenv_side.py tool-client   # the official rows of method ``tool``
    python _openenv_side.py versions

``serve`` hosts OUR environment logic (``openenv_gym_servers``' Echo and Wordle classes and
their Pydantic models) in an app built by OpenEnv's own factory,
``openenv.core.env_server.http_server.create_app``, under uvicorn on 127.0.0.1.

``create_app`` accepts our classes as they are, but its WebSocket handler then fails every
``reset`` with ``'EchoEnvironment' object has no attribute 'reset_async'``: it calls the
``reset_async`` / ``step_async`` that OpenEnv's ``Environment`` base class provides. So the
app is given a thin adapter, :func:`adapt`, a subclass of OpenEnv's ``Environment`` whose
``reset`` / ``step`` / ``state`` / ``close`` delegate to one instance of our class. The
action and observation models passed to ``create_app`` are ours, unchanged.

``client`` is a benchmark worker (the :mod:`_harness` protocol): N official async clients,
``openenv.core.generic_client.GenericEnvClient``, one session each, stepped in lockstep with
``asyncio.gather``. A sub-env whose episode ended is reset in the next round instead of
stepped, as Gymnasium's NEXT_STEP autoreset does, and that reset counts as an env-step.

``tool-client`` is the official side of method ``tool``: one synchronous official client,
``GenericEnvClient(base_url=url).sync()``, whose ``step({"message": "[word]"})`` is timed as
one Wordle tool call, either against OpenEnv's server above (``url`` given) or against our
own local Wordle server, which the worker starts with ``LocalProvider`` under our
interpreter (``server_python``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import socket
import sys
from typing import Any

from _harness import ActionPlan, ToolCallBench, run_async_worker, run_worker, watch_stdin_then

from openenv_gym.runtime.openenv_app import as_openenv_environment as adapt

__all__ = ["adapt"]

CONNECT_CHUNK = 64
"""Sessions opened concurrently at a time (a 1024-connection burst overruns connect timeouts)."""


def _our_env(name: str) -> tuple[type, type, type, type]:
    if name == "echo":
        from openenv_gym.runtime.environment import State
        from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

        return EchoEnvironment, EchoAction, EchoObservation, State
    from openenv_gym_servers.wordle import (
        WordleAction,
        WordleEnvironment,
        WordleObservation,
        WordleState,
    )

    return WordleEnvironment, WordleAction, WordleObservation, WordleState


def serve(args: argparse.Namespace) -> None:
    import uvicorn
    from openenv.core.env_server.http_server import create_app

    env_cls, action_cls, observation_cls, state_cls = _our_env(args.env)
    app = create_app(
        adapt(env_cls),
        action_cls,
        observation_cls,
        env_name=args.env,
        max_concurrent_envs=args.max_concurrent_envs,
        state_cls=state_cls,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", loop=args.loop, lifespan="on")
    server = uvicorn.Server(config)

    def stop() -> None:
        server.should_exit = True

    watch_stdin_then(stop)
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    server.run(sockets=[sock])


class GatherBench:
    """N ``GenericEnvClient`` sessions, one ``asyncio.gather`` of reset-or-step per round."""

    def __init__(self, url: str, env: str, n: int) -> None:
        self.url, self.env, self.n = url, env, n
        self.plan = ActionPlan(env, n)
        self.clients: list[Any] = []
        self.needs_reset = [False] * n
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            "client_loop": "asyncio (the official async client's)",
            "client": "openenv.core.generic_client.GenericEnvClient (async)",
            "server": "openenv create_app + adapter, uvicorn",
        }

    async def setup(self) -> dict[str, Any]:
        from openenv.core.generic_client import GenericEnvClient

        self.clients = [GenericEnvClient(base_url=self.url) for _ in range(self.n)]
        for start in range(0, self.n, CONNECT_CHUNK):
            chunk = self.clients[start : start + CONNECT_CHUNK]
            await asyncio.gather(*(c.connect() for c in chunk))
        await asyncio.gather(*(c.reset() for c in self.clients))
        return {}

    async def round(self) -> int:
        texts = self.plan.texts()
        needs_reset = self.needs_reset
        results = await asyncio.gather(
            *(
                client.reset() if needs_reset[i] else client.step({"message": texts[i]})
                for i, client in enumerate(self.clients)
            )
        )
        done = [not needs_reset[i] and bool(r.done) for i, r in enumerate(results)]
        self.needs_reset = done
        self.plan.update(done)
        return self.n

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)


class OfficialToolBench(ToolCallBench):
    """tool (official): one sync ``GenericEnvClient``; a call is ``step({"message": ...})``."""

    def __init__(self, url: str, server_python: str) -> None:
        super().__init__()
        self.url, self.server_python = url, server_python
        self.provider: Any = None
        self.client: Any = None
        self.server_pids: list[int] = []
        self.params: dict[str, Any] = {
            "client_loop": "asyncio on the sync client's background thread",
            "client": "openenv.core.generic_client.GenericEnvClient(...).sync()",
            "protocol": "json",
            "server": (
                "openenv create_app + adapter, uvicorn"
                if url
                else "openenv-gym serve wordle (LocalProvider, our interpreter)"
            ),
            "websocket_compression": "permessage-deflate (the client's default)",
        }

    def setup(self) -> dict[str, Any]:
        from openenv.core.generic_client import GenericEnvClient

        url = self.url
        headers = None
        if not url:
            from openenv_gym.providers import LocalProvider

            self.provider = LocalProvider("wordle", python=self.server_python or None)
            url = self.provider.start()[0]
            self.server_pids = self.provider.pids
            headers = {"Authorization": f"Bearer {self.provider.token(0)}"}
        self.client = GenericEnvClient(base_url=url, headers=headers).sync()
        self.client.connect()
        return {}

    def _reset(self, seed: int) -> None:
        self.client.reset(seed=seed)

    def _guess(self, word: str) -> bool:
        return bool(self.client.step({"message": f"[{word}]"}).done)

    def close(self) -> None:
        try:
            if self.client is not None:
                self.client.close()
        finally:
            if self.provider is not None:
                self.provider.close()


def versions() -> None:
    """Print what this interpreter has, and whether it can run method (c) at all."""
    out: dict[str, Any] = {"python": sys.version.split()[0], "ok": True, "problem": None}
    for name in (
        "openenv",
        "openenv-gym",
        "fastapi",
        "uvicorn",
        "starlette",
        "pydantic",
        "websockets",
    ):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    try:
        import openenv.core.env_server.http_server
        import openenv.core.generic_client  # noqa: F401

        import openenv_gym_servers.wordle  # noqa: F401
    except ImportError as exc:
        out["ok"], out["problem"] = (
            False,
            f"cannot import {exc.name}: needs openenv and openenv-gym",
        )
    try:
        import uvloop  # noqa: F401
    except ImportError:
        out["uvicorn_loop_auto"] = "asyncio"
    else:
        out["uvicorn_loop_auto"] = "uvloop"
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["serve", "client", "tool-client", "versions"])
    parser.add_argument("--env", default="echo", choices=["echo", "wordle"])
    parser.add_argument("--max-concurrent-envs", type=int, default=1024)
    parser.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args)
    elif args.mode == "client":
        run_async_worker(lambda spec: GatherBench(spec["url"], spec["env"], spec["n"]))
    elif args.mode == "tool-client":
        run_worker(
            lambda spec: OfficialToolBench(spec.get("url", ""), spec.get("server_python", ""))
        )
    else:
        versions()


if __name__ == "__main__":
    main()
