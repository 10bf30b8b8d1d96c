"""Every code block of the README and the docs, and the rule that runs or checks it.

Not a test module: the harness the docs tests share (tests/docs/test_code_blocks.py checks
that every block has a rule, the other tests run them: tests/docs/test_docs_blocks.py,
tests/ray/test_docs_blocks_ray.py, tests/interop/test_docs_blocks_openenv.py). The rules,
for writers of the pages:

* A code block is fenced and says its language. ``python``, ``bash`` and ``console`` blocks
  run; ``text``, ``json``, ``yaml``, ``toml``, ``markdown`` (and the others in
  :data:`SAMPLES`) are samples, not run: the structured ones are parsed. Any other language,
  no language, or an indented code block fails.
* The Python blocks of a page run in order in one interpreter, as a reader runs them: a block
  sees what the blocks before it made. A block whose first line is ``# NAME.py`` (or
  ``# package/NAME.py``) is a file the reader writes: it is saved under that name in the
  page's folder (on ``sys.path``), not run. A ``toml`` block with
  ``[project.entry-points...]`` is the reader's ``pip install`` of their package: its entry
  points are installed in that folder (a ``.dist-info``), as pip would.
* The shell blocks of a page run in the same order, between the Python blocks, each command
  by the first rule of :data:`RULES` it matches; a command no rule matches fails. Rules run
  ``openenv-gym`` and ``python`` commands for real (a server started in the foreground runs
  until it is ready, then is stopped), and check without running what would download
  (``pip install``: the extras and files it names exist), publish (``docker push``), change
  a cluster (``kubectl``: against ``deploy/``), re-enter the test suite (``bash
  scripts/test``, ``pytest``: the same command ``.ci/run`` / ``scripts/test`` run) or run
  an example (``python examples/NAME.py``, ``bash scripts/run``: tests/examples runs it
  with ``--smoke`` and the same arguments; a ``console`` block that shows its output runs
  it).
* Substitutions, all mechanical: a remote URL (:data:`REMOTE`, or any
  ``http://127.0.0.1:PORT``) is pointed at a local server of the env it stands for, started
  once per test session; a hub model id (:data:`MODELS`) at the tiny offline model and
  ``use_vllm=True`` at TRL's transformers generation (:data:`CPU`): CI has no GPU and no hub;
  a fixed port of a server started in the foreground becomes 0 (a free one); ``X.Y.Z`` is the
  version; ``/tmp/`` paths go to the test's folder. A block preceded by
  ``<!-- docs-test sizes: 40_000 -> 512 -->`` runs with those numbers replaced (each must
  occur in the block, and shrink): training runs and big batches finish in seconds. A block
  preceded by ``<!-- docs-test servers: URL=KIND -->`` has URL stand for a local server of
  KIND (:data:`SERVER_KINDS`).
* Where a page's blocks run: the suite their needs (:data:`NEEDS`, :attr:`Rule.need`) say.
  ``plain``, ``trl`` and ``docker`` blocks of a page run together in the main test run (the
  test is marked for the largest need); ``ray`` blocks in tests/ray (a network namespace:
  scripts/test-ray); ``openenv`` blocks (they import OpenEnv) in the interop venvs. Blocks
  that run in different suites do not share an interpreter, so each such group must stand
  on its own.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]
"""Every page whose code blocks must run: the README and the docs site's sources."""

# ---------------------------------------------------------------------------------------------
# fence languages


def _yaml(text: str) -> object:
    return list(yaml.safe_load_all(text))


SAMPLES: dict[str, Callable[[str], object] | None] = {
    "text": None,  # output samples, file trees, diagrams, usage synopses
    "markdown": None,
    "json": json.loads,
    "yaml": _yaml,
    "toml": tomllib.loads,
}
"""Fence languages of blocks that are not run, and the parser a sample must pass."""

RUNNABLE = {"python": "python", "bash": "shell", "console": "shell"}
"""Fence languages of blocks that run: Python, and shell (``console``: ``$ `` prompts and
the output shown after each command, which is compared with what it printed)."""

# ---------------------------------------------------------------------------------------------
# stand-ins for what CI does not have

