"""What runs in place of a shell command of the docs, by its rule (code_blocks.RULES).

Not a test module: the bash script of a shell block calls ``python shell_shims.py KIND
TEXT OUTPUT`` (TEXT: the command as written, OUTPUT: what a ``console`` block shows after
it, both base64) in the command's working directory. It exits 0 when the command ran (or
checked) as the docs say, else prints why on stderr and exits 1. Settings come from the
environment: ``DOCS_ROOT`` (the repository), ``DOCS_TMP`` (the test's folder).
"""

from __future__ import annotations

import base64
import importlib.metadata
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

ROOT = Path(os.environ.get("DOCS_ROOT", Path(__file__).resolve().parents[2]))
TIMEOUT = float(os.environ.get("DOCS_COMMAND_TIMEOUT", "300"))
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PROJECT["name"])
PORT = re.compile(r"((?:127\.0\.0\.1|localhost|\[::1\]):)\d+")


class Refused(Exception):
    """The command does not do what the docs say."""


def _version() -> str:
    text = (ROOT / "openenv_gym" / "_version.py").read_text()
    match = re.search(r'__version__ = "([^"]+)"', text)
    assert match is not None
    return match.group(1)


def _split(text: str) -> tuple[dict[str, str], list[str]]:
    words = shlex.split(text, comments=True)
    env = {}
    while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def _python(argv: list[str]) -> list[str]:
    """``python``/``python3`` (and ``.venv/bin/python``) -> this interpreter."""
    if argv and re.fullmatch(r"python3?", os.path.basename(argv[0])):
        return [sys.executable, *argv[1:]]
    return argv


# ---------------------------------------------------------------------------------------------
# output shown in console blocks


def _normal(line: str) -> str:
    return PORT.sub(r"\1PORT", line.rstrip())


def _expects_failure(shown: list[str]) -> bool:
    return any(re.search(r"(^|\s|: )error: ", line) for line in shown)


def _compare(shown: list[str], printed: str, status: int) -> None:
    """Every line shown must have been printed (``...`` at the end: a prefix); the status
    is non-zero exactly when the shown output has an ``error:`` line."""
    lines = [_normal(line) for line in printed.splitlines()]
    for line in shown:
        want = _normal(line)
        if not want.strip():
            continue
        if want.endswith("..."):
            ok = any(got.startswith(want[:-3].rstrip()) for got in lines)
        else:
            ok = want in lines
        if not ok:
            raise Refused(f"the docs show {line!r}; it printed:\n{printed[-3000:]}")
    if _expects_failure(shown) and status == 0:
        raise Refused(f"the docs show an error, it exited 0:\n{printed[-3000:]}")
    if not _expects_failure(shown) and status != 0:
        raise Refused(f"exit status {status}:\n{printed[-3000:]}")


