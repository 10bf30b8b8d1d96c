"""Running a page's program (code_blocks.Program): its Python blocks in one interpreter, its
shell blocks through their rules, in page order, against local stand-in servers.

Not a test module. :class:`Servers` starts the stand-ins once per test session, each on
first use; :func:`run_program` runs one program in a fresh folder and raises
``AssertionError`` naming the block (``page:line``) that failed, with its output.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml
from code_blocks import (
    CPU,
    HERE,
    MODELS,
    OPENENV_ENVS_DIR,
    ROOT,
    TOKEN,
    Block,
    Program,
    commands,
    encode,
    images_named,
    rule_for,
    server_urls,
    stand_ins,
    substituted,
)

Starter = Callable[[], tuple[str, Callable[[], None]]]
"""Starts a stand-in server: returns its URL and how to stop it."""

SKIP_IN_CHECKOUT = {".git", "build", "site", "dist", "mutants", "node_modules"}


def _version() -> str:
    text = (ROOT / "openenv_gym" / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match is not None
    return match.group(1)


def _local(kind: str) -> Starter:
    def start() -> tuple[str, Callable[[], None]]:
        from openenv_gym.providers import LocalProvider

        provider = LocalProvider(kind, token=TOKEN)
        (url,) = provider.start()
        return url, provider.close

    return start


class Servers:
    """The stand-in servers of a test session, each started on first use.

    Args:
        starters: Starters of kinds beyond our own envs (``mcp_echo`` in the interop suite).
        folder: Where the tiny model is saved, when a block names a hub model.
    """

    def __init__(self, folder: Path, starters: dict[str, Starter] | None = None) -> None:
        self._folder = folder
        self._starters: dict[str, Starter] = {
            kind: _local(kind) for kind in ("wordle", "echo", "catch")
        }
        self._starters.update(starters or {})
        self._urls: dict[str, str] = {}
        self._stops: list[Callable[[], None]] = []
        self._model: str | None = None
        self._pods: dict[str, list[str]] | None = None
        self._images: dict[str, str] = {}
        self._official: Any = None
        self._built = False
        self.ran: set[str] = set()
        """Example commands that ran this session: a command shown on several pages runs once."""

    def url(self, kind: str) -> str:
        if kind not in self._urls:
            if kind not in self._starters:
                raise AssertionError(f"no stand-in server of kind {kind!r} in this suite")
            url, stop = self._starters[kind]()
            self._stops.append(stop)
            self._urls[kind] = url
        return self._urls[kind]

    def image(self, kind: str) -> str:
        """The official-like image of tests/docker standing in for an image of :data:`IMAGES`,
        under a tag of the docs tests' own (``openenv-gym-test/docs-KIND:latest``): another
        test session on the machine untagging tests/docker's tags does not pull it away."""
        if kind not in self._images:
            sys.path.insert(0, str(ROOT / "tests" / "docker"))
            from docker_support import OfficialImages

            from openenv_gym.providers.docker import docker_client

            client = docker_client()
            if self._official is None:
                self._official = OfficialImages(client)
                self._stops.append(self._official.close)
            repository, tag = f"openenv-gym-test/docs-{kind}", "latest"
            for attempt in (1, 2):
                try:
                    client.images.get(self._official.get(kind)).tag(repository, tag)
                    break
                except Exception:  # a tag it built on was untagged meanwhile: build again
                    self._official.built.clear()
                    if attempt == 2:
                        raise
            self._images[kind] = f"{repository}:{tag}"
            self._stops.append(lambda: _untag([f"{repository}:{tag}"]))
        return self._images[kind]

    def our_images(self) -> None:
        """Our Wordle image, built from this checkout once (tests/docker builds it so too)."""
        if not self._built:
            from docker_support import BASE_IMAGE

            from openenv_gym.images import build_images

            build_images(["wordle"], base_image=BASE_IMAGE)
            self._built = True

    def tiny_model(self) -> str:
        """A copy of the tiny offline model and its tokenizer, standing in for hub models."""
        if self._model is None:
            from openenv_gym.integrations.tiny import tiny_model, tiny_tokenizer

            path = self._folder / "tiny-model"
            tokenizer = tiny_tokenizer()
            tiny_model(tokenizer).save_pretrained(path)
            tokenizer.save_pretrained(path)
            self._model = str(path)
        return self._model

    def pods(self) -> dict[str, list[str]]:
        """Servers standing in for deploy/kubernetes' StatefulSet: one per replica, each on
        a loopback address of its own at the manifests' port; returns the DNS names (pods,
        Service, with and without the namespace) and the addresses they resolve to."""
        if self._pods is None:
            self._pods = self._start_pods()
        return self._pods

    def _start_pods(self) -> dict[str, list[str]]:
        docs = []
        for path in (ROOT / "deploy" / "kubernetes").glob("*.yaml"):
            docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        (sts,) = [d for d in docs if d.get("kind") == "StatefulSet"]
        name, spec = sts["metadata"]["name"], sts["spec"]
        service, replicas = spec["serviceName"], spec["replicas"]
        (container,) = spec["template"]["spec"]["containers"]
        port = container["ports"][0]["containerPort"]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        kind = env.get("OPENENV_GYM_SERVER") or "wordle"
        net = f"127.{random.randrange(100, 250)}.{random.randrange(1, 250)}"
        addresses = [f"{net}.{i + 1}" for i in range(replicas)]
        serve = [sys.executable, "-m", "openenv_gym", "serve", kind, "--port", str(port)]
        processes = [
            subprocess.Popen(
                [*serve, "--host", a],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "OPENENV_GYM_TOKEN": TOKEN},
                start_new_session=True,
            )
            for a in addresses
        ]
        for process in processes:
            self._stops.append(lambda p=process: _stop(p))
        for process, address in zip(processes, addresses, strict=True):
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line == f"http://{address}:{port}", f"a pod stand-in printed {line!r}"
        hosts: dict[str, list[str]] = {}
        suffixes = ["", ".default", ".default.svc", ".default.svc.cluster.local"]
        for suffix in suffixes:
            hosts[service + suffix] = addresses
            for i, address in enumerate(addresses):
                hosts[f"{name}-{i}.{service}{suffix}"] = [address]
        return hosts

    def close(self) -> None:
        while self._stops:
            self._stops.pop()()


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class PythonSession:
    """One interpreter running a page's Python blocks in order (block_runner.py)."""

    def __init__(self, folder: Path, env: dict[str, str], python: str) -> None:
        read, write = os.pipe()
        self.log = folder / "python.log"
        self._log = self.log.open("w")
        self.process = subprocess.Popen(
            [python, str(HERE / "block_runner.py"), str(write)],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=folder,
            env=env,
            text=True,
            pass_fds=(write,),
            start_new_session=True,
        )
        os.close(write)
        self._replies: IO[str] = os.fdopen(read, encoding="utf-8")

    def run(self, block: Block, code: str, timeout: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        padded = "\n" * block.line + code  # tracebacks name the page's line numbers
        self.process.stdin.write(json.dumps({"code": padded, "page": block.page}) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self._replies], [], [], timeout)
        line = self._replies.readline() if ready else ""
        if not line:
            self.close()
            why = "timed out" if not ready else "the interpreter died"
            raise AssertionError(f"{block.where}: {why}\n{self.tail()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def tail(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log.read_text(errors="replace")[-6000:]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the blocks are over: the interpreter exits
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._replies.close()
        self._log.close()


def _checkout(program: Program, folder: Path) -> Path:
    """The reader's checkout: the repository's files (links to them), or for a page that
    tags (git tag) a clone of this one, with the release prepared as docs/release.md's
    step 2 says (the changelog's [Unreleased] section named for the version, committed)."""
    path = folder / "checkout"
    tags = any(
        c.argv[:2] == ["git", "tag"]
        for b in program.steps
        if b.lang in ("bash", "console")
        for c in commands(b)
    )
    if not tags:
        path.mkdir()
        for entry in ROOT.iterdir():
            if entry.name not in SKIP_IN_CHECKOUT and not entry.name.startswith(".venv"):
                (path / entry.name).symlink_to(entry)
        return path
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    changelog = path / "CHANGELOG.md"
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    text = changelog.read_text()
    changelog.write_text(
        text.replace("## [Unreleased]", f"## [Unreleased]\n\n## [{_version()}] - {today}", 1)
    )
    git = ["git", "-C", str(path), "-c", "user.name=docs", "-c", "user.email=docs@example.org"]
    subprocess.run([*git, "commit", "-q", "-am", f"release: {_version()}"], check=True)
    return path


def _install_entry_points(block: Block, folder: Path) -> None:
    """What ``pip install`` of the reader's package makes of its entry points."""
    project = tomllib.loads(block.code)["project"]
    name = str(project.get("name", "docs-package"))
    info = folder / f"{name.replace('-', '_')}-0.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\n")
    lines = []
    for group, entries in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