SERVER_KINDS = ("wordle", "echo", "catch", "mcp_echo")
"""Local servers a URL can stand for: our three envs (``openenv-gym serve NAME``), and
``mcp_echo``, an MCP tool server in the shape of OpenEnv's echo (its tools
``echo_message`` and ``echo_with_length``; the interop suite serves it, with OpenEnv)."""

REMOTE = {
    "https://openenv-wordle.hf.space": "wordle",
    "https://openenv-echo-env.hf.space": "echo",
    "https://my-space.hf.space": "echo",
}
"""The remote servers the pages name, and the kind of local server each is pointed at. A
``http://127.0.0.1:PORT`` or ``http://localhost:PORT`` URL (a server the reader started)
stands for a local Wordle server unless a ``servers:`` line says otherwise."""

LOCAL_URL = re.compile(r"https?://(?:127\.0\.0\.1|localhost):(?P<port>\d+)")
URL = re.compile(r"""https?://[^\s"'`)>\],]+""")

NOT_SERVERS = (
    "https://download.pytorch.org",
    "https://github.com",
    "https://semver.org",
    "https://keepachangelog.com",
)
"""URLs that are not servers to stand in for (package indexes, the repository)."""

MODELS = {"Qwen/Qwen3-0.6B": "{tiny_model}"}
"""Hub model ids, pointed at a copy of the tiny offline model (integrations.tiny)."""

CPU = {"use_vllm=True": "use_vllm=False, use_cpu=True"}
"""GPU-only settings, and what a CPU-only run uses instead (TRL generates with
transformers instead of vLLM)."""

IMAGES = {
    "registry.hf.space/openenv-echo-env:latest": "echo",
    "my/openenv-echo": "echo",
    "my/echo-env:1": "echo",
    "my/textarena-wordle:1": "textarena",
}
"""Docker images the pages name that no CI machine can pull, and the official-like image of
tests/docker (docker_support.OfficialImages: the same app layout, built on the local base
image) each is pointed at. Our own images (``openenv-gym/NAME:VERSION``) are built from the
checkout before a page that uses Docker runs, as tests/docker builds them."""

OPENENV_ENVS = {
    "echo_env": "echo_tool_env",
    "grid_world_env": "grid_walk_env",
    "finqa_env": "tool_qa_env",
    "textarena_env": "word_arena_env",
    "openspiel_env": "spiel_env",
}
"""OpenEnv's env packages (``OpenEnv/envs/NAME``, a checkout of OpenEnv), and the package in
its shape the interop suite has (tests/interop/envs; its ``pip install -e`` is that folder
on ``sys.path``)."""

OPENENV_ENVS_DIR = "tests/interop/envs"


def stand_ins(suite: str) -> dict[str, str]:
    """Text replacements of a suite's blocks: OpenEnv's env packages in the interop suite."""
    if suite != "openenv":
        return {}
    found = {}
    for name, ours in OPENENV_ENVS.items():
        found[f"OpenEnv/envs/{name}"] = str(ROOT / OPENENV_ENVS_DIR / ours)
    for name, ours in OPENENV_ENVS.items():
        found[name] = ours
    return found


TOKEN = "docs-blocks"
"""The bearer token of the local servers, in every block's ``OPENENV_GYM_TOKEN``."""

DIRECTIVE = re.compile(r"<!--\s*docs-test\s+(?P<body>.*?)-->", re.S)
NUMBER = re.compile(r"\d[\d_]*(?:\.\d+)?")

# ---------------------------------------------------------------------------------------------
# blocks


@dataclass(frozen=True)
class Block:
    """One code block of a page, with the ``docs-test`` lines written just before it."""

    page: str
    line: int
    lang: str | None  # None: an indented code block
    code: str
    sizes: tuple[tuple[str, str], ...] = ()
    servers: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """``NAME.py`` when the block is a file to write (its first line is ``# NAME.py``)."""
        if self.lang != "python":
            return None
        first = self.code.split("\n", 1)[0].strip()
        match = re.fullmatch(r"#\s*([\w/-]+\.py)", first)
        return match.group(1) if match else None

    @property
    def module(self) -> str | None:
        """The module a file block is (``my_counter/record.py``: ``my_counter.record``)."""
        name = self.file_name
        return None if name is None else name.removesuffix(".py").replace("/", ".")

    def remote_urls(self) -> list[str]:
        """The URLs the block names that stand for servers."""
        found = [u.rstrip(".") for u in URL.findall(self.code)]
        return [u for u in found if not u.startswith(NOT_SERVERS)]

    def sized(self) -> str:
        """The code with the ``sizes:`` substitutions made."""
        code = self.code
        for old, new in self.sizes:
            code = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, code)
        return code