def _run(argv: list[str], env: dict[str, str], shown: list[str]) -> None:
    result = subprocess.run(
        argv,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    sys.stdout.write(result.stdout)
    _compare(shown, result.stdout, result.returncode)


# ---------------------------------------------------------------------------------------------
# rules that run


def run(text: str, shown: list[str]) -> None:
    env, argv = _split(text)
    _run(_python(argv), env, shown)


def serve(text: str, shown: list[str]) -> None:
    """Run a server in the foreground until it prints its URL and answers /health, then
    stop it with SIGINT, as a reader's Ctrl-C does; it must exit 0."""
    env, argv = _split(text)
    argv = _python(argv)
    for i, word in enumerate(argv[:-1]):
        if word == "--port" and argv[i + 1] != "0":
            argv[i + 1] = "0"  # a fixed port: a free one
        if word == "--host" and argv[i + 1] not in ("127.0.0.1", "localhost"):
            argv[i + 1] = "127.0.0.1"  # tests listen on loopback only
    process = subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    printed: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            printed.append(line)
            if re.match(r"https?://", line.strip()):
                url = line.strip()
                break
        if url is None:
            process.wait(timeout=30)
            _compare(shown, "".join(printed), process.returncode)
            return
        request = urllib.request.Request(url + "/health")
        token = os.environ.get("OPENENV_GYM_TOKEN")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(request, timeout=30) as reply:
            if reply.status != 200:
                raise Refused(f"{url}/health answered {reply.status}")
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
        printed.append(rest)
        _compare(shown, "".join(printed), process.returncode)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        sys.stdout.write("".join(printed))


BASE_IMAGE = os.environ.get("OPENENV_GYM_TEST_BASE_IMAGE", "local/python-base:bookworm")


def docker_cli(text: str, shown: list[str]) -> None:
    """``openenv-gym images ...``/``gc``: for real; an image builds FROM the local base image
    (scripts/docker-engine makes it: CI reaches no registry) unless the docs name one."""
    env, argv = _split(text)
    if argv[1:3] == ["images", "build"] and "--base-image" not in argv:
        argv += ["--base-image", BASE_IMAGE]
    _run(_python(argv), env, shown)


def _local_image(name: str) -> bool:
    result = subprocess.run(["docker", "image", "inspect", name], capture_output=True, check=False)
    return result.returncode == 0


def docker_pull(text: str, shown: list[str]) -> None:
    """``docker pull IMAGE``: not run; the stand-in IMAGE was pointed at is on the machine."""
    _env, argv = _split(text)
    if not _local_image(argv[-1]):
        raise Refused(f"{argv[-1]} is not on the machine: is it in code_blocks.IMAGES?")


def docker_push(text: str, shown: list[str]) -> None:
    """``docker push IMAGE``: not run (it publishes); IMAGE is on the machine to push."""
    _env, argv = _split(text)
    if not _local_image(argv[-1]):
        raise Refused(f"{argv[-1]} is not on the machine: nothing to push")


EXAMPLE_TESTS = ROOT / "tests" / "examples" / "test_examples.py"


def example(text: str, shown: list[str]) -> None:
    """``python examples/NAME.py ARGS``: checked, not run, when tests/examples runs it so
    (``--smoke`` with the same ARGS, or ``--help``, which it asks of every example); run for
    real, with ``--smoke`` added, when the docs show what it prints."""
    env, argv = _split(text)
    argv = _python(argv)
    path = ROOT / argv[1]
    if not path.is_file():
        raise Refused(f"no example {argv[1]}")
    if shown:
        if not {"--help", "-h", "--smoke"} & set(argv):
            argv.append("--smoke")
        argv[1] = str(path)
        _run(argv, env, shown)
        return
    tests = EXAMPLE_TESTS.read_text()
    args = [a for a in argv[2:] if a != "--smoke"]
    if args in (["--help"], ["-h"]):
        if '"--help"' not in tests:
            raise Refused("tests/examples no longer runs every example with --help")
        return
    if f'run_example("{path.name}"' not in tests:
        raise Refused(f"tests/examples does not run {path.name} with --smoke")
    missing = [a for a in args if f'"{a}"' not in tests]
    if missing:
        raise Refused(f"tests/examples runs {path.name} without {missing}")


def scripts_run(text: str, shown: list[str]) -> None:
    """``bash scripts/run ARGS``: the example the script ends by running, with ARGS."""
    _env, argv = _split(text)
    script = (ROOT / argv[1]).read_text()
    match = re.search(r'^exec "\$VENV/bin/python" (examples/\S+\.py) "\$@"$', script, re.M)
    if match is None:
        raise Refused(f"{argv[1]} no longer ends by running an example: update the rule")
    example(shlex.join(["python", match.group(1), *argv[2:]]), shown)


def git_clone(text: str, shown: list[str]) -> None:
    """``git clone``: the project's repository is this checkout (nothing is downloaded)."""
    env, argv = _split(text)
    repository = PROJECT["urls"]["Source"].removesuffix(".git")
    if repository in (w.removesuffix(".git") for w in argv):
        i = [w.removesuffix(".git") for w in argv].index(repository)
        if not [w for w in argv[i + 1 :] if not w.startswith("-")]:
            argv.append(repository.rsplit("/", 1)[1])  # the folder git names after the URL
        argv[i] = str(ROOT)
    if any(w.startswith(("http://", "https://", "git@")) for w in argv):
        raise Refused(f"clones from the network: {text}")
    _run(argv, env, shown)


# ---------------------------------------------------------------------------------------------
# rules that check


def _declared() -> set[str]:
    names: set[str] = set()
    requirements = list(PROJECT.get("dependencies", []))
    for extra in PROJECT.get("optional-dependencies", {}).values():
        requirements += extra
    for text in requirements:
        try:
            names.add(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
    tools = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {})
    return names | {canonicalize_name(tool) for tool in tools}  # a tool it configures


def _wheel_name() -> str:
    return f"{NAME.replace('-', '_')}-{_version()}-py3-none-any.whl"


def _check_requirement(spec: str) -> None:
    pattern = r"(?P<name>[^\[\]]+?)(?:\[(?P<extras>[^\]]*)\])?(?P<rest>[=<>!~;].*)?"
    match = re.fullmatch(pattern, spec)
    if match is None:
        raise Refused(f"cannot read the requirement {spec!r}")
    name, extras = match.group("name"), match.group("extras")
    wanted = {e.strip() for e in extras.split(",")} if extras else set()
    if "/" in name or name.startswith(".") or name.endswith((".whl", ".tar.gz")):
        path = Path(name)
        if name.endswith(".whl"):
            if path.name != _wheel_name():
                raise Refused(f"{name}: pyproject-build names the wheel {_wheel_name()}")
            ours = True
        else:
            if not path.exists():
                raise Refused(f"{name} does not exist (in {os.getcwd()})")
            project = path / "pyproject.toml"
            ours = project.exists() and (
                canonicalize_name(tomllib.loads(project.read_text())["project"]["name"]) == NAME
            )
        if not ours:
            if wanted:
                raise Refused(f"{name}: extras of another project")
            return
    elif canonicalize_name(name) != NAME:
        requirement = Requirement(spec)
        if canonicalize_name(requirement.name) in _declared():
            return
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            raise Refused(f"{spec}: neither pyproject.toml nor this venv has it") from None
        if version not in requirement.specifier:
            raise Refused(f"{spec}: this venv has {version}")
        return
    extras_known = set(PROJECT.get("optional-dependencies", {}))
    unknown = wanted - extras_known
    if unknown:
        raise Refused(f"{spec}: no extra {sorted(unknown)} in pyproject.toml")


PIP_VALUE_OPTIONS = {
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "-c",
    "--constraint",
    "--python-version",
    "--platform",
}


def pip(text: str, shown: list[str]) -> None:
    """``pip install``: what it names resolves here (nothing is downloaded)."""
    _env, argv = _split(text)
    args = argv[argv.index("install") + 1 :]
    found = 0
    skip = False
    for word in args:
        if skip:
            skip = False
            if not word.startswith("https://download.pytorch.org/whl/"):
                raise Refused(f"an index this rule does not know: {word}")
            continue
        if word in PIP_VALUE_OPTIONS:
            skip = True
            continue
        if word in ("-e", "--editable") or word.startswith("-"):
            if word in ("-r", "--requirement"):
                raise Refused("requirement files: add them to the rule")
            continue
        _check_requirement(word)
        found += 1
    if not found:
        raise Refused(f"installs nothing: {text}")


def _markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lines = config["tool"]["pytest"]["ini_options"]["markers"]
    return {line.split(":", 1)[0].strip() for line in lines}


def _read_somewhere(variable: str) -> bool:
    """Whether code reads ``variable``: quoted in Python, ``$NAME`` in a shell script."""
    quoted = re.compile(rf"""["']{re.escape(variable)}["']""")
    expanded = re.compile(rf"\$\{{?{re.escape(variable)}\b")
    for folder in ("tests", "openenv_gym", "scripts", "benchmarks"):
        for path in (ROOT / folder).rglob("*"):
            if not path.is_file() or path.suffix not in (".py", ""):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            pattern = quoted if path.suffix == ".py" else expanded
            if pattern.search(text):
                return True
    return False


def _pytest(env: dict[str, str], args: list[str]) -> None:
    markers = _markers()
    skip = False
    for i, word in enumerate(args):
        if skip:
            skip = False
            if args[i - 1] == "-m":
                names = set(re.findall(r"[A-Za-z_]\w*", word)) - {"and", "or", "not"}
                if names - markers:
                    raise Refused(f"-m {word}: undeclared markers {sorted(names - markers)}")
            continue
        if word in ("-m", "-p", "-k", "-n", "--maxfail", "--timeout"):
            skip = True
        elif not word.startswith("-"):
            path = word.split("::")[0]
            if not (ROOT / path).exists():
                raise Refused(f"{path} does not exist")
    for variable in env:
        if not _read_somewhere(variable):
            raise Refused(f"{variable} is read by no test or script")


def _calls(script: str, words: list[str]) -> bool:
    """Whether ``script`` runs ``words[0]`` with every option (and subcommand) in words."""
    text = (ROOT / script).read_text()
    tool = words[0]
    for line in text.splitlines():
        line = line.split(" #", 1)[0]
        if re.search(rf"(^|[\s/\"]){re.escape(tool)}(\"?)(\s|$)", line):
            rest = [w for w in words[1:] if not re.search(r"[*?/]", w) or w.startswith("-")]
            if all(re.search(rf"(^|\s){re.escape(w)}(\s|$)", line) for w in rest):
                return True
    return False


def suite(text: str, shown: list[str]) -> None:
    """The test run itself, or a step of it: checked to be what CI runs, not run again."""
    env, argv = _split(text)
    program = os.path.basename(argv[0])
    if program == "bash":
        script = argv[1]
        if not (ROOT / script).is_file():
            raise Refused(f"{script} does not exist")
        if script == "scripts/test":
            if not _calls(".ci/run", ["bash", "scripts/test", *argv[2:]]):
                raise Refused(".ci/run does not run this command")
        elif not _calls("scripts/test", ["bash", script]):
            raise Refused(f"scripts/test does not run {script}")
    elif argv[0].endswith(".ci/run"):
        if not (ROOT / ".ci/run").is_file():
            raise Refused(".ci/run does not exist")
    elif program == "pytest":
        _pytest(env, argv[1:])
    elif re.fullmatch(r"python3?", program) and argv[1:3] == ["-m", "pytest"]:
        _pytest(env, argv[3:])
    elif not _calls("scripts/wheel-smoke", [program, *argv[1:]]):
        raise Refused(f"scripts/wheel-smoke does not run {text!r}")


def mutmut(text: str, shown: list[str]) -> None:
    """``mutmut run|results|show``: not run (hours on two cores; by hand, before a release):
    pyproject.toml configures it, and each selection names a module it mutates (and, for a
    method, ``module.xǁClassǁmethod*``, a class and method that module defines)."""
    _env, argv = _split(text)
    tools = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {})
    config = tools.get("mutmut")
    if config is None:
        raise Refused("pyproject.toml has no [tool.mutmut]")
    if argv[1:2] not in (["run"], ["results"], ["show"], ["browse"]):
        raise Refused(f"mutmut has no command {argv[1:2]}")
    if argv[1] != "run":
        return
    words, patterns = argv[2:], []
    while words:
        word = words.pop(0)
        if word == "--max-children":
            words.pop(0)
        elif not word.startswith("-"):
            patterns.append(word)
    for pattern in patterns:
        parts = pattern.split(".")
        found = [
            k
            for k in range(len(parts), 0, -1)
            if "/".join(parts[:k]) + ".py" in config["only_mutate"]
        ]
        if not found:
            raise Refused(f"{pattern} names no module of [tool.mutmut] only_mutate")
        module = ROOT / ("/".join(parts[: found[0]]) + ".py")
        rest = ".".join(parts[found[0] :])
        if rest.startswith("xǁ"):
            cls, method = rest.split("ǁ")[1:3]
            source = module.read_text()
            if not re.search(rf"^class {re.escape(cls)}\b", source, re.M):
                raise Refused(f"{module.name} defines no class {cls}")
            if not re.search(rf"def {re.escape(method.rstrip('*'))}", source):
                raise Refused(f"{module.name} defines no method {method}")


