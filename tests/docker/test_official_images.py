"""Official OpenEnv images under our runtime: derived, stepped batched, natively, fallbacks.

The images are laid out as upstream's Dockerfiles lay them out (``official_like/``): an MCP
echo and a TextArena-style Wordle in ``/app/env`` + ``/app/.venv`` run by
``cd /app/env && uvicorn server.app:app``; a grid world in the older ``/app/envs/<env>``
layout with ``PYTHONPATH=/app``, not marked concurrent; one started as a script (nothing
says which app it serves) and one with no Python at all. ``DockerProvider(image=...)``
derives each image that can take our runtime once (cached) and steps it over the batched
protocol; ``runtime="native"`` steps the image's own server over OpenEnv's JSON ``/ws``.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

import gymnasium
import numpy as np
import pytest
from docker_support import ours

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym._http import get_json
from openenv_gym.exceptions import AuthenticationError, UnsupportedImageError
from openenv_gym.providers import derive
from openenv_gym.providers.docker import DockerProvider

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(900)]

WORDS = ["[crane]", "[slate]", "[pious]", "[mound]", "[brick]", "[flint]"]


def _step_both(a: Any, b: Any, actions: list[Any], seed: int = 0) -> None:
    """Reset both vector envs with ``seed``, step both with each action: same results."""
    obs_a, _ = a.reset(seed=seed)
    obs_b, _ = b.reset(seed=seed)
    np.testing.assert_equal(obs_a, obs_b)
    for action in actions:
        out_a, out_b = a.step(action), b.step(action)
        for got, want in zip(out_a[:4], out_b[:4], strict=True):
            np.testing.assert_equal(got, want)


def test_mcp_echo_image_is_derived_and_stepped_batched_like_its_own_server(
    client: Any, official: Any
) -> None:
    image = official.get("echo")
    derived = DockerProvider(image=image)
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=4, provider=derived)
    native = gymnasium.make_vec(
        "openenv/Generic-v0", num_envs=4, provider=DockerProvider(image=image, runtime="native")
    )
    try:
        assert derived.launch is not None
        assert derived.launch.runtime == "openenv-gym"
        assert derived.launch.image.startswith(f"{derive.DERIVED_REPOSITORY}/")
        assert envs.unwrapped.protocols == ("batch",)
        assert native.unwrapped.protocols == ("json",)
        assert len(ours(client)) == 2
        native.action_space.seed(3)
        _step_both(envs, native, [native.action_space.sample() for _ in range(4)])
        # the same hardening as our own images, and its token demanded
        container = derived.containers[0]
        config, host = container.attrs["Config"], container.attrs["HostConfig"]
        assert config["User"] == derive.USER
        assert config["Healthcheck"]["Test"][0] == "CMD"
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        bindings = [b for port in host["PortBindings"].values() for b in port]
        assert bindings
        assert all(b["HostIp"] == "127.0.0.1" for b in bindings)
        [url] = derived.start()
        with pytest.raises(AuthenticationError):
            get_json(f"{url}/health", 10.0)
        auth = {"Authorization": f"Bearer {derived.token(0)}"}
        assert get_json(f"{url}/health", 10.0, headers=auth)[0] == 200
    finally:
        envs.close()
        native.close()
    assert ours(client) == []


def test_image_short_form_steps_a_textarena_image_batched_by_its_id(
    client: Any, official: Any
) -> None:
    image = official.get("textarena")
    envs = gymnasium.make_vec("openenv/Wordle-v0", num_envs=4, image=image)
    native = gymnasium.make_vec(
        "openenv/Wordle-v0", num_envs=4, provider=DockerProvider(image=image, runtime="native")
    )
    try:
        assert envs.unwrapped.protocols == ("batch",)
        assert native.unwrapped.protocols == ("json",)
        _step_both(envs, native, [[w] * 4 for w in WORDS], seed=5)
        obs, _ = envs.reset(seed=0)
        assert all(o.startswith("You are Playing Wordle") for o in obs)
        obs, *_ = envs.step(["[crane]"] * 4)
        assert all("You submitted [crane]" in o or o == "Wordle-v0" for o in obs)
    finally:
        envs.close()
        native.close()
    env = gymnasium.make("openenv/Generic-v0", image=official.get("echo"))
    try:
        assert env.unwrapped.protocol == "batch"
        env.reset(seed=0)
        env.step(env.action_space.sample())
    finally:
        env.close()


def test_env_not_marked_concurrent_gets_a_process_per_session_in_one_container(
    client: Any, official: Any
) -> None:
    image = official.get("grid")
    single = DockerProvider(image=image)
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=8, provider=single)
    try:
        assert envs.unwrapped.protocols == ("batch",)
        assert len(ours(client)) == 1
        obs, _ = envs.reset(seed=0)
        assert len(set(obs["pid"].tolist())) == 8  # never two sessions in one process
        for _ in range(3):
            obs, *_ = envs.step(envs.action_space.sample())
        assert len(set(obs["pid"].tolist())) == 8
    finally:
        envs.close()
    shared = DockerProvider(image=image, concurrent=True)
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=8, provider=shared)
    try:
        obs, _ = envs.reset(seed=0)
        assert len(set(obs["pid"].tolist())) == 1  # concurrent=True: one process hosts all
        envs.step(envs.action_space.sample())
    finally:
        envs.close()
    assert ours(client) == []


def test_image_we_cannot_read_falls_back_with_one_line_saying_why(
    client: Any, official: Any, caplog: pytest.LogCaptureFixture
) -> None:
    image = official.get("script")
    caplog.set_level(logging.WARNING, logger="openenv_gym.providers")
    provider = DockerProvider(image=image)
    envs = gymnasium.make_vec("openenv/Generic-v0", num_envs=2, provider=provider)
    try:
        assert envs.unwrapped.protocols == ("json",)
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    finally:
        envs.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert image in warnings[0]
    assert "cannot tell which app the image serves" in warnings[0]
    assert provider.launch is not None
    assert provider.launch.runtime == "native"
    with pytest.raises(UnsupportedImageError, match="cannot tell which app"):
        DockerProvider(image=image, runtime="openenv-gym").start()
    assert ours(client) == []


def test_image_without_python_raises_with_runtime_openenv_gym(client: Any, official: Any) -> None:
    image = official.get("scratch")
    with pytest.raises(UnsupportedImageError, match="no Python in the image"):
        DockerProvider(image=image, runtime="openenv-gym").start()
    with pytest.raises(UnsupportedImageError, match="no Python in the image"):
        derive.derive(image, client=client)  # the marker: no second probe
    assert ours(client) == []


def test_derived_images_are_cached_listed_and_removed(client: Any, official: Any) -> None:
    image = official.get("echo")
    first = derive.derive(image, client=client)
    again = derive.derive(image, client=client)
    assert again.cached
    assert again.image == first.image
    cli = [sys.executable, "-m", "openenv_gym", "images"]
    listed = subprocess.run([*cli, "list", "--json"], capture_output=True, text=True, check=True)
    rows = {row["tag"]: row for row in json.loads(listed.stdout)}
    assert rows[first.image]["native"] is None
    assert rows[first.image]["current"]
    printed = subprocess.run([*cli, "derive", image], capture_output=True, text=True, check=True)
    assert printed.stdout.split() == [first.image]
    scratch = official.get("scratch")
    with pytest.raises(UnsupportedImageError):
        derive.derive(scratch, client=client)
    markers = [r for r in derive.derived_images(client) if r.base == scratch and r.current]
    assert markers
    assert all(r.native for r in markers)
    removed = subprocess.run([*cli, "rm", scratch], capture_output=True, text=True, check=True)
    assert {r.tag for r in markers} <= {line.split()[-1] for line in removed.stdout.splitlines()}
    assert not [r for r in derive.derived_images(client) if r.base == scratch]
    assert ours(client) == []
