"""The ``openenv-gym`` command line.

``openenv-gym serve wordle --port 0`` starts a server and prints its URL on the first
line of standard output (``--port 0`` picks a free port). ``openenv-gym check URL`` runs
the conformance checks of ``docs/check.md`` against any OpenEnv server; it exits 1 when
a check fails, 0 otherwise (warnings included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from openenv_gym import cli_ray
from openenv_gym._version import __version__
from openenv_gym.config import Timeouts, env_flag, parse_count, parse_seconds
from openenv_gym.exceptions import ConfigurationError, OpenEnvGymError
from openenv_gym.server.settings import ServerConfig, ServerMode, options

__all__ = ["main"]

logger = logging.getLogger("openenv_gym.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openenv-gym", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"openenv-gym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve an environment over OpenEnv /ws and /batch")
    serve.add_argument("name", nargs="?", help="wordle, echo, catch (or use --env)")
    serve.add_argument("--env", help="an environment class as package.module:ClassName")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; any other needs --token or --insecure)",
    )
    serve.add_argument("--port", default="8000", help="port, 0..65535 (0: a free one)")
    for option in options():
        shown = f"{option.default:g}" if option.kind == "seconds" else str(option.default)
        serve.add_argument(
            option.flag,
            metavar="SECONDS" if option.kind == "seconds" else "N",
            help=f"{option.help} (default {shown}; env {option.env_var})",
        )
    serve.add_argument(
        "--token",
        help="bearer token every request must carry (default: env OPENENV_GYM_TOKEN, "
        "which other users cannot read in the process list)",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="accept WebSocket upgrades and requests from this browser origin, e.g. "
        "https://example.org (repeatable; by default any Origin header is refused)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback --host without a token (anyone who reaches it can use it)",
    )
    serve.add_argument("--compression", action="store_true", help="offer permessage-deflate")
    serve.add_argument(
        "--mode",
        choices=[mode.value for mode in ServerMode],
        help="simulation: also serve HTTP /reset /step /state (OpenEnv's default); production: "
        "not (agents use /mcp) (default simulation; env OPENENV_GYM_MODE)",
    )
    serve.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="exit when standard input closes (used by the local provider: no orphans)",
    )
    serve.add_argument("--log-level", default="WARNING")
    check = sub.add_parser(
        "check",
        help="check that a server speaks OpenEnv's protocol (exit 1 if a check fails)",
        description="Run the conformance checks of docs/check.md against a running server.",
    )
    check.add_argument("url", help="base URL of the server, e.g. http://127.0.0.1:8000")
    check.add_argument(
        "--action",
        help='a valid action as JSON, e.g. \'{"message": "[crane]"}\' (default: made from /schema)',
    )
    check.add_argument("--seed", type=int, default=1, help="seed of every reset (default 1)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument(
        "--token", help="bearer token for a server that demands one (default: OPENENV_GYM_TOKEN)"
    )
    check.add_argument(
        "--max-sessions",
        type=int,
        default=16,
        help="most sessions the capacity check holds open at once (default 16)",
    )
    check.add_argument(
        "--reply-timeout", type=float, default=10.0, help="seconds to wait for each reply"
    )
    check.add_argument(
        "--check-timeout", type=float, default=60.0, help="seconds each check may take in all"
    )
    check.add_argument("--log-level", default="WARNING")
    images = sub.add_parser("images", help="Docker images of the servers we ship")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    build = images_sub.add_parser(
        "build",
        help="build the wheelhouse and one image per server (docker SDK)",
        description="pip wheel the project into the wheelhouse, then build "
        "openenv-gym/NAME:VERSION from servers/Dockerfile for each NAME.",
    )
    build.add_argument("names", nargs="*", help="wordle, echo, catch (default: all)")
    build.add_argument("--base-image", help="FROM image (default: python:3.11-slim)")
    build.add_argument(
        "--wheelhouse",
        default="build/wheelhouse",
        help="wheel directory (default build/wheelhouse)",
    )
    build.add_argument(
        "--no-wheels", action="store_true", help="reuse the wheelhouse as it is (no pip wheel)"
    )
    build.add_argument("--log-level", default="INFO")
    gc = sub.add_parser(
        "gc",
        help="remove leftover containers of the docker provider",
        description="Remove containers labelled openenv-gym.managed=1 whose owner process "
        "is gone (e.g. a client killed with SIGKILL).",
    )
    gc.add_argument("--all", action="store_true", help="remove every labelled container")
    gc.add_argument("--log-level", default="WARNING")
    cli_ray.add_commands(sub)
    return parser


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Block on stdin until EOF (the parent died or closed the pipe), then stop."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    loop.call_soon_threadsafe(stop.set)


async def _serve(args: argparse.Namespace) -> int:
    from openenv_gym.server.app import EnvServer
    from openenv_gym.server.loader import load_env

    spec = args.env or args.name
    if not spec:
        raise OpenEnvGymError(
            "name an environment (wordle, echo, catch) or pass --env module:Class"
        )
    config = _server_config(args)
    env_cls = load_env(spec)
    try:
        server = EnvServer(env_cls, config, name=spec.rsplit(":", 1)[-1].lower())
    except OpenEnvGymError:
        raise
    except Exception as exc:
        raise OpenEnvGymError(f"cannot build environment {spec!r}: {exc!r}") from exc
    _raise_fd_limit(config.max_connections)  # the process is a server from here on
    _return_large_blocks()
    try:
        await server.start()
    except OSError as exc:
        raise OpenEnvGymError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if args.exit_with_stdin:
        threading.Thread(target=_watch_stdin, args=(loop, stop), daemon=True).start()
    sys.stdout.write(f"{server.url}\n")
    sys.stdout.flush()
    await stop.wait()
    await server.aclose()
    return 0


def _server_config(args: argparse.Namespace) -> ServerConfig:
    """The flags over the ``OPENENV_GYM_*`` variables over the defaults, all checked."""
    try:
        port = int(args.port)
    except ValueError:
        raise ConfigurationError(f"--port={args.port!r} is not an integer") from None
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"--port must be in 0..65535, got {args.port}")
    overrides: dict[str, Any] = {}
    for option in options():
        text = getattr(args, option.name)
        if text is not None:
            parse = parse_count if option.kind == "count" else parse_seconds
            overrides[option.name] = parse(text, option.flag)
    if args.token is not None:
        overrides["token"] = args.token
    return ServerConfig.from_env(
        host=args.host,
        port=port,
        compression=args.compression,
        allowed_origins=tuple(args.allow_origin),
        insecure=args.insecure,
        **overrides,
        **({} if args.mode is None else {"mode": args.mode}),
    )


def _return_large_blocks() -> None:
    """glibc: blocks of 4 MiB and more come from mmap, so freed frames leave the process.

    By default glibc raises that threshold to the largest block freed (up to 32 MiB):
    after one 15 MB frame, every later one stays in the heap once freed, and RSS never
    comes back down. ``MALLOC_MMAP_THRESHOLD_`` in the environment wins over this.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None).mallopt(-3, 4 * 2**20)  # M_MMAP_THRESHOLD (-3 in glibc and musl)


