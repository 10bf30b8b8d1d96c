"""Build official-like Docker images of upstream OpenEnv envs, from a checkout given by path.

    python benchmarks/official_images.py --upstream ../OpenEnv            # all seven families
    python benchmarks/official_images.py --upstream ../OpenEnv --families echo,grid_world

No registry is reachable here, so the images users pull (``registry.hf.space/openenv-*``)
are rebuilt the way upstream's ``envs/<env>/server/Dockerfile`` lays them out, on a local
base image with Python (``--base-image``), with packages from a host wheelhouse
(``pip wheel`` on the host; nothing is fetched inside a build). The env code comes from the
checkout (a working tree or a bare repository: ``git archive``); nothing of it is kept
in this repository. What differs from upstream's images, and why:

* ``openenv`` is the PyPI release (``openenv>=0.10,<0.11``), not the checkout's ``src/``;
* the envs that fetch data at build or run time get a small stand-in: TextArena's Wordle a
  stub NLTK corpus (``words``, and a tagger that tags every word a noun: NLTK's data
  cannot be downloaded here), finqa a synthetic company and questions (its data is a
  dataset on the Hub);
* openspiel installs OpenSpiel's PyPI wheel (``open-spiel``) into the system Python, where
  upstream builds OpenSpiel from source in its own base image.

Prints ``family=image`` lines for ``benchmarks/run.py --methods official --official-images``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
DEFAULT_WHEELHOUSE = REPO_DIR / "build" / "wheelhouse-upstream"
OPENENV = "openenv>=0.10,<0.11"


@dataclass(frozen=True)
class Family:
    """How upstream lays one env out in its image.

    Attributes:
        env_dir: The folder under ``envs/`` in the checkout.
        layout: ``env`` (code in /app/env, venv in /app/.venv, ``cd /app/env && uvicorn
            server.app:app``), ``package`` (the env installed into /app/.venv, ``uvicorn
            <pkg>.server.app:app``), ``older`` (code in /app/envs/<env>, system Python,
            ``PYTHONPATH=/app``), ``system`` (system Python, /app/env on PYTHONPATH,
            shell-form command), as upstream's Dockerfiles do.
        requirements: What the env needs besides openenv and uvicorn.
        environment: ``ENV`` of upstream's Dockerfile (and the stand-ins' settings).
        concurrent: Whether its class is marked ``SUPPORTS_CONCURRENT_SESSIONS``.
    """

    env_dir: str
    layout: str
    requirements: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    concurrent: bool = True


FAMILIES: dict[str, Family] = {
    "echo": Family("echo_env", "env", environment={"ENABLE_WEB_INTERFACE": "true"}),
    "openspiel": Family(
        "openspiel_env",
        "system",
        ("open-spiel",),
        {
            "OPENSPIEL_GAME": "catch",
            "OPENSPIEL_AGENT_PLAYER": "0",
            "OPENSPIEL_OPPONENT_POLICY": "random",
            "WORKERS": "1",
        },
    ),
    "textarena": Family(
        "textarena_env",
        "env",
        ("textarena>=0.6.1", "nltk>=3.9.3"),
        {
            "ENABLE_WEB_INTERFACE": "true",
            "TEXTARENA_ENV_ID": "Wordle-v0",
            "TEXTARENA_DOWNLOAD_NLTK": "0",
            "NLTK_DATA": "/usr/share/nltk_data",
        },
    ),
    "grid_world": Family(
        "grid_world_env",
        "older",
        ("gymnasium>=0.29.0", "numpy>=1.24.0"),
        {"ENABLE_WEB_INTERFACE": "false"},
        concurrent=False,
    ),
    "reasoning_gym": Family("reasoning_gym_env", "env", ("reasoning-gym>=0.1.24",)),
    "connect4": Family("connect4_env", "env", concurrent=False),
    "finqa": Family(
        "finqa_env",
        "package",
        ("pandas>=2.0.0",),
        {"FINQA_DATA_PATH": "/app/env/data", "FINQA_MAX_STEPS": "50", "FINQA_TASK": "finqa"},
        concurrent=False,
    ),
}

_HEALTH = (
    'HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 CMD python3 -c "'
    "import urllib.request; urllib.request.urlopen('http://localhost:8000/health')\" || exit 1"
)
_VENV = "/app/.venv/bin"


def dockerfile(family: Family, base_image: str) -> str:
    """The Dockerfile of one family: upstream's final stage, installed from ``wheels/``."""
    reqs = " ".join(f"'{r}'" for r in (OPENENV, "uvicorn", *family.requirements))
    pip = "--no-cache-dir --disable-pip-version-check --no-index --find-links /wheels"
    env = " ".join(f'{k}="{v}"' for k, v in family.environment.items())
    # upstream's `uv sync --no-editable` (openspiel: `pip3 install .`) also installs the env
    # folder itself as its package (echo_env, textarena_env...): the apps import from it
    project = "--no-deps --no-build-isolation /app/env"
    lines = [f"FROM {base_image}", "COPY wheels /wheels"]
    if family.layout in ("env", "package"):
        lines += [
            "COPY env /app/env",
            f"RUN python3 -m venv /app/.venv && {_VENV}/pip install {pip} {reqs} setuptools wheel "
            f"&& {_VENV}/pip install {pip} {project} "
            f"&& {_VENV}/pip uninstall --yes --quiet pip && rm -rf /wheels /app/env/build",
            "COPY extra/ /",
            "WORKDIR /app",
            'ENV PATH="/app/.venv/bin:$PATH"',
            'ENV PYTHONPATH="/app/env:$PYTHONPATH"',
        ]
    elif family.layout == "older":  # the env is not installed: imported from /app
        lines += [
            f"RUN python3 -m pip install {pip} --break-system-packages {reqs} && rm -rf /wheels",
            f"COPY env /app/envs/{family.env_dir}",
            "WORKDIR /app",
            'ENV PYTHONPATH="${PYTHONPATH}:/app"',
        ]
    else:  # system: OpenSpiel's own base image has its Python in the system
        system = f"python3 -m pip install {pip} --break-system-packages"
        lines += [
            "COPY env /app/env",
            f"RUN {system} {reqs} setuptools wheel && {system} {project} "
            "&& rm -rf /wheels /app/env/build",
            "WORKDIR /app",
            'ENV PYTHONPATH="/app/env"',
        ]
    if env:
        lines.append(f"ENV {env}")
    lines += ["EXPOSE 8000", _HEALTH]
    if family.layout == "env":
        lines.append(
            'CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]'
        )
    elif family.layout == "package":
        package = family.env_dir
        lines.append(
            f'CMD ["uvicorn", "{package}.server.app:app", "--host", "0.0.0.0", "--port", "8000"]'
        )
    elif family.layout == "older":
        module = f"envs.{family.env_dir}.server.app:app"
        lines.append(f'CMD ["uvicorn", "{module}", "--host", "0.0.0.0", "--port", "8000"]')
    else:  # shell form, as openspiel's
        lines.append(
            "CMD uvicorn server.app:app --host 0.0.0.0 --port 8000 --timeout-keep-alive 120 "
            "--workers ${WORKERS}"
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the checkout


def export_env(upstream: Path, env_dir: str, dest: Path) -> str:
    """Copy ``envs/<env_dir>`` of the checkout to ``dest``; the commit it came from."""
    dest.mkdir(parents=True, exist_ok=True)
    bare = (upstream / "HEAD").is_file() and (upstream / "objects").is_dir()
    if bare or (upstream / ".git").exists():
        git = ["git", f"--git-dir={upstream}" if bare else f"--git-dir={upstream / '.git'}"]
        commit = subprocess.run(
            [*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        archive = subprocess.run(
            [*git, "archive", "HEAD", f"envs/{env_dir}"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar.getmembers():
                prefix = f"envs/{env_dir}/"
                if member.name.startswith(prefix):
                    member.name = member.name[len(prefix) :]
                    tar.extract(member, dest, filter="data")
        return commit
    shutil.copytree(upstream / "envs" / env_dir, dest, dirs_exist_ok=True)
    return "worktree"


def env_requirements(env: Path) -> list[str]:
    """The env's own dependencies from its pyproject.toml (openenv itself left out)."""
    pyproject = env / "pyproject.toml"
    if not pyproject.is_file():
        return []
    deps = tomllib.loads(pyproject.read_text("utf-8")).get("project", {}).get("dependencies", [])
    return [d for d in deps if not d.lower().startswith(("openenv", "openenv-core"))]


# --------------------------------------------------------------------------- stand-ins


def nltk_stub(root: Path) -> None:
    """A stand-in for NLTK's ``words`` corpus and English tagger: our Wordle word lists,
    every word tagged a noun (TextArena's Wordle keeps five-letter nouns)."""
    data = REPO_DIR / "servers" / "wordle" / "data"
    secret = (data / "secret_words.txt").read_text("ascii").split()
    valid = (data / "valid_words.txt").read_text("ascii").split()
    words = root / "usr/share/nltk_data/corpora/words"
    words.mkdir(parents=True, exist_ok=True)
    (words / "en-basic").write_text("\n".join(secret) + "\n", "ascii")
    (words / "en").write_text("\n".join(sorted(set(valid) | set(secret))) + "\n", "ascii")
    (words / "README").write_text("openenv-gym benchmark stand-in: Wordle word lists\n")
    tagger = root / "usr/share/nltk_data/taggers/averaged_perceptron_tagger_eng"
    tagger.mkdir(parents=True, exist_ok=True)
    name = "averaged_perceptron_tagger_eng"
    (tagger / f"{name}.weights.json").write_text("{}")
    tags = {w: "NN" for w in set(valid) | set(secret)}
    (tagger / f"{name}.tagdict.json").write_text(json.dumps(tags))
    (tagger / f"{name}.classes.json").write_text('["NN"]')


def finqa_stub(data: Path) -> None:
    """A synthetic company with two tables and a few questions, in finqa's data layout."""
    tables = {
        "revenue": [
            {"segment": "cloud", "2022": 120, "2023": 150},
            {"segment": "devices", "2022": 80, "2023": 70},
        ],
        "employees": [{"region": "emea", "2022": 900, "2023": 950}],
    }
    company = data / "input_companies" / "acme"
    company.mkdir(parents=True, exist_ok=True)
    cleaned = {}
    for name, rows in tables.items():
        (company / f"{name}.json").write_text(json.dumps(rows))
        cleaned[f"acme/{name}"] = {
            "description": f"acme {name} by year",
            "table": json.dumps(rows),
        }
    (data / "input_companies" / "tables_cleaned_all_companies.json").write_text(json.dumps(cleaned))
    questions = data / "benchmark_questions"
    questions.mkdir(parents=True, exist_ok=True)
    with open(questions / "finqa.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "user_query", "company", "question", "answer", "question_type"])
        # answers that read as text (the env's state types ground_truth as a string)
        for i, (segment, answer) in enumerate([("cloud", "$150"), ("devices", "$70")]):
            question = f"What was acme's {segment} revenue in 2023?"
            writer.writerow([i, question, "acme", question, answer, "lookup"])


# --------------------------------------------------------------------------- build


def wheelhouse(requirements: list[str], directory: Path) -> Path:
    """``pip wheel`` of ``requirements`` into ``directory`` on the host (kept between runs)."""
    stamp = directory / ".requirements"
    wanted = "\n".join(sorted(set(requirements))) + "\n"
    if stamp.is_file() and stamp.read_text("utf-8") == wanted:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    print(f"pip wheel {len(requirements)} requirements into {directory} ...", file=sys.stderr)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--wheel-dir", str(directory), *requirements],
        check=True,
    )
    stamp.write_text(wanted, "utf-8")
    return directory


def build(
    family_name: str, upstream: Path, wheels: Path, base_image: str, tag: str, client: object
) -> str:
    """Build one family's image; returns its tag."""
    family = FAMILIES[family_name]
    with tempfile.TemporaryDirectory(prefix=f"official-{family_name}-") as tmp:
        context = Path(tmp)
        commit = export_env(upstream, family.env_dir, context / "env")
        extra = context / "extra"
        extra.mkdir()
        if family_name == "textarena":
            nltk_stub(extra)
        if family_name == "finqa":  # after the install layers: a new stand-in is cheap
            finqa_stub(extra / "app" / "env" / "data")
        (context / "Dockerfile").write_text(dockerfile(family, base_image))
        os.symlink(wheels, context / "wheels")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", dereference=True) as tar:
            for item in sorted(context.iterdir()):
                tar.add(str(item), arcname=item.name)
        buffer.seek(0)
        print(f"building {tag} ({family.env_dir} at {commit}) ...", file=sys.stderr)
        client.images.build(  # type: ignore[attr-defined]
            fileobj=buffer,
            custom_context=True,
            tag=tag,
            rm=True,
            forcerm=True,
            network_mode="none",
            labels={"openenv-gym.bench.upstream": f"{family.env_dir}@{commit}"},
        )
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, required=True, help="an OpenEnv checkout")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument("--base-image", default="local/python-base:bookworm")
    parser.add_argument("--prefix", default="official-like", help="image name prefix")
    parser.add_argument("--wheelhouse", type=Path, default=DEFAULT_WHEELHOUSE)
    args = parser.parse_args(argv)
    import docker

    names = [n for n in args.families.split(",") if n]
    unknown = set(names) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}: choose from {', '.join(FAMILIES)}")
    requirements = {OPENENV, "uvicorn", "setuptools", "wheel"}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            env = Path(tmp) / name
            export_env(args.upstream, FAMILIES[name].env_dir, env)
            requirements.update(FAMILIES[name].requirements)
            requirements.update(env_requirements(env))
    wheels = wheelhouse(sorted(requirements), args.wheelhouse)
    client = docker.from_env()
    for name in names:
        tag = f"{args.prefix}/{name}:latest"
        print(f"{name}={build(name, args.upstream, wheels, args.base_image, tag, client)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
