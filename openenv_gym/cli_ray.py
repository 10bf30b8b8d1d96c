"""``openenv-gym ray up/down/status``: named pools of env servers on a Ray cluster.

A pool is a set of detached Ray actors, each one env server, that outlives the command
that started it; trainers attach to it by name (``provider="ray", pool=NAME``) and leave it
running when they close. The commands connect to a running cluster (``--address``, else
``RAY_ADDRESS`` or the local one that ``ray start`` made); they never start one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO

from openenv_gym.config import resolve_token
from openenv_gym.exceptions import ConfigurationError

__all__ = ["PROGRESS_EVERY", "add_commands", "progress", "run"]

PROGRESS_EVERY = 5.0
"""Seconds between two "still waiting" lines of a long wait."""


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def add_commands(sub: Any) -> None:
    """Add the ``ray`` command and its ``up``, ``down``, ``status`` to ``sub``."""
    ray = sub.add_parser(
        "ray",
        help="named pools of env servers on a Ray cluster (docs/scale-out.md)",
        description="Named pools of env servers on a Ray cluster: detached actors that "
        "outlive the command; trainers attach with provider='ray', pool=NAME.",
    )
    commands = ray.add_subparsers(dest="ray_command", required=True)
    up = commands.add_parser("up", help="start a named pool of servers (detached actors)")
    up.add_argument("pool", help="the pool's name, which trainers attach to (pool=NAME)")
    up.add_argument("server", help="wordle, echo, catch, or package.module:Class")
    up.add_argument("--num-servers", type=int, default=1, help="servers K (default 1)")
    up.add_argument(
        "--placement",
        default="spread",
        choices=["spread", "pack", "strict-spread", "strict-pack", "none"],
        help="placement-group strategy (default spread; none: no placement group)",
    )
    up.add_argument("--num-cpus", type=float, default=1.0, help="CPUs per server (default 1)")
    up.add_argument(
        "--resources", type=_json_object, default={}, help="custom resources per server, JSON"
    )
    up.add_argument(
        "--runtime-env", type=_json_object, default=None, help="Ray runtime_env as JSON"
    )
    up.add_argument(
        "--max-sessions", type=int, default=None, help="env instances per server (default 4096)"
    )
    up.add_argument(
        "--max-restarts", type=int, default=0, help="Ray restarts of a dead server (default 0)"
    )
    up.add_argument("--start-timeout", type=float, default=None, help="seconds to come up")
    down = commands.add_parser("down", help="kill a pool's servers, remove its placement group")
    down.add_argument("pool", help="the pool's name")
    status = commands.add_parser("status", help="list the pools and their servers")
    status.add_argument("pool", nargs="?", help="only this pool")
    status.add_argument("--json", action="store_true", help="print JSON")
    for command in commands.choices.values():
        command.add_argument("--address", help="the Ray cluster (default: RAY_ADDRESS, local)")
        command.add_argument("--log-level", default="WARNING")


@contextlib.contextmanager
def progress(
    what: str, *, every: float = PROGRESS_EVERY, out: TextIO | None = None
) -> Iterator[None]:
    """Say on standard error that ``what`` started, that it still runs, and how long it took.

    A line every ``every`` seconds while it runs; standard output is left to the command's
    result.

    >>> import io
    >>> err = io.StringIO()
    >>> with progress("nothing much", out=err):
    ...     pass
    >>> err.getvalue().splitlines()[0]
    'openenv-gym: nothing much...'
    """
    stream = sys.stderr if out is None else out
    started = time.monotonic()
    done = threading.Event()

    def say(text: str) -> None:
        stream.write(f"openenv-gym: {text}\n")
        stream.flush()

    def tick() -> None:
        while not done.wait(every):
            say(f"{what}: still waiting ({time.monotonic() - started:.0f} s)")

    say(f"{what}...")
    ticker = threading.Thread(target=tick, name="openenv-gym-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
    say(f"{what}: done in {time.monotonic() - started:.1f} s")


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed ``ray`` command; returns the exit status."""
    from openenv_gym.providers.ray import pool_down, pool_status

    if args.ray_command == "up":
        options = {} if args.max_sessions is None else {"max_sessions": args.max_sessions}
        starting = f"starting {args.num_servers} server(s) of pool {args.pool!r} on the Ray cluster"
        with progress(starting):
            servers = _pool_up(args, options)
        sys.stdout.write("".join(f"{server.url}\n" for server in servers))
        return 0
    if args.ray_command == "down":
        killed = pool_down(args.pool, ray_address=args.address)
        if not killed:
            sys.stderr.write(f"openenv-gym: no Ray pool named {args.pool!r}\n")
            return 1
        sys.stdout.write(f"stopped {killed} server(s) of pool {args.pool}\n")
        return 0
    if args.ray_command == "status":
        pools = pool_status(args.pool, ray_address=args.address)
        if args.json:
            listing = {
                name: [
                    {"name": s.name, "url": s.url, "node_id": s.node_id, "pid": s.pid}
                    for s in servers
                ]
                for name, servers in pools.items()
            }
            sys.stdout.write(json.dumps(listing, indent=2) + "\n")
        else:
            for name, servers in pools.items():
                sys.stdout.write(f"{name}: {len(servers)} server(s)\n")
                for s in servers:
                    sys.stdout.write(f"  {s.name}  {s.url}  node {s.node_id[:12]}  pid {s.pid}\n")
        if args.pool is not None and not pools:
            sys.stderr.write(f"openenv-gym: no Ray pool named {args.pool!r}\n")
            return 1
        return 0
    raise ConfigurationError(f"unknown ray command {args.ray_command!r}")  # pragma: no cover


def _pool_up(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    from openenv_gym.providers.ray import pool_up

    return pool_up(
        args.pool,
        args.server,
        num_servers=args.num_servers,
        placement=None if args.placement == "none" else args.placement,
        num_cpus=args.num_cpus,
        resources=args.resources,
        runtime_env=args.runtime_env,
        ray_address=args.address,
        token=resolve_token(),
        server_options=options,
        max_restarts=args.max_restarts,
        start_timeout=args.start_timeout,
    )