RUN_ONCE = ("example", "scripts-run")


def _shell_text(block: Block, text: str, servers: Servers, folder: Path, suite: str) -> str:
    # the page's own /tmp/ paths go to the test's folder, before any stand-in is put in (a
    # stand-in is an absolute path into the checkout, which may itself lie under /tmp)
    text = re.sub(r"(?<![\w/.-])/tmp/", f"{folder}/tmp/", text.replace("X.Y.Z", _version()))
    urls = {url: servers.url(kind) for url, kind in server_urls(block).items()}
    for url, local in sorted(urls.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"{re.escape(url)}(?!\d)", local, text)
    replace = {**stand_ins(suite), **_images(text, servers)}
    for old, new in replace.items():
        text = re.sub(rf"(?<![\w/]){re.escape(old)}(?!\w)", lambda _, new=new: new, text)
    return text


def _shell_script(block: Block, servers: Servers, folder: Path, suite: str) -> str:
    lines = ["set -euo pipefail", 'docs_shim() { "$DOCS_PYTHON" "$DOCS_SHIMS" "$@"; }']
    for command in commands(block):
        rule = rule_for(command)
        text = _shell_text(block, command.text, servers, folder, suite)
        if rule.shim in RUN_ONCE and not command.output and text in servers.ran:
            lines.append(f"# ran on an earlier page: {text}")
            continue
        if command.output and rule.shim not in ("run", "docker-cli", "serve", *RUN_ONCE):
            raise AssertionError(
                f"{block.where}: output shown after {command.text!r}, which is not run"
            )
        if rule.shim is None:
            lines.append(text)
        else:
            shown = "\n".join(command.output)
            lines.append(f"docs_shim {rule.shim} '{encode(text)}' '{encode(shown)}'")
    return "\n".join(lines) + "\n"