def _raise_fd_limit(max_connections: int) -> None:
    """Let the process hold ``max_connections`` sockets (the soft limit is often 1024)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = max_connections + 256  # listening sockets, pipes, the environments' files
        if soft != resource.RLIM_INFINITY and soft < wanted:
            target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        if soft != resource.RLIM_INFINITY and soft < wanted:
            logger.warning(
                "the open-file limit (%d) is below --max-connections + 256: connections "
                "beyond it wait until others close",
                soft,
            )


def _check(args: argparse.Namespace) -> int:
    from openenv_gym.check import DEFAULT_TIMEOUTS, check_server

    action = None
    if args.action is not None:
        try:
            action = json.loads(args.action)
        except ValueError as exc:
            raise ConfigurationError(f"--action is not JSON: {exc}") from exc
        if not isinstance(action, dict):
            raise ConfigurationError("--action must be a JSON object of the action's fields")
    report = check_server(
        args.url,
        timeouts=Timeouts(
            connect=DEFAULT_TIMEOUTS.connect, step=args.reply_timeout, close=DEFAULT_TIMEOUTS.close
        ),
        seed=args.seed,
        action=action,
        max_sessions=args.max_sessions,
        check_timeout=args.check_timeout,
        token=args.token,
    )
    if args.json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(report.render() + "\n")
    sys.stdout.flush()
    return 0 if report.ok else 1


def _images(args: argparse.Namespace) -> int:
    from pathlib import Path

    from openenv_gym.images import SERVERS, build_images

    tags = build_images(
        args.names or SERVERS,
        base_image=args.base_image,
        wheelhouse=Path(args.wheelhouse),
        wheels=not args.no_wheels,
    )
    sys.stdout.write("".join(f"{tag}\n" for tag in tags))
    return 0


def _gc(args: argparse.Namespace) -> int:
    from openenv_gym.providers.docker import gc

    removed = gc(everything=args.all)
    sys.stdout.write("".join(f"removed {cid[:12]}\n" for cid in removed))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING))
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "images":
            return _images(args)
        if args.command == "gc":
            return _gc(args)
        if args.command == "ray":
            return cli_ray.run(args)
        if args.command == "serve":
            if not env_flag("OPENENV_GYM_NO_UVLOOP"):
                with contextlib.suppress(ImportError):
                    import uvloop

                    return uvloop.run(_serve(args))
            return asyncio.run(_serve(args))
    except OpenEnvGymError as exc:
        sys.stderr.write(f"openenv-gym: error: {exc}\n")
        return 2
    return 1  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
