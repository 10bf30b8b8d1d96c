"""Which app an OpenEnv image serves, read from its entrypoint and command (no I/O).

Official OpenEnv images start their server in several ways (``docs/official-envs.md``):

* ``sh -c "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"`` (most);
* ``uvicorn finqa_env.server.app:app --host 0.0.0.0 --port 8000`` (the env installed as a
  package), or ``uvicorn envs.grid_world_env.server.app:app ...`` run from ``/app`` with
  ``PYTHONPATH=/app`` (the older layout);
* a shell-form ``CMD uvicorn server.app:app ... --workers ${WORKERS}`` (``/bin/sh -c``).

:func:`served_app` reads any of them the way a shell and uvicorn would (``cd`` changes the
directory, ``exec`` and ``VAR=value`` prefixes are dropped, ``python -m uvicorn`` is
uvicorn) and says which ``module:attribute`` is served, from where, on which port.

    >>> cmd = ["sh", "-c", "cd /app/env && uvicorn server.app:app --port 8000"]
    >>> app = served_app(None, cmd, "/app")
    >>> app.target, app.workdir, app.port
    ('server.app:app', '/app/env', 8000)
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from openenv_gym.exceptions import UnsupportedImageError

__all__ = ["ServedApp", "served_app"]

_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_SEPARATORS = frozenset({"&&", "||", ";", "&", "|", ";;"})
# uvicorn's options that take no value; every other --option takes one
_UVICORN_FLAGS = frozenset(
    {
        "--reload", "--factory", "--proxy-headers", "--no-proxy-headers", "--access-log",
        "--no-access-log", "--use-colors", "--no-use-colors", "--server-header",
        "--no-server-header", "--date-header", "--no-date-header", "--version", "--help",
    }
)  # fmt: skip
_INIT_WRAPPERS = frozenset({"tini", "dumb-init", "catatonit", "env"})


@dataclass(frozen=True, slots=True)
class ServedApp:
    """What an image's command serves.

    Attributes:
        target: uvicorn's app, ``module:attribute`` (None: the command names none; the
            image's ``openenv.yaml`` may).
        workdir: The directory the server starts in (a ``cd DIR`` of the command, else the
            image's working directory).
        app_dir: uvicorn's ``--app-dir`` (put on ``sys.path``), if given.
        factory: uvicorn's ``--factory``: ``target`` is a function returning the app.
        port: The port the image's own server listens on (8000 unless ``--port`` says).
        python: The interpreter the command names (``python3 -m uvicorn ...``), if any.
        in_entrypoint: The server is started by the image's ``ENTRYPOINT`` (a derived image
            replaces it); otherwise by its ``CMD``, and an entrypoint is a wrapper to keep.
        command: The command as one line, for messages.
    """

    target: str | None
    workdir: str
    app_dir: str | None = None
    factory: bool = False
    port: int = 8000
    python: str | None = None
    in_entrypoint: bool = False
    command: str = ""


def served_app(
    entrypoint: Sequence[str] | None, cmd: Sequence[str] | None, workdir: str | None
) -> ServedApp:
    """Read the app an image serves from its ``Entrypoint``, ``Cmd`` and ``WorkingDir``.

    Raises:
        UnsupportedImageError: Neither starts a server we can read (no uvicorn, no ``python -m``).
    """
    entry, command = list(entrypoint or ()), list(cmd or ())
    where = workdir or "/"
    line = shlex.join(entry + command)
    if not entry and not command:
        raise UnsupportedImageError("the image has no command (no ENTRYPOINT, no CMD)")
    # an entrypoint that names the server program (or a shell) starts it, the command holds
    # its arguments; any other entrypoint wraps the command (tini, a set-up script)
    in_entrypoint = bool(entry) and (
        _read(entry, where) is not None or posixpath.basename(entry[0]) in _SHELLS
    )
    app = _read(entry + command, where) if in_entrypoint else None
    if app is None:
        app = _read(command, where) or _read(entry + command, where)
    if app is None:
        raise UnsupportedImageError(
            f"cannot tell which app the image serves: its command `{line}` starts neither "
            "uvicorn nor `python -m MODULE`"
        )
    return ServedApp(
        app.target,
        app.workdir,
        app.app_dir,
        app.factory,
        app.port,
        app.python,
        in_entrypoint,
        line,
    )


def _read(argv: list[str], workdir: str) -> ServedApp | None:
    """The app the argv starts, or None."""
    argv = _unwrap(argv)
    if not argv:
        return None
    if posixpath.basename(argv[0]) in _SHELLS:
        script = _shell_script(argv)
        if script is None:
            return None
        return _read_script(script, workdir)
    return _read_segment(argv, workdir)


def _unwrap(argv: list[str]) -> list[str]:
    """Drop init wrappers (``tini --``, ``dumb-init``, ``env A=B``) in front of a command."""
    while argv and posixpath.basename(argv[0]) in _INIT_WRAPPERS:
        argv = argv[1:]
        while argv and (argv[0].startswith("-") or _is_assignment(argv[0])):
            argv = argv[1:]
    return argv


def _shell_script(argv: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` (options such as ``-e`` before it are allowed)."""
    for index, arg in enumerate(argv[1:], start=1):
        if arg.startswith("-") and "c" in arg[1:] and not arg.startswith("--"):
            return argv[index + 1] if index + 1 < len(argv) else None
        if not arg.startswith("-"):
            return None  # sh script.sh: a script we cannot see into
    return None