def _directives(token_text: str) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for match in DIRECTIVE.finditer(token_text):
        key, _, rest = match.group("body").strip().partition(":")
        key = key.strip()
        if key == "sizes":
            pairs = [p.split("->") for p in rest.split(",")]
        elif key == "servers":
            pairs = [p.split("=") for p in rest.split(",")]
        else:
            raise ValueError(f"unknown docs-test line {match.group(0)!r}")
        found.setdefault(key, []).extend((a.strip(), b.strip()) for a, b in pairs)
    return found


@cache
def blocks(page: str) -> tuple[Block, ...]:
    """The code blocks of ``page`` (relative to the repository), in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    tokens = MarkdownIt("commonmark").parse(text)
    found = []
    for i, token in enumerate(tokens):
        if token.type not in ("fence", "code_block"):
            continue
        assert token.map is not None
        lang = token.info.split()[0] if token.type == "fence" and token.info.strip() else ""
        before = tokens[i - 1] if i else None
        said = _directives(before.content) if before and before.type == "html_block" else {}
        found.append(
            Block(
                page,
                token.map[0] + 1,
                lang if token.type == "fence" else None,
                token.content,
                tuple(said.get("sizes", ())),
                tuple(said.get("servers", ())),
            )
        )
    return tuple(found)


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def check_fence(block: Block) -> None:
    """Fail a block that is neither runnable nor a declared sample; parse samples."""
    if block.lang is None:
        raise AssertionError(
            f"{block.where}: an indented code block; fence it and say its language "
            f"(```bash, ```python, or ```text for a sample)"
        )
    if block.lang in RUNNABLE:
        return
    if block.lang not in SAMPLES:
        raise AssertionError(
            f"{block.where}: fence language {block.lang!r} is neither run "
            f"({sorted(RUNNABLE)}) nor a declared sample ({sorted(SAMPLES)})"
        )
    parse = SAMPLES[block.lang]
    if parse is not None:
        try:
            parse(block.code)
        except Exception as exc:
            raise AssertionError(
                f"{block.where}: the {block.lang} sample does not parse: {exc}"
            ) from exc


def check_sizes(block: Block) -> None:
    """A ``sizes:`` line replaces numbers that are in the block by smaller ones."""
    for old, new in block.sizes:
        assert NUMBER.fullmatch(old), f"{block.where}: {old} -> {new}"
        assert NUMBER.fullmatch(new), f"{block.where}: {old} -> {new}"
        assert float(new.replace("_", "")) < float(old.replace("_", "")), (
            f"{block.where}: sizes: {old} -> {new} does not shrink"
        )
        assert re.search(rf"(?<![\w.]){re.escape(old)}(?![\w.])", block.code), (
            f"{block.where}: sizes: {old} is not in the block"
        )


# ---------------------------------------------------------------------------------------------
# what a block needs

SUITES = ("plain", "trl", "docker", "ray", "openenv")
"""Where blocks run: ``plain``, ``trl`` (marker trl) and ``docker`` (marker docker) in the
main test run, ``ray`` in tests/ray, ``openenv`` in the interop venvs."""

RANK = {"plain": 0, "trl": 1, "docker": 2, "ray": 2, "openenv": 2}

NEEDS = (
    ("openenv", re.compile(r"^\s*(from|import)\s+(openenv|fastmcp)\b|\bapp(_dir)?=", re.M)),
    ("ray", re.compile(r"""provider=["']ray["']|^\s*(from|import)\s+ray\b""", re.M)),
    ("docker", re.compile(r"""provider=["']docker["']|\bimage=|DockerProvider""", re.M)),
    ("trl", re.compile(r"^\s*(from|import)\s+(trl|transformers|vllm)\b", re.M)),
)
"""What a Python block needs, read from its code (the first pattern that matches)."""


