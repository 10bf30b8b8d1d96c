"""The Ray provider's arguments, checked before Ray is imported or a cluster is touched."""

from __future__ import annotations

import sys

import gymnasium
import pytest

import openenv_gym  # noqa: F401 - registers the ids
from openenv_gym.cli import main
from openenv_gym.exceptions import ConfigurationError, ProviderError
from openenv_gym.providers import LocalProvider, RayProvider, UrlProvider, make_provider


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_servers": 0}, "num_servers must be a positive integer"),
        ({"num_servers": True}, "num_servers must be a positive integer"),
        ({"placement": "everywhere"}, "placement must be"),
        ({"num_cpus": -1}, "num_cpus must be a number >= 0"),
        ({"resources": {"gpu_node": 0}}, "resources must map names to amounts > 0"),
        ({"num_cpus": 0}, "needs num_cpus > 0 or resources="),
        ({"runtime_env": ["pip"]}, "runtime_env must be a mapping"),
        ({"server_options": ("max_sessions", 1)}, "server_options must be a mapping"),
        ({"max_restarts": -2}, "max_restarts must be an integer >= -1"),
        ({"pool": "no spaces"}, "pool must be 1-63 letters"),
        ({"pool": "shared", "token": "t"}, "pool= attaches to servers that run already"),
        ({"pool": "shared", "app": "m:app"}, "pool= attaches to servers that run already"),
        ({"app": "m:app", "app_dir": "envs/echo_env"}, "app= and app_dir= exclude each other"),
        ({"app": ""}, "app must be MODULE:ATTR"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        RayProvider("echo", **kwargs)  # type: ignore[arg-type]


def test_no_placement_group_may_reserve_nothing() -> None:
    provider = RayProvider("echo", placement=None, num_cpus=0)
    assert provider.plan is not None
    assert provider.plan.bundle == {}


def test_generic_needs_a_server_class_or_a_pool() -> None:
    with pytest.raises(ConfigurationError, match="needs a server class"):
        RayProvider("generic")
    assert RayProvider("generic", pool="shared").plan is None


def test_an_app_is_the_server_of_a_generic_env(tmp_path) -> None:
    plan = RayProvider("generic", app="echo_env.server.app:app", concurrent=True).plan
    assert plan is not None
    assert plan.server_options == {"app": "echo_env.server.app:app", "concurrent": True}
    plan = RayProvider("generic", app_dir=tmp_path, server_options={"max_sessions": 8}).plan
    assert plan is not None
    assert plan.server_options == {"max_sessions": 8, "app_dir": str(tmp_path)}


def test_each_provider_gets_its_own_token() -> None:
    first, second = RayProvider("echo"), RayProvider("echo")
    token = first.token(0)
    assert token is not None
    assert len(token) >= 32
    assert token != second.token(0)
    assert first.token(1) == token  # one token serves all of a provider's servers
    assert first.client_headers() == {"Authorization": f"Bearer {token}"}


def test_without_ray_start_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ProviderError, match=r"pip install 'openenv-gym\[ray\]'"):
        RayProvider("echo").start()


def test_make_provider_passes_options_and_refuses_unknown_ones() -> None:
    provider = make_provider("wordle", provider="ray", num_servers=3, placement="pack")
    assert isinstance(provider, RayProvider)
    assert provider.plan is not None
    assert (provider.plan.num_servers, provider.plan.placement) == (3, "pack")
    with pytest.raises(ConfigurationError, match="placement: neither the env's nor provider local"):
        make_provider("wordle", placement="pack")
    with pytest.raises(ConfigurationError, match="a provider instance takes no options"):
        make_provider("wordle", provider=UrlProvider("http://127.0.0.1:1"), placement="pack")
    with pytest.raises(ConfigurationError, match="base_url= and provider='ray' exclude"):
        make_provider("wordle", provider="ray", base_url="http://127.0.0.1:1")
    with pytest.raises(ConfigurationError, match="'local', 'docker', 'ray' or 'url'"):
        make_provider("wordle", provider="slurm")
    local = make_provider("echo", provider="local", start_timeout=5.0)
    assert isinstance(local, LocalProvider)
    local.close()


def test_a_misspelt_argument_fails_before_any_server_starts() -> None:
    with pytest.raises(ConfigurationError, match="placment"):
        gymnasium.make_vec("openenv/Echo-v0", num_envs=2, provider="ray", placment="spread")
    with pytest.raises(ConfigurationError, match="placement"):
        gymnasium.make("openenv/Echo-v0", placement="spread")


def test_server_class_with_ray_is_allowed_but_not_with_docker() -> None:
    from openenv_gym.assemble import local_server

    assert local_server(None, "pkg.mod:Env", "ray", None) == "pkg.mod:Env"
    with pytest.raises(ConfigurationError, match="any provider but 'local' and 'ray'"):
        local_server(None, "pkg.mod:Env", "docker", None)


def test_cli_checks_its_json_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ray", "up", "pool", "echo", "--resources", "[1]"])
    assert exited.value.code == 2
    assert "must be a JSON object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ray", "up", "pool", "echo", "--runtime-env", "{nope"])
    assert "not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(
    "module", ["openenv_gym.providers.ray.placement", "openenv_gym.providers.kubernetes"]
)
def test_docstring_examples_run(module: str) -> None:
    import doctest
    import importlib

    failed, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0
    assert failed == 0