def _read_script(script: str, workdir: str) -> ServedApp | None:
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token not in _SEPARATORS:
            segment.append(token)
            continue
        words = _unwrap(_drop_prefixes(segment))
        segment = []
        if not words:
            continue
        if words[0] == "cd":
            target = words[1] if len(words) > 1 else "~"
            if target.startswith(("~", "$", "-")):
                return None  # a directory only the shell knows
            workdir = posixpath.normpath(posixpath.join(workdir, target))
            continue
        app = _read_segment(words, workdir)
        if app is not None:
            return app
    return None


def _is_assignment(word: str) -> bool:
    name, equals, _ = word.partition("=")
    return bool(equals) and name.isidentifier()


def _drop_prefixes(words: list[str]) -> list[str]:
    """Drop ``exec`` and ``VAR=value`` in front of a shell command."""
    while words and (words[0] == "exec" or _is_assignment(words[0])):
        words = words[1:]
    return words


def _read_segment(words: list[str], workdir: str) -> ServedApp | None:
    """One simple command: ``uvicorn ...``, ``python -m uvicorn ...``, ``python -m MOD``."""
    program = posixpath.basename(words[0])
    if program == "uvicorn":
        return _read_uvicorn(words[1:], workdir, None)
    if _PYTHON.match(program):
        args = [w for w in words[1:] if w not in ("-u", "-O", "-B")]
        if len(args) >= 2 and args[0] == "-m":
            if args[1] == "uvicorn":
                return _read_uvicorn(args[2:], workdir, words[0])
            return ServedApp(None, workdir, python=words[0])  # python -m server.app
        if args and args[0].endswith(".py"):
            return ServedApp(None, workdir, python=words[0])
    return None


def _read_uvicorn(args: list[str], workdir: str, python: str | None) -> ServedApp:
    target: str | None = None
    options: dict[str, str] = {}
    flags: set[str] = set()
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg.startswith("--"):
            name, equals, value = arg.partition("=")
            if equals:
                options[name] = value
            elif name in _UVICORN_FLAGS:
                flags.add(name)
            elif index < len(args):
                options[name] = args[index]
                index += 1
        elif target is None:
            target = arg
    port = 8000
    if options.get("--port", "").isdigit():
        port = int(options["--port"])
    app_dir = options.get("--app-dir")
    if app_dir is not None:
        app_dir = posixpath.normpath(posixpath.join(workdir, app_dir))
    if target is not None and ":" not in target:
        target = None  # uvicorn demands module:attribute: not a target we can read
    return ServedApp(target, workdir, app_dir, "--factory" in flags, port, python)