def python_need(block: Block, openenv_modules: set[str]) -> str:
    code = block.code
    if any(kind == "mcp_echo" for _, kind in block.servers):
        return "openenv"
    if any(re.search(rf"\b{re.escape(m)}\b", code) for m in openenv_modules):
        return "openenv"
    for need, pattern in NEEDS:
        if pattern.search(code):
            return need
    return "plain"


# ---------------------------------------------------------------------------------------------
# shell commands


@dataclass(frozen=True)
class Command:
    """One simple command of a shell block, and (``console``) the output shown after it."""

    block: Block
    text: str
    output: tuple[str, ...] = ()

    @property
    def words(self) -> list[str]:
        return shlex.split(self.text, comments=True)

    @property
    def argv(self) -> list[str]:
        """The words after any ``NAME=value`` assignments."""
        words = self.words
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            words = words[1:]
        return words


def _split(line: str) -> list[str]:
    """``a && b; c`` -> ``[a, b, c]``, outside quotes and ``$(...)``."""
    parts, current, quote, depth, i = [], "", "", 0, 0
    while i < len(line):
        c = line[i]
        if quote:
            current += c
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            current += c
        elif line.startswith("$(", i):
            depth += 1
            current += "$("
            i += 1
        elif c == ")" and depth:
            depth -= 1
            current += c
        elif depth == 0 and (line.startswith("&&", i) or c == ";"):
            parts.append(current)
            current = ""
            i += 1 if c == ";" else 2
            continue
        elif c == "#" and depth == 0 and (not current or current[-1].isspace()):
            break  # a comment
        else:
            current += c
        i += 1
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def commands(block: Block) -> list[Command]:
    """The commands of a shell block, in order."""
    code = block.sized()
    lines = code.splitlines()
    found: list[Command] = []
    if block.lang == "console":
        pending: list[str] = []
        text = ""
        output: list[str] = []
        for line in [*lines, "$ "]:
            if pending and pending[-1].endswith("\\"):
                pending.append(line)
                continue
            if line.startswith("$ ") or line == "$":
                if pending:
                    text = " ".join(p.rstrip("\\").strip() for p in pending)
                    for part in _split(text):
                        found.append(Command(block, part, tuple(output)))
                pending, output = [line[2:]], []
            elif pending:
                output.append(line)
        # the output belongs to the last command of its line
        return _own_outputs(found)
    logical: list[str] = []
    for line in lines:
        if logical and logical[-1].endswith("\\"):
            logical[-1] = logical[-1][:-1] + " " + line.strip()
        else:
            logical.append(line)
    for line in logical:
        found.extend(Command(block, part) for part in _split(line))
    return found


def _own_outputs(found: list[Command]) -> list[Command]:
    fixed = []
    for i, command in enumerate(found):
        last_of_line = i + 1 == len(found) or found[i + 1].output != command.output
        fixed.append(command if last_of_line else Command(command.block, command.text))
    return [c for c in fixed if c.text or c.output]


# ---------------------------------------------------------------------------------------------
# the rules for shell commands


@dataclass(frozen=True)
class Rule:
    """How a kind of shell command is run or checked.

    ``shim`` names what runs in the command's place (tests/docs/shell_shims.py), given the
    command's text: None runs the command itself.
    """

    name: str
    need: str
    what: str
    match: Callable[[Command], bool]
    shim: str | None = None
    runs: bool = True


def _program(command: Command) -> str:
    argv = command.argv
    return os.path.basename(argv[0]) if argv else ""


def _python_m(command: Command, *modules: str) -> bool:
    argv = command.argv
    return (
        len(argv) >= 3
        and re.fullmatch(r"python3?", os.path.basename(argv[0])) is not None
        and argv[1] == "-m"
        and argv[2] in modules
    )


