"""Every Python block of the README runs as written.

The blocks run in order in one interpreter (a later block uses what an earlier one made),
their remote URLs pointed at local servers of the env they name (:mod:`code_blocks`). Four
groups, each a test: the plain ones; the MCP tool server (it needs OpenEnv, so the interop
suite runs it: tests/interop/test_readme_mcp_blocks.py); the TRL trainer (marker ``trl``;
its hub model id pointed at a copy of the tiny offline model, as a URL is pointed at a local
server); and the blocks that start an image, which run with the plain ones, in page order
(so that test is marked ``docker``; an image no CI machine can pull is pointed at the
official-like stand-in tests/docker builds, :data:`IMAGES`, as a URL at a local server). A
block in none of the groups fails :func:`test_every_readme_block_belongs_to_a_test`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from code_blocks import REMOTE, Block, blocks, run, script

from openenv_gym.providers import LocalProvider
from openenv_gym.providers.docker import docker_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docker"))
from docker_support import OfficialImages, ours

README = "README.md"

IMAGES = {"registry.hf.space/openenv-echo-env:latest": "echo"}
"""Images the README names that CI cannot pull, and the official-like image standing for each
(tests/docker/official_like: an OpenEnv env laid out as upstream's images lay it out)."""


def _needs(block: Block) -> str:
    if "openenv.core" in block.code or "echo_tools" in block.code:
        return "openenv"
    if "GRPOTrainer" in block.code:
        return "trl"
    if "image=" in block.code:
        return "docker"
    return "plain"


def group(name: str) -> list[Block]:
    return [b for b in blocks(README, "python") if _needs(b) == name]


def test_every_readme_block_belongs_to_a_test() -> None:
    python = blocks(README, "python")
    assert python, "no Python block in the README"
    groups = ("plain", "openenv", "trl", "docker")
    assert sum(len(group(name)) for name in groups) == len(python)
    assert group("openenv"), "the MCP blocks moved: update the groups"
    assert group("trl"), "the TRL block moved: update the groups"
    for block in python:
        unknown = [u for u in block.remote_urls() if u not in REMOTE]
        assert not unknown, f"{block.page}:{block.line} names {unknown}: add them to REMOTE"
    for block in group("docker"):
        named = [image for image in IMAGES if image in block.code]
        assert named, f"{block.page}:{block.line} starts an image not in IMAGES"


def _local_servers() -> tuple[dict[str, str], list[LocalProvider]]:
    providers: dict[str, LocalProvider] = {}
    urls: dict[str, str] = {}
    for remote, env in REMOTE.items():
        if env not in providers:
            providers[env] = LocalProvider(env)
            (urls[env],) = providers[env].start()
        urls[remote] = urls[env]
    return {k: v for k, v in urls.items() if k in REMOTE}, list(providers.values())


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_readme_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "readme-blocks")  # the local servers' token
    client = docker_client()
    official = OfficialImages(client)
    urls, providers = _local_servers()
    try:
        stand_ins = {image: official.get(kind) for image, kind in IMAGES.items()}
        steps = [b for b in blocks(README, "python") if _needs(b) in ("plain", "docker")]
        program = script(steps, {**urls, **stand_ins}, tmp_path)
        # who ran the blocks: the containers they start are labelled with its pid
        result = run(program + "\nimport os; print('pid', os.getpid())\n", tmp_path, 540)
    finally:
        for provider in providers:
            provider.close()
        official.close()
    assert result.returncode == 0, result.stderr[-4000:]
    assert "You submitted [crane]" in result.stdout
    pid = int(result.stdout.split("pid ")[-1].split()[0])
    assert ours(client, owner=pid) == [], "the blocks' containers outlived them"


@pytest.mark.trl
@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_trl_block_runs(tmp_path: Path) -> None:
    from openenv_gym.integrations.tiny import tiny_model, tiny_tokenizer

    model_dir = tmp_path / "tiny-model"
    tokenizer = tiny_tokenizer()
    tiny_model(tokenizer).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    (trainer,) = group("trl")
    program = script([trainer], {"Qwen/Qwen3-0.6B": str(model_dir)}, tmp_path)
    result = run("import os; os.environ['HF_HUB_OFFLINE'] = '1'\n" + program, tmp_path, 540)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "grpo-wordle").is_dir()
