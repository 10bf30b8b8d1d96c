"""The docker provider against a real engine: images, lockstep vector steps, failures, cleanup.

Needs a running Docker engine and a base image with Python (``.ci/run`` sets both up with
``scripts/docker-engine``, see ``docs/docker.md``); the images are rebuilt from this checkout
once per session.
Every test checks that no container it started is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import gymnasium
import numpy as np
import pytest
from docker_support import BASE_IMAGE, ours

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.exceptions import (
    AuthenticationError,
    ConfigurationError,
    ConnectionLostError,
    EnvErrorGroup,
    ProviderError,
)
from openenv_gym.providers import make_provider
from openenv_gym.providers.docker import (
    LABEL_MANAGED,
    DockerProvider,
    image_name,
)

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="session")
def wordle_image(client: Any) -> str:
    """Build the wordle image from this checkout (wheelhouse + docker build) once."""
    from openenv_gym.images import build_images

    return build_images(["wordle"], base_image=BASE_IMAGE)[0]


def test_make_vec_64_envs_in_4_containers_lockstep(client: Any, wordle_image: str) -> None:
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0", num_envs=64, provider="docker", envs_per_container=16
    )
    local = gymnasium.make_vec("openenv/Wordle-v0", num_envs=64, num_servers=1)
    try:
        assert len(ours(client)) == 4
        urls = envs.unwrapped.base_urls
        assert len(set(urls)) == 4
        assert all(u.startswith("http://127.0.0.1:") for u in urls)
        assert envs.unwrapped.protocols == ("batch",) * 4
        obs, _ = envs.reset(seed=7)
        expected, _ = local.reset(seed=7)
        np.testing.assert_equal(obs, expected)
        local.action_space.seed(0)
        for _ in range(8):
            actions = local.action_space.sample()
            out = envs.step(actions)
            ref = local.step(actions)
            for got, want in zip(out[:4], ref[:4], strict=True):
                np.testing.assert_equal(got, want)
            assert out[1].shape == (64,)
    finally:
        envs.close()
        local.close()
    assert ours(client) == []


def test_killed_container_gives_typed_error_within_step_timeout(
    client: Any, wordle_image: str
) -> None:
    step_timeout = 5.0
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0",
        num_envs=4,
        provider="docker",
        envs_per_container=2,
        timeouts={"step": step_timeout},
    )
    try:
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
        provider = envs.unwrapped._provider
        provider.containers[0].kill()
        with pytest.raises(EnvErrorGroup) as info:
            envs.step(envs.action_space.sample())
        assert info.value.env_indices == [0, 1]  # the killed container's sub-envs only
        # a lost connection, not the step timeout running out
        assert all(isinstance(e, ConnectionLostError) for e in info.value.errors.values())
    finally:
        envs.close()


def test_killed_container_is_restarted_on_server_loss(client: Any, wordle_image: str) -> None:
    envs = gymnasium.make_vec(
        "openenv/Wordle-v0",
        num_envs=4,
        provider="docker",
        envs_per_container=2,
        timeouts={"step": 10.0},
        on_server_loss="restart",
    )
    try:
        envs.reset(seed=0)
        provider = envs.unwrapped._provider
        lost, kept = provider.containers[0].id, provider.containers[1].id
        old_token = provider.token(0)
        provider.containers[0].kill()
        _, rewards, _, truncations, infos = envs.step(["[crane]"] * 4)
        assert truncations.tolist() == [True, True, False, False]
        assert infos["server_lost"].tolist() == [True, True, False, False]
        assert rewards[:2].tolist() == [0.0, 0.0]
        assert provider.containers[1].id == kept
        assert provider.containers[0].id != lost
        assert provider.token(0) != old_token  # a new container, a new token
        assert lost not in {c.id for c in ours(client)}  # the dead one is removed
        obs, *_ = envs.step(["[crane]"] * 4)  # the lost two autoreset on the new container
        assert all(o.startswith("You are Playing Wordle") for o in obs[:2])
    finally:
        envs.close()


def test_containers_demand_their_token(client: Any, wordle_image: str) -> None:
    from openenv_gym._http import get_json

    with DockerProvider("wordle", num_containers=2) as provider:
        urls = provider.start()
        assert provider.token(0) != provider.token(1)
        for k, url in enumerate(urls):
            with pytest.raises(AuthenticationError):
                get_json(f"{url}/health", 5.0)
            auth = {"Authorization": f"Bearer {provider.token(k)}"}
            assert get_json(f"{url}/health", 5.0, headers=auth)[0] == 200


def test_close_removes_every_container(client: Any, wordle_image: str) -> None:
    provider = make_provider("wordle", provider="docker", num_servers=3)
    assert isinstance(provider, DockerProvider)
    with provider:
        assert len(ours(client)) == 3
    assert ours(client) == []
    provider.close()  # idempotent


def test_containers_are_hardened_non_root_and_on_loopback(client: Any, wordle_image: str) -> None:
    with DockerProvider("wordle", num_containers=1, max_sessions=32) as provider:
        container = provider.containers[0]
        container.reload()
        config, host = container.attrs["Config"], container.attrs["HostConfig"]
        assert config["User"] not in ("", "0", "root", "0:0")
        assert container.exec_run(["id", "-u"]).output.strip() != b"0"
        assert "MAX_SESSIONS=32" in config["Env"]
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["Memory"] == 2**30
        assert host["NanoCpus"] == 1_000_000_000
        assert host["PidsLimit"] == 256
        assert "/tmp" in host["Tmpfs"]
        bindings = [b for port in host["PortBindings"].values() for b in port]
        assert bindings
        assert all(b["HostIp"] == "127.0.0.1" for b in bindings)
        assert config["Healthcheck"]["Test"][0] == "CMD"
        # the image's HEALTHCHECK turns healthy (python + urllib, no curl)
        deadline = time.monotonic() + 60
        while container.attrs["State"].get("Health", {}).get("Status") != "healthy":
            assert time.monotonic() < deadline, container.attrs["State"]
            time.sleep(0.5)
            container.reload()


def test_sigkill_of_client_then_gc_leaves_nothing(client: Any, wordle_image: str) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from openenv_gym.providers.docker import DockerProvider
        provider = DockerProvider("wordle", num_containers=2)
        provider.start()
        print(" ".join(c.id for c in provider.containers), flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        ids = child.stdout.readline().split()
        assert len(ids) == 2
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        assert {c.id for c in ours(client, child.pid)} == set(ids)  # SIGKILL: no cleanup ran
        result = subprocess.run(
            [sys.executable, "-m", "openenv_gym", "gc"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert ours(client, child.pid) == []
        for container_id in ids:
            assert container_id[:12] in result.stdout
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for container in ours(client, child.pid):
            container.remove(force=True)


def test_interpreter_exit_without_close_removes_containers(client: Any, wordle_image: str) -> None:
    script = textwrap.dedent(
        """
        from openenv_gym.providers.docker import DockerProvider
        provider = DockerProvider("wordle", num_containers=2)
        provider.start()
        print(" ".join(c.id for c in provider.containers), flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    ids = set(result.stdout.split())
    assert len(ids) == 2
    left = {c.id for c in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=1"})}
    assert not ids & left


def test_gc_spares_containers_of_a_live_owner(client: Any, wordle_image: str) -> None:
    from openenv_gym.providers.docker import gc

    with DockerProvider("wordle") as provider:
        assert provider.containers[0].id not in gc()
        assert len(ours(client)) == 1


def test_never_healthy_container_raises_with_its_logs(client: Any, wordle_image: str) -> None:
    provider = DockerProvider(
        "wordle", environment={"OPENENV_GYM_SERVER": "no-such-env"}, start_timeout=30
    )
    with pytest.raises(ProviderError, match="no-such-env") as info:
        provider.start()
    assert "last log lines" in str(info.value)
    assert ours(client) == []


def test_start_timeout_names_the_container(client: Any, wordle_image: str) -> None:
    # a server on another port than the one published: never healthy from outside
    provider = DockerProvider("wordle", environment={"PORT": "8001"}, start_timeout=3)
    with pytest.raises(ProviderError, match="not healthy at"):
        provider.start()
    assert ours(client) == []


def test_missing_image_has_a_build_hint(client: Any) -> None:
    provider = DockerProvider(image="openenv-gym/no-such-image:0")
    with pytest.raises(ProviderError, match="no image"):
        provider.start()
    provider = DockerProvider("wordle")
    assert provider.image == image_name("wordle")


def test_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        DockerProvider("generic")
    with pytest.raises(ConfigurationError):
        DockerProvider("wordle", num_containers=0)
    with pytest.raises(ConfigurationError):
        make_provider("wordle", provider="docker", base_url="http://127.0.0.1:1")
    with pytest.raises(ConfigurationError, match="not both"):
        gymnasium.make_vec(
            "openenv/Wordle-v0",
            num_envs=4,
            provider="docker",
            envs_per_container=2,
            envs_per_server=2,
        )


def test_trl_factory_shares_one_container(client: Any, wordle_image: str) -> None:
    from openenv_gym.integrations.trl import environment_factory

    factory = environment_factory("openenv/Wordle-v0", provider="docker")
    try:
        a, b, c = factory(), factory(), factory()
        assert len(ours(client)) == 1  # one container, three sessions
        assert a.env.unwrapped.base_url == c.env.unwrapped.base_url == factory.base_url
        a.reset(seed=1)
        b.reset(seed=1)
        assert "Feedback" in a.guess("crane")
        state = b.env.unwrapped.state()["raw_state"]["game_state"]
        assert "The episode is over" in b.guess(state["secret_word"])
        assert b.get_reward() == 1.0
    finally:
        factory.close()
    assert ours(client) == []  # close() removed the container


def test_container_start_and_removal_are_logged_with_url_and_id(
    client: Any, wordle_image: str, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="openenv_gym.providers")
    provider = DockerProvider("wordle")
    try:
        [url] = provider.start()
        short_id = provider.containers[0].short_id
    finally:
        provider.close()
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert f"docker server started: container {short_id} of {wordle_image} at {url}" in messages
    assert f"docker server stopped: container {short_id[:12]} removed" in messages