def _cli(command: Command) -> list[str] | None:
    """The arguments of an ``openenv-gym`` (or ``python -m openenv_gym``) command."""
    argv = command.argv
    if argv and argv[0] == "openenv-gym":
        return argv[1:]
    if _python_m(command, "openenv_gym"):
        return argv[3:]
    return None


def _cli_sub(command: Command, *subs: str) -> bool:
    args = _cli(command)
    return args is not None and bool(args) and args[0] in subs


def _serves_in_foreground(command: Command) -> bool:
    args = _cli(command)
    return (
        args is not None
        and args[:1] == ["serve"]
        and not any(
            line.lstrip().startswith("openenv-gym") and "error" in line for line in command.output
        )
    )


def _needs_openenv(command: Command) -> bool:
    args = _cli(command) or []
    return "--app" in args or "--app-dir" in args


def _example(command: Command) -> bool:
    argv = command.argv
    return (
        len(argv) >= 2
        and re.fullmatch(r"python3?", os.path.basename(argv[0])) is not None
        and argv[1].startswith("examples/")
    )


def _example_need(command: Command) -> str:
    name = command.argv[1]
    return "trl" if "trl" in name or "vllm" in name else "plain"


RULES: tuple[Rule, ...] = (
    Rule(
        "serve (OpenEnv app)",
        "openenv",
        "openenv-gym serve --app/--app-dir: hosts an OpenEnv app, so it runs in the interop "
        "venvs; in the foreground until ready, then stopped",
        lambda c: _cli_sub(c, "serve") and _needs_openenv(c),
        "serve",
    ),
    Rule(
        "serve",
        "plain",
        "openenv-gym serve: runs until its URL is printed and /health answers, then is "
        "stopped with SIGINT (it must exit 0); a fixed --port becomes 0",
        _serves_in_foreground,
        "serve",
    ),
    Rule(
        "openenv-gym ray",
        "ray",
        "openenv-gym ray up/status/down: run for real against the Ray test cluster",
        lambda c: _cli_sub(c, "ray"),
        "run",
    ),
    Rule(
        "openenv-gym docker",
        "docker",
        "openenv-gym images/gc: run for real against the Docker engine; images build FROM "
        "the local base image (CI reaches no registry) unless the command names one",
        lambda c: _cli_sub(c, "images", "gc"),
        "docker-cli",
    ),
    Rule(
        "openenv-gym",
        "plain",
        "any other openenv-gym command: run for real (its URLs pointed at local servers)",
        lambda c: _cli(c) is not None,
        "run",
    ),
    Rule(
        "docker pull",
        "docker",
        "docker pull IMAGE: checked, not run (CI reaches no registry): IMAGE is one of "
        "IMAGES, whose stand-in the test built",
        lambda c: c.argv[:2] == ["docker", "pull"],
        "docker-pull",
        runs=False,
    ),
    Rule(
        "docker push",
        "docker",
        "docker push IMAGE: checked, not run (it publishes): the image is on the machine",
        lambda c: c.argv[:2] == ["docker", "push"],
        "docker-push",
        runs=False,
    ),
    Rule(
        "pip install",
        "plain",
        "pip install: checked, not run: each requirement is this project (its extras in "
        "pyproject.toml), a file or folder that exists (a wheel: the name pyproject-build "
        "gives it), or a package pyproject.toml or this venv has",
        lambda c: (_program(c) in ("pip", "pip3") or _python_m(c, "pip")) and "install" in c.argv,
        "pip",
        runs=False,
    ),
    Rule(
        "example",
        "plain",
        "python examples/NAME.py ARGS: checked, not run: tests/examples runs it with "
        "--smoke and the same ARGS (or --help, which it asks of every example); run for real "
        "with --smoke when a console block shows what it prints",
        _example,
        "example",
        runs=False,
    ),
    Rule(
        "test suite",
        "plain",
        "bash scripts/test, .ci/run, pytest, and the tools of scripts/wheel-smoke "
        "(pyproject-build, twine check, check-wheel-contents): checked, not run (they are "
        "the test run itself): the script or paths exist, markers are declared, the "
        "command is the one .ci/run / scripts/test / scripts/wheel-smoke runs",
        lambda c: (
            (
                c.argv[:1] in (["bash"], ["./.ci/run"], [".ci/run"])
                and (c.argv[:2] != ["bash", "scripts/run"])
                and bool(c.argv[1:2])
                and (c.argv[1].startswith(("scripts/test", "scripts/wheel-smoke", ".ci/")))
            )
            or _program(c) in ("pytest", "pyproject-build", "twine", "check-wheel-contents")
            or _python_m(c, "pytest")
        ),
        "suite",
        runs=False,
    ),
    Rule(
        "mutmut",
        "plain",
        "mutmut run/results/show: checked, not run (hours on two cores; docs/testing.md: by "
        "hand, before a release): pyproject.toml configures it and each selection names a "
        "module, class and method it mutates",
        lambda c: _program(c) == "mutmut",
        "mutmut",
        runs=False,
    ),
    Rule(
        "scripts/run",
        "plain",
        "bash scripts/run ARGS: what the script runs after setting up its venv (its example, "
        "with ARGS), by the example rule",
        lambda c: c.argv[:2] == ["bash", "scripts/run"],
        "scripts-run",
        runs=False,
    ),
    Rule(
        "python -m venv",
        "plain",
        "python -m venv DIR: run for real",
        lambda c: _python_m(c, "venv"),
        None,
    ),
    Rule(
        "python -c",
        "plain",
        "python -c CODE: run for real",
        lambda c: (
            len(c.argv) >= 2
            and re.fullmatch(r"python3?", _program(c)) is not None
            and c.argv[1] == "-c"
        ),
        None,
    ),
    Rule(
        "git clone",
        "plain",
        "git clone: run for real; the project's repository URL is pointed at this checkout",
        lambda c: c.argv[:2] == ["git", "clone"],
        "git-clone",
    ),
    Rule(
        "git",
        "plain",
        "git tag/describe: run for real, in a clone of this checkout",
        lambda c: c.argv[:2] in (["git", "tag"], ["git", "describe"]),
        None,
    ),
    Rule(
        "kubectl",
        "plain",
        "kubectl/kustomize: checked, not run, against deploy/kubernetes (the paths and the "
        "objects named exist in the manifests)",
        lambda c: _program(c) in ("kubectl", "kustomize"),
        "kubectl",
        runs=False,
    ),
    Rule(
        "shell",
        "plain",
        "cd, test, grep, a variable assignment: run as written",
        lambda c: (
            re.fullmatch(r"[A-Za-z_]\w*=(\$\(.*\)|\S*)", c.text) is not None
            or _program(c) in ("cd", "test", "grep")
        ),
        None,
    ),
)
"""The rules for shell commands, in the order they are tried: the first that matches."""


