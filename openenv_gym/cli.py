"""The ``openenv-gym`` command line.

``openenv-gym serve wordle --port 0`` starts a server and prints its URL on the first
line of standard output (``--port 0`` picks a free port). ``openenv-gym check URL`` runs
the conformance checks of ``docs/check.md`` against any OpenEnv server; it exits 1 when
a check fails, 0 otherwise (warnings included). ``openenv-gym envs`` lists the env ids
and their spaces. Bad arguments exit 2 with one line on standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
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
from openenv_gym.runtime.settings import ServerConfig, ServerMode, options
from openenv_gym.runtime.workers import DEFAULT_MAX_WORKERS

__all__ = ["EXTRAS", "install_hint", "main"]

logger = logging.getLogger("openenv_gym.cli")


_DESCRIPTION = """\
Gymnasium environments over OpenEnv servers: serve the environments we ship, check
that any server speaks OpenEnv's protocol, list the env ids, build Docker images."""

_EXAMPLES: dict[str, str] = {
    "": """\
examples:
  openenv-gym envs                                  the env ids and their spaces
  openenv-gym serve wordle --port 8000              serve Wordle on 127.0.0.1:8000
  openenv-gym check http://127.0.0.1:8000           check a running server
  openenv-gym serve --help                          every option of a command

docs: docs/cli.md, docs/logging.md""",
    "serve": """\
examples:
  openenv-gym serve wordle --port 0                 a free port; the URL is printed
  openenv-gym serve echo --port 8000 --max-sessions 256
  openenv-gym serve --env mypkg.envs:MyEnv --port 8000
  openenv-gym serve --app-dir envs/echo_env --port 8000      an OpenEnv env, unmodified
  openenv-gym serve --app echo_env.server.app:app --port 8000
  OPENENV_GYM_TOKEN=secret openenv-gym serve catch --host 0.0.0.0 --port 8000""",
    "check": """\
examples:
  openenv-gym check http://127.0.0.1:8000
  openenv-gym check https://openenv-echo-env.hf.space --json
  openenv-gym check http://127.0.0.1:8000 --action '{"message": "[crane]"}'""",
    "envs": """\
examples:
  openenv-gym envs
  openenv-gym envs --json""",
    "images": """\
examples:
  openenv-gym images build wordle echo
  openenv-gym images derive registry.hf.space/openenv-echo-env:latest
  openenv-gym images list""",
    "images derive": """\
examples:
  openenv-gym images derive registry.hf.space/openenv-echo-env:latest
  openenv-gym images derive my/echo-env:1 --tag registry.example.org/echo-batched:1""",
    "images list": """\
examples:
  openenv-gym images list
  openenv-gym images list --json""",
    "images rm": """\
examples:
  openenv-gym images rm                             every derived image and marker
  openenv-gym images rm my/echo-env:1               those of one base image
  openenv-gym images rm --stale                     those of other openenv-gym versions""",
    "images build": """\
examples:
  openenv-gym images build                          every server we ship
  openenv-gym images build wordle --no-wheels       reuse build/wheelhouse""",
    "gc": """\
examples:
  openenv-gym gc                                    containers whose owner is gone
  openenv-gym gc --all""",
    "ray": """\
examples:
  openenv-gym ray up wordle-pool wordle --num-servers 4
  openenv-gym ray status
  openenv-gym ray down wordle-pool""",
    "ray up": """\
examples:
  openenv-gym ray up wordle-pool wordle --num-servers 4 --placement spread""",
    "ray down": """\
examples:
  openenv-gym ray down wordle-pool""",
    "ray status": """\
examples:
  openenv-gym ray status --json""",
}
"""An example epilog for every command (``openenv-gym COMMAND --help``), by command path."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    """``--log-level`` in any case (argparse then checks it against :data:`LOG_LEVELS`)."""
    return text.upper()


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


def _finish(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give every command its examples, plain-text help and a checked ``--log-level``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if path in _EXAMPLES:
        parser.epilog = _EXAMPLES[path]
    for action in parser._actions:
        if action.dest == "log_level":
            action.type = _log_level
            action.choices = LOG_LEVELS
            action.help = f"one of {', '.join(LOG_LEVELS)}, any case (default {action.default})"
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _finish(child, f"{path} {name}".strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openenv-gym", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"openenv-gym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    envs = sub.add_parser(
        "envs",
        help="list the env ids and their spaces",
        description="List the openenv/* ids gymnasium.make takes, with their action and "
        "observation spaces.",
    )
    envs.add_argument("--json", action="store_true", help="print JSON")
    envs.add_argument("--log-level", default="WARNING")
    serve = sub.add_parser(
        "serve",
        help="serve an environment over OpenEnv /ws and /batch",
        description="Serve an environment over OpenEnv's /ws, our batched /batch and HTTP. "
        "Prints the server's URL on the first line of standard output.",
    )
    serve.add_argument("name", nargs="?", help="wordle, echo, catch (or use --env, --app)")
    serve.add_argument("--env", help="an environment class as package.module:ClassName")
    serve.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="an OpenEnv app module, unmodified (e.g. echo_env.server.app:app): host the "
        "environment its create_app was given",
    )
    serve.add_argument(
        "--app-dir",
        metavar="DIR",
        help="an OpenEnv env directory: the app its openenv.yaml names (app: server.app:app), "
        "imported from DIR as upstream's `cd DIR && uvicorn ...` does",
    )
    serve.add_argument(
        "--concurrent",
        action="store_true",
        help="host every session in this process even if the class is not marked "
        "SUPPORTS_CONCURRENT_SESSIONS (default: one worker process per session then)",
    )
    serve.add_argument(
        "--max-workers",
        type=_positive_int,
        default=None,
        metavar="N",
        help="most worker processes (sessions) for a class not marked concurrent "
        f"(default {DEFAULT_MAX_WORKERS})",
    )
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
        type=_positive_int,
        default=16,
        help="most sessions the capacity check holds open at once (default 16)",
    )
    check.add_argument(
        "--reply-timeout",
        type=_positive_seconds,
        default=10.0,
        help="seconds to wait for each reply (default 10)",
    )
    check.add_argument(
        "--check-timeout",
        type=_positive_seconds,
        default=60.0,
        help="seconds each check may take in all (default 60)",
    )
    check.add_argument("--log-level", default="WARNING")
    images = sub.add_parser(
        "images", help="Docker images: of the servers we ship, and derived from official ones"
    )
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
    derive = images_sub.add_parser(
        "derive",
        help="derive an image that serves an official OpenEnv image's app with our runtime",
        description="Add openenv-gym (from a host wheelhouse for the image's own Python) to "
        "IMAGE and make it serve the same app with `openenv-gym serve --app` (the batched "
        "protocol); cached, as DockerProvider(image=IMAGE) does at its first start. Prints "
        "the derived image's tag; exits 2 with the reason when IMAGE cannot take our runtime.",
    )
    derive.add_argument("image", help="a local image (never pulled), e.g. my/openenv-echo:1")
    derive.add_argument("--tag", help="also tag the derived image so (e.g. for a registry)")
    derive.add_argument("--log-level", default="INFO")
    listing = images_sub.add_parser(
        "list",
        help="list derived images (and images that run with their own server, and why)",
        description="The cache of derived images: per base image, the derived image or the "
        "reason it runs with its own server; `current` is this openenv-gym's.",
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--log-level", default="WARNING")
    remove = images_sub.add_parser(
        "rm",
        help="remove derived images from the cache",
        description="Remove derived images and markers: all, or those of the base images "
        "named. The next DockerProvider(image=...) derives again.",
    )
    remove.add_argument("images", nargs="*", help="base images (default: every one)")
    remove.add_argument(
        "--stale", action="store_true", help="only those of other openenv-gym versions"
    )
    remove.add_argument("--log-level", default="WARNING")
    gc = sub.add_parser(
        "gc",
        help="remove leftover containers of the docker provider",
        description="Remove containers labelled openenv-gym.managed=1 whose owner process "
        "is gone (e.g. a client killed with SIGKILL).",
    )
    gc.add_argument("--all", action="store_true", help="remove every labelled container")
    gc.add_argument("--log-level", default="WARNING")
    cli_ray.add_commands(sub)
    _finish(parser)
    return parser


def _watch_stdin(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Block on stdin until EOF (the parent died or closed the pipe), then stop."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.buffer.read(4096):
            pass
    loop.call_soon_threadsafe(stop.set)


def _serve_target(args: argparse.Namespace) -> dict[str, Any]:
    """What ``serve`` hosts: ``{"env": spec}`` or ``{"app": AppTarget}`` (cwd entered)."""
    from openenv_gym.runtime.apps import AppTarget

    named = [x for x in (args.name, args.env, args.app, args.app_dir) if x]
    if len(named) != 1:
        raise ConfigurationError(
            "name an environment: a name (wordle, echo, catch), --env module:Class, "
            "--app MODULE:ATTR or --app-dir DIR" + (f" (got {len(named)})" if named else "")
        )
    if args.app or args.app_dir:
        target = AppTarget.parse(args.app) if args.app else AppTarget.from_dir(args.app_dir)
        target.enter()  # as upstream's `cd /app/env`: the app may read files relative to it
        return {"app": target}
    return {"env": args.env or args.name}


async def _serve(args: argparse.Namespace) -> int:
    from openenv_gym.runtime.serving import host

    config = _server_config(args)
    target = _serve_target(args)
    hosted = host(
        config,
        **target,
        concurrent=args.concurrent,
        max_workers=args.max_workers or DEFAULT_MAX_WORKERS,
    )
    server = hosted.server
    _raise_fd_limit(config.max_connections)  # the process is a server from here on
    _return_large_blocks()
    try:
        await server.start()
    except OSError as exc:
        hosted.close_workers()
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
    await hosted.aclose()
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
    from openenv_gym.providers import derive

    if args.images_command == "derive":
        derived = derive.derive(args.image, tag=args.tag)
        sys.stdout.write(f"{derived.image}\n" + (f"{args.tag}\n" if args.tag else ""))
        return 0
    if args.images_command == "list":
        rows = derive.derived_images()
        if args.json:
            text = json.dumps([dataclasses.asdict(row) for row in rows], indent=2)
            sys.stdout.write(text + "\n")
            return 0
        for row in rows:
            runs = f"native: {row.native}" if row.native else "batched (openenv-gym serve)"
            mark = "" if row.current else "  [other openenv-gym]"
            sys.stdout.write(
                f"{row.base or row.base_id[:19]}\n  {row.tag}  {row.size / 2**20:.0f} MiB{mark}\n"
                f"  {runs}\n"
            )
        return 0
    if args.images_command == "rm":
        removed = derive.remove_derived(args.images, stale_only=args.stale)
        sys.stdout.write("".join(f"removed {tag}\n" for tag in removed))
        return 0
    tags = build_images(
        args.names or SERVERS,
        base_image=args.base_image,
        wheelhouse=Path(args.wheelhouse),
        wheels=not args.no_wheels,
    )
    sys.stdout.write("".join(f"{tag}\n" for tag in tags))
    return 0


def _envs(args: argparse.Namespace) -> int:
    from openenv_gym.registry import ENV_IDS
    from openenv_gym.spaces import codec_for, describe_space, known_envs

    rows: list[dict[str, str]] = []
    for env_id, entry in ENV_IDS.items():
        if entry.env in known_envs():
            codec = codec_for(entry.env)
            action = describe_space(codec.action_space)
            observation = describe_space(codec.observation_space)
        else:
            action = observation = "built from the server's GET /schema (base_url=)"
        rows.append(
            {"id": env_id, "server": entry.env, "action": action, "observation": observation}
        )
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    for row in rows:
        served = "any OpenEnv server" if row["server"] == "generic" else f"serve {row['server']}"
        sys.stdout.write(
            f"{row['id']}  ({served})\n"
            f"  action       {row['action']}\n"
            f"  observation  {row['observation']}\n"
        )
    return 0


def _gc(args: argparse.Namespace) -> int:
    from openenv_gym.providers.docker import gc

    removed = gc(everything=args.all)
    sys.stdout.write("".join(f"removed {cid[:12]}\n" for cid in removed))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level))
    try:
        if args.command == "envs":
            return _envs(args)
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
    except ImportError as exc:
        hint = install_hint(exc)
        if hint is None:
            raise
        sys.stderr.write(f"openenv-gym: error: {hint}\n")
        return 2
    return 1  # pragma: no cover - argparse rejects unknown commands


EXTRAS: dict[str, str] = {
    "docker": "docker",
    "ray": "ray",
    "trl": "trl",
    "transformers": "trl",
    "datasets": "trl",
    "torch": "trl",
    "vllm": "vllm",
    "stable_baselines3": "sb3",
    "torchrl": "torchrl",
    "pyarrow": "record",
    "minari": "record",
    "moviepy": "video",
    "mkdocs": "docs",
}
"""The extra that brings each optional package (``pip install 'openenv-gym[EXTRA]'``)."""


def install_hint(exc: ImportError) -> str | None:
    """The one line for a missing optional package, or None when ``exc`` is about another.

    >>> install_hint(ModuleNotFoundError("No module named 'docker'", name="docker"))
    "this command needs the docker package: pip install 'openenv-gym[docker]'"
    >>> install_hint(ModuleNotFoundError("No module named 'nope'", name="nope")) is None
    True
    """
    package = (exc.name or "").partition(".")[0]
    extra = EXTRAS.get(package)
    if extra is None:
        return None
    return f"this command needs the {package} package: pip install 'openenv-gym[{extra}]'"


if __name__ == "__main__":
    sys.exit(main())