def block_env(
    folder: Path, suite: str, servers: Servers | None = None, hosts: bool = False
) -> dict[str, str]:
    path = [str(folder)]
    if suite == "openenv":
        path.append(str(ROOT / OPENENV_ENVS_DIR))  # OpenEnv's envs, as pip install -e makes them
    env = {
        **os.environ,
        "OPENENV_GYM_TOKEN": TOKEN,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")]),
        "MINARI_DATASETS_PATH": str(folder / "minari"),
        "HF_HUB_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        "DOCS_ROOT": str(ROOT),
        "DOCS_PYTHON": sys.executable,
        "DOCS_SHIMS": str(HERE / "shell_shims.py"),
        "DOCS_TMP": str(folder),
    }
    if hosts and servers is not None:
        env["DOCS_HOSTS"] = json.dumps(servers.pods())
    return env


def _images(code: str, servers: Servers) -> dict[str, str]:
    return {image: servers.image(kind) for image, kind in images_named(code).items()}


def _extra(block: Block, servers: Servers) -> dict[str, str]:
    extra: dict[str, str] = _images(block.code, servers)
    if any(model in block.code for model in MODELS):
        path = servers.tiny_model()
        extra.update({model: value.format(tiny_model=path) for model, value in MODELS.items()})
    if extra or "GRPOConfig" in block.code:
        extra.update(CPU)
    return extra