def rule_for(command: Command) -> Rule:
    for rule in RULES:
        if rule.match(command):
            return rule
    raise AssertionError(
        f"{command.block.where}: no rule runs or checks {command.text!r} "
        "(tests/docs/code_blocks.py RULES)"
    )


def shell_need(block: Block) -> str:
    needs = [rule_for(c).need for c in commands(block)]
    if _example_commands(block):
        needs += [_example_need(c) for c in _example_commands(block)]
    return max(needs, key=lambda n: RANK[n], default="plain")


def _example_commands(block: Block) -> list[Command]:
    return [c for c in commands(block) if _example(c)]


# ---------------------------------------------------------------------------------------------
# programs: what runs where


@dataclass
class Program:
    """The blocks of one page that run together, in page order, in one suite."""

    page: str
    suite: str
    steps: list[Block] = field(default_factory=list)
    needs: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.page}[{self.suite}]"


def _entry_points(block: Block) -> bool:
    if block.lang != "toml":
        return False
    return "entry-points" in tomllib.loads(block.code).get("project", {})


def programs(page: str) -> list[Program]:
    """The programs of a page: one per test run its blocks need (main, ray, interop)."""
    page_blocks = blocks(page)
    openenv_modules = {
        b.module for b in page_blocks if b.module is not None and python_need(b, set()) == "openenv"
    }
    need: dict[Block, str] = {}
    for block in page_blocks:
        if block.lang == "python":
            need[block] = python_need(block, {m for m in openenv_modules if m != block.module})
        elif block.lang in ("bash", "console"):
            need[block] = shell_need(block)
        elif _entry_points(block):
            need[block] = "plain"
    runs: dict[str, list[Block]] = {}
    for block, wanted in need.items():
        run = {"ray": "ray", "openenv": "openenv"}.get(wanted, "main")
        runs.setdefault(run, []).append(block)
    found = []
    for run, steps in runs.items():
        suite = max((need[b] for b in steps), key=lambda n: RANK[n]) if run == "main" else run
        if not any(b.lang in RUNNABLE and b.file_name is None for b in steps):
            continue  # files only
        found.append(Program(page, suite, steps, frozenset(need[b] for b in steps)))
    return found


