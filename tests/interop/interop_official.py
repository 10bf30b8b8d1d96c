"""The env packages of ``envs/``, in upstream's shapes, and how each is served both ways.

Not a test module. Each :class:`Family` is an env directory laid out as one of upstream's
(``envs/<name>/openenv.yaml``, ``server/app.py`` building its app with OpenEnv's
``create_app``), served

* **natively**: under uvicorn, as upstream's images run it (:func:`native_argv`: ``cd DIR
  && uvicorn server.app:app``, or the older ``envs.grid_world_env.server.app`` layout from
  the parent directory, or an installed package's module);
* **by us**: ``openenv-gym serve --app-dir DIR`` (:func:`our_argv`).

The families (what upstream env each one is shaped after):

=================  ===============  ==========  =====  =============================
family             shape of         concurrent  MCP    matching id
=================  ===============  ==========  =====  =============================
``echo_tool_env``  echo_env         yes         yes    ``openenv/Echo-v0``
``tool_qa_env``    finqa_env        no          yes    (none)
``grid_walk_env``  grid_world_env   no          no     (none)
``word_arena_env`` textarena_env    yes         no     ``openenv/Wordle-v0``
``spiel_env``      openspiel_env    yes         no     ``openenv/Catch-v0``
``gen_env``        ``openenv init`` yes         no     (none)
=================  ===============  ==========  =====  =============================

``gen_env`` is generated at test time by the installed OpenEnv's own ``openenv init``
(:func:`generate`).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from interop_support import HERE, Server

__all__ = ["ENVS", "FAMILIES", "Family", "Served", "generate", "native_argv", "our_argv"]

ENVS = HERE / "envs"


@dataclass(frozen=True)
class Family:
    """One env directory and how upstream would run it.

    Attributes:
        name: The directory's name (its package name).
        concurrent: Whether its class is marked ``SUPPORTS_CONCURRENT_SESSIONS``.
        mcp: Whether it is an MCP tool environment.
        matching_id: The gymnasium id made for its kind of server, if any.
        layout: How upstream's image runs it: ``"dir"`` (``cd DIR && uvicorn
            server.app:app``), ``"package"`` (the env installed as a package:
            ``uvicorn NAME.server.app:app``), ``"envs"`` (the older layout:
            ``uvicorn envs.NAME.server.app:app`` with the parent of ``envs`` on the path).
        root: Where the directory is (``ENVS`` unless generated).
    """

    name: str
    concurrent: bool
    mcp: bool = False
    matching_id: str | None = None
    layout: str = "dir"
    root: Path = ENVS

    @property
    def directory(self) -> Path:
        """The env directory."""
        return self.root / self.name


FAMILIES = {
    family.name: family
    for family in (
        Family("echo_tool_env", concurrent=True, mcp=True, matching_id="openenv/Echo-v0"),
        Family("tool_qa_env", concurrent=False, mcp=True, layout="package"),
        Family("grid_walk_env", concurrent=False, layout="envs"),
        Family("word_arena_env", concurrent=True, matching_id="openenv/Wordle-v0"),
        Family("spiel_env", concurrent=True, matching_id="openenv/Catch-v0"),
    )
}


def native_argv(family: Family) -> list[str]:
    """``python -m interop_apps --module ...``: the app under uvicorn, as upstream runs it."""
    base = [sys.executable, "-m", "interop_apps"]
    directory = family.directory
    if family.layout == "envs":
        return [*base, "--module", f"envs.{family.name}.server.app:app", "--cwd", str(HERE)]
    if family.layout == "package":
        module = f"{family.name}.server.app:app"
        return [*base, "--module", module, "--cwd", str(directory), "--path", str(family.root)]
    module = "server.app:app"
    return [*base, "--module", module, "--cwd", str(directory), "--path", str(directory)]


def our_argv(family: Family, *extra: str) -> list[str]:
    """``openenv-gym serve --app-dir DIR``."""
    return ["--app-dir", str(family.directory), *extra]


def generate(where: Path) -> Family:
    """``openenv init gen_env`` with the installed OpenEnv, in ``where``: a family."""
    script = Path(sys.executable).with_name("openenv")
    subprocess.run(
        [str(script), "init", "gen_env", "--output-dir", str(where)],
        check=True,
        capture_output=True,
        timeout=600,  # it imports OpenEnv's CLI: a bound against a hang only
    )
    return Family("gen_env", concurrent=True, root=where)


@dataclass(frozen=True)
class Served:
    """A family served both ways.

    Attributes:
        family: What is served.
        native: Under uvicorn, as upstream runs it.
        ours: ``openenv-gym serve --app-dir``.
    """

    family: Family
    native: Server
    ours: Server