def run_program(program: Program, servers: Servers, folder: Path, timeout: float = 600) -> None:
    """Run ``program``'s blocks in page order; AssertionError names the block that failed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tmp").mkdir(exist_ok=True)
    uses_pods = any(re.search(r"\b(statefulset|service)_urls\(", b.code) for b in program.steps)
    env = block_env(folder, program.suite, servers, hosts=uses_pods)
    checkout = _checkout(program, folder)
    session: PythonSession | None = None
    if "docker" in program.needs:
        sys.path.insert(0, str(ROOT / "tests" / "docker"))  # docker_support
    if any(
        b.lang == "python" and re.search(r"""provider=["']docker["']""", b.code)
        for b in program.steps
    ):
        servers.our_images()  # the docker provider's default image
    tags = _tags(program)
    timings: list[tuple[str, float]] = []
    try:
        for block in program.steps:
            started = time.monotonic()
            timings.append((block.where, started))
            if block.lang == "python":
                extra = {**_extra(block, servers), **stand_ins(program.suite)}
                code = substituted(block, servers.url, extra)
                if block.file_name is not None:
                    target = folder / block.file_name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(code, encoding="utf-8")
                    continue
                session = session or PythonSession(folder, env, sys.executable)
                reply = session.run(block, code, timeout)
                if not reply["ok"]:
                    raise AssertionError(
                        f"{block.where} raised:\n{reply['error']}\n--- output:\n{session.tail()}"
                    )
            elif block.lang in ("bash", "console"):
                script = _shell_script(block, servers, folder, program.suite)
                result = subprocess.run(
                    ["bash", "-c", script],
                    cwd=checkout,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
                sys.stdout.write(result.stderr)  # the time each command took (pytest -rP)
                if result.returncode != 0:
                    raise AssertionError(
                        f"{block.where} failed (status {result.returncode}):\n"
                        f"{script}\n--- stdout:\n{result.stdout[-3000:]}\n"
                        f"--- stderr:\n{result.stderr[-4000:]}"
                    )
                for command in commands(block):
                    if rule_for(command).shim in RUN_ONCE and not command.output:
                        text = _shell_text(block, command.text, servers, folder, program.suite)
                        servers.ran.add(text)
            else:
                _install_entry_points(block, folder)
    finally:
        if session is not None:
            session.close()
        if tags:
            _untag(tags)
        ends = [t for _, t in timings[1:]] + [time.monotonic()]
        for (where, started), ended in zip(timings, ends, strict=True):
            print(f"{ended - started:7.1f} s  {where}")  # shown by pytest -rP
    if "docker" in program.needs and session is not None:
        _no_containers_left(program, session.process.pid)


def _no_containers_left(program: Program, pid: int) -> None:
    """The containers the page's interpreter started ended with it (they are labelled with
    its pid); any left are removed, and the test fails."""
    from docker_support import ours

    from openenv_gym.providers.docker import docker_client

    left = ours(docker_client(), owner=pid)
    for container in left:
        container.remove(force=True)
    assert not left, f"{program.name}: containers left behind: {[c.short_id for c in left]}"


def _tags(program: Program) -> list[str]:
    """Images the program's commands tag (``--tag NAME``): removed when it ends."""
    found = []
    for block in program.steps:
        if block.lang in ("bash", "console"):
            for command in commands(block):
                words = command.argv
                found += [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--tag"]
    return found


def _untag(tags: list[str]) -> None:
    from openenv_gym.providers.docker import docker_client

    client = docker_client()
    for tag in tags:
        try:
            client.images.remove(tag)
        except Exception as exc:  # not made (the block failed before) or in use
            print(f"could not remove {tag}: {exc}")