def all_programs(suites: tuple[str, ...] = SUITES) -> list[Program]:
    return [p for page in PAGES for p in programs(page) if p.suite in suites]


# ---------------------------------------------------------------------------------------------
# substitutions


@cache
def kubernetes_hosts() -> re.Pattern[str]:
    """Host names of deploy/kubernetes' pods and Service: the pods stand-in resolves them
    (run_blocks.Servers.pods), so URLs naming them are left as they are."""
    names = []
    for path in (ROOT / "deploy" / "kubernetes").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "StatefulSet":
                names.append((doc["metadata"]["name"], doc["spec"]["serviceName"]))
    alternatives = "|".join(
        rf"{re.escape(sts)}-\d+\.{re.escape(svc)}|{re.escape(svc)}" for sts, svc in names
    )
    return re.compile(rf"https?://(?:{alternatives or 'a^'})(?:\.[\w.-]+)?(?::\d+)?$")


def server_urls(block: Block) -> dict[str, str]:
    """Each server URL the block names, and the kind of local server it stands for."""
    said = dict(block.servers)
    found: dict[str, str] = {}
    for url in block.remote_urls():
        local = LOCAL_URL.match(url)
        base = local.group(0) if local else url
        if base in said:
            found[base] = said[base]
        elif base in REMOTE:
            found[base] = REMOTE[base]
        elif local and local.group("port") != "0":
            found[base] = "wordle"
        elif re.match(r"https?://(127\.0\.0\.1|localhost)\b", url):
            continue  # port 0 or PORT: a server that picks its port
        elif kubernetes_hosts().match(url):
            continue
        else:
            raise AssertionError(f"{block.where} names {url}: add it to REMOTE")
    for base, kind in said.items():
        assert kind in SERVER_KINDS, f"{block.where}: servers: unknown kind {kind!r}"
        found[base] = kind
    return found


def images_named(code: str) -> dict[str, str]:
    """The images of :data:`IMAGES` that ``code`` names, and their stand-in kinds."""
    return {image: kind for image, kind in IMAGES.items() if image in code}


def substituted(block: Block, local: Callable[[str], str], extra: dict[str, str]) -> str:
    """The block's code as it runs: sizes, servers, models, CPU settings, ``extra``."""
    code = block.sized()
    for url, kind in sorted(server_urls(block).items(), key=lambda kv: -len(kv[0])):
        code = re.sub(rf"{re.escape(url)}(?![\d])", local(kind), code)
    for old, new in extra.items():
        code = re.sub(rf"(?<![\w/]){re.escape(old)}(?!\w)", lambda _, new=new: new, code)
    return code


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def decode(text: str) -> str:
    return base64.b64decode(text.encode()).decode()


def iter_commands(page: str) -> Iterator[Command]:
    for block in blocks(page):
        if block.lang in ("bash", "console"):
            yield from commands(block)


def python_exe() -> str:
    return sys.executable


def describe_rules() -> list[tuple[str, str]]:
    return [(rule.name, rule.what) for rule in RULES]


__all__ = [
    "CPU",
    "MODELS",
    "PAGES",
    "REMOTE",
    "RULES",
    "SAMPLES",
    "TOKEN",
    "Block",
    "Command",
    "Program",
    "Rule",
    "all_blocks",
    "all_programs",
    "blocks",
    "check_fence",
    "check_sizes",
    "commands",
    "programs",
    "rule_for",
    "server_urls",
    "substituted",
]

_ = Any  # typing only
