"""OpenEnv servers for the interop tests: apps built by OpenEnv's own factory, under uvicorn.

Not a test module. Run as a subprocess (this directory on ``PYTHONPATH``)::

    python -m interop_apps counter --factory create_app --max-concurrent-envs 4

It binds 127.0.0.1 on a free port, prints the port on its first line of output, serves
until its standard input closes (so it never outlives the test process), then exits.

Apps:

* ``counter`` -- :class:`openenv_counter_env.CounterEnvironment`, written against OpenEnv's
  ``Environment`` base with OpenEnv's ``Action`` / ``Observation`` / ``State`` subclasses.
* ``echo``, ``wordle``, ``catch`` -- OUR environment logic (``openenv_gym_servers``) with our
  Pydantic models, hosted through :func:`adapt`: OpenEnv's WebSocket handler calls the
  ``reset_async`` / ``step_async`` its ``Environment`` base provides, so the app is given a
  subclass of that base delegating to one instance of our class per session.
* ``broken`` -- the counter, but every instance's constructor raises (FACTORY_ERROR).
* ``mcp_echo``, ``linewalk`` -- MCP tool environments on OpenEnv's ``MCPEnvironment`` with
  FastMCP tools, served with ``CallToolAction`` / ``CallToolObservation`` as upstream's
  echo is (:mod:`openenv_mcp_envs`).
* ``textarena_wordle`` -- Wordle in the message layout of OpenEnv's ``textarena_env`` (one
  merged, growing transcript; seeds ignored) (:mod:`openenv_textarena_env`).
* ``gridworld`` -- an enum action, shaped as upstream's ``grid_world_env``
  (:mod:`openenv_gridworld_env`).

``--factory`` picks ``create_app`` or ``create_fastapi_app``; both exist in openenv-core
0.3.0 and openenv 0.10.0. ``state_cls`` is passed only where the factory takes it (>= 0.4;
0.3.0 always reports the base ``State`` schema).

``--module MODULE:ATTR`` serves an app module as upstream's images do (``cd DIR && uvicorn
server.app:app``): ``--cwd DIR`` is entered and each ``--path`` put first on ``sys.path``
before the import (the env directories of ``envs/``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from openenv_gym.runtime.openenv_app import as_openenv_environment as adapt

__all__ = ["APPS", "adapt", "build_app", "main"]


def _counter() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_counter_env import (
        CounterAction,
        CounterEnvironment,
        CounterObservation,
        CounterState,
    )

    return CounterEnvironment, CounterAction, CounterObservation, CounterState


def _broken() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_counter_env import (
        CounterAction,
        CounterEnvironment,
        CounterObservation,
        CounterState,
    )

    class BrokenCounter(CounterEnvironment):
        def __init__(self) -> None:
            raise RuntimeError("constructor exploded")

    return BrokenCounter, CounterAction, CounterObservation, CounterState


def _echo() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_gym.runtime.environment import State
    from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

    return adapt(EchoEnvironment), EchoAction, EchoObservation, State


def _wordle() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_gym_servers.wordle import (
        WordleAction,
        WordleEnvironment,
        WordleObservation,
        WordleState,
    )

    return adapt(WordleEnvironment), WordleAction, WordleObservation, WordleState


def _catch() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_gym_servers.catch import (
        CatchAction,
        CatchEnvironment,
        CatchObservation,
        CatchState,
    )

    return adapt(CatchEnvironment), CatchAction, CatchObservation, CatchState


def _mcp_echo() -> tuple[Callable[[], Any], type, type, type]:
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import State
    from openenv_mcp_envs import McpEchoEnvironment

    return McpEchoEnvironment, CallToolAction, CallToolObservation, State


def _linewalk() -> tuple[Callable[[], Any], type, type, type]:
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv_mcp_envs import LineWalkEnvironment, LineWalkState

    return LineWalkEnvironment, CallToolAction, CallToolObservation, LineWalkState


def _textarena_wordle() -> tuple[Callable[[], Any], type, type, type]:
    from openenv_textarena_env import (
        TextArenaAction,
        TextArenaObservation,
        TextArenaState,
        TextArenaWordle,
    )

    return TextArenaWordle, TextArenaAction, TextArenaObservation, TextArenaState


def _gridworld() -> tuple[Callable[[], Any], type, type, type]:
    from openenv.core.env_server.types import State
    from openenv_gridworld_env import (
        GridWorldAction,
        GridWorldEnvironment,
        GridWorldObservation,
    )

    return GridWorldEnvironment, GridWorldAction, GridWorldObservation, State


APPS: dict[str, Callable[[], tuple[Callable[[], Any], type, type, type]]] = {
    "counter": _counter,
    "broken": _broken,
    "echo": _echo,
    "wordle": _wordle,
    "catch": _catch,
    "mcp_echo": _mcp_echo,
    "linewalk": _linewalk,
    "textarena_wordle": _textarena_wordle,
    "gridworld": _gridworld,
}


def build_app(name: str, factory: str, max_concurrent_envs: int) -> Any:
    """The FastAPI app of ``name``, made by OpenEnv's ``create_app`` or ``create_fastapi_app``."""
    from openenv.core.env_server import http_server

    env, action_cls, observation_cls, state_cls = APPS[name]()
    make = getattr(http_server, factory)
    kwargs: dict[str, Any] = {"max_concurrent_envs": max_concurrent_envs}
    params = inspect.signature(make).parameters
    if "state_cls" in params:  # openenv >= 0.4
        kwargs["state_cls"] = state_cls
    if "env_name" in params:  # create_app in every version; create_fastapi_app >= 0.4
        kwargs["env_name"] = name
    return make(env, action_cls, observation_cls, **kwargs)


def main(argv: list[str] | None = None) -> None:
    """Serve one app until standard input closes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", nargs="?", choices=sorted(APPS))
    parser.add_argument(
        "--factory", default="create_app", choices=["create_app", "create_fastapi_app"]
    )
    parser.add_argument("--max-concurrent-envs", type=int, default=8)
    parser.add_argument("--module", help="serve this MODULE:ATTR instead")
    parser.add_argument("--path", action="append", default=[])
    parser.add_argument("--cwd")
    args = parser.parse_args(argv)

    import uvicorn

    os.environ.pop("ENABLE_WEB_INTERFACE", None)  # never the Gradio UI
    if args.module:
        if args.cwd:
            os.chdir(args.cwd)
        sys.path[:0] = args.path
        module, _, attr = args.module.partition(":")
        app = getattr(importlib.import_module(module), attr)
    else:
        app = build_app(args.app, args.factory, args.max_concurrent_envs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def watch_stdin() -> None:
        with contextlib.suppress(OSError, ValueError):
            while sys.stdin.buffer.read(4096):
                pass
        server.should_exit = True

    threading.Thread(target=watch_stdin, daemon=True).start()
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