def _manifests() -> list[dict[str, object]]:
    found = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return found


def _named(kind: str, name: str) -> bool:
    for doc in _manifests():
        meta = doc.get("metadata")
        same_kind = str(doc.get("kind", "")).lower() == kind.lower()
        if same_kind and isinstance(meta, dict) and meta.get("name") == name:
            return True
    return False


def _secret_used(name: str) -> bool:
    text = "\n".join((p.read_text()) for p in (ROOT / "deploy").rglob("*.yaml"))
    return re.search(rf"secretKeyRef:\s*\n\s*name:\s*{re.escape(name)}\b", text) is not None


def kubectl(text: str, shown: list[str]) -> None:
    """kubectl / kustomize: the paths and objects named are those of deploy/."""
    _env, argv = _split(text)
    words = argv[1:]
    for flag in ("-f", "-k", "--filename", "--kustomize"):
        while flag in words:
            i = words.index(flag)
            path = Path(words[i + 1])
            if not path.exists() or "deploy" not in path.resolve().parts:
                raise Refused(f"{path}: not a path under deploy/")
            if flag in ("-k", "--kustomize"):
                kustomization = yaml.safe_load((path / "kustomization.yaml").read_text())
                for resource in kustomization.get("resources", []):
                    if not (path / resource).exists():
                        raise Refused(f"{path}: resource {resource} does not exist")
            del words[i : i + 2]
    if words[:3] == ["create", "secret", "generic"] and not _secret_used(words[3]):
        raise Refused(f"no manifest reads the secret {words[3]}")
    for word in words:
        if "/" in word and not word.startswith("-"):
            kind, _, name = word.partition("/")
            if not _named(kind, name):
                raise Refused(f"no {kind} named {name} in deploy/")


SHIMS: dict[str, Callable[[str, list[str]], None]] = {
    "run": run,
    "docker-cli": docker_cli,
    "docker-pull": docker_pull,
    "docker-push": docker_push,
    "serve": serve,
    "example": example,
    "mutmut": mutmut,
    "scripts-run": scripts_run,
    "git-clone": git_clone,
    "pip": pip,
    "suite": suite,
    "kubectl": kubectl,
}


def main() -> int:
    kind, text, shown = sys.argv[1], *(base64.b64decode(a).decode() for a in sys.argv[2:4])
    started = time.monotonic()
    try:
        SHIMS[kind](text, shown.splitlines() if shown else [])
    except (Refused, subprocess.TimeoutExpired) as exc:
        print(f"docs command {text!r} ({kind}): {exc}", file=sys.stderr)
        return 1
    print(f"docs command {text!r} ({kind}): {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
