"""The local provider: real server subprocesses, their lifetime, and no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from openenv_gym._http import get_json
from openenv_gym.exceptions import AuthenticationError, ConfigurationError, ProviderError
from openenv_gym.providers import LocalProvider, UrlProvider, make_provider

pytestmark = pytest.mark.integration


def wait_gone(pid: int, within: float = 15.0) -> bool:
    """Poll until ``pid`` has exited (a bound on waiting, not a speed check)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid):
            return True
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_start_health_and_close() -> None:
    provider = LocalProvider("echo", num_servers=2)
    try:
        urls = provider.start()
        assert len(urls) == 2
        assert len(set(urls)) == 2
        assert all(u.startswith("http://127.0.0.1:") for u in urls)
        assert provider.start() == urls  # idempotent
        for k, url in enumerate(urls):
            auth = {"Authorization": f"Bearer {provider.token(k)}"}
            assert get_json(f"{url}/health", 2.0, headers=auth) == (200, {"status": "healthy"})
        pids = provider.pids
    finally:
        provider.close()
    provider.close()
    assert all(wait_gone(pid, 0.1) for pid in pids)


def test_context_manager_stops_servers() -> None:
    with LocalProvider("catch") as provider:
        (pid,) = provider.pids
        assert psutil.pid_exists(pid)
    assert wait_gone(pid, 0.1)


def test_unknown_server_fails_with_its_stderr() -> None:
    provider = LocalProvider("no_such_module:Nothing", start_timeout=20)
    with pytest.raises(ProviderError, match="cannot import"):
        provider.start()
    assert all(s.process is None or s.process.poll() is not None for s in provider.servers)


def test_server_exits_when_client_is_sigkilled(tmp_path) -> None:
    script = tmp_path / "client.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from openenv_gym.providers import LocalProvider
            p = LocalProvider("wordle")
            p.start()
            print(p.pids[0], flush=True)
            time.sleep(600)
            """
        )
    )
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = client.stdout.readline()
        server_pid = int(line)
        assert psutil.pid_exists(server_pid)
        os.kill(client.pid, signal.SIGKILL)
        client.wait(10)
        assert wait_gone(server_pid), "the server outlived its SIGKILLed client"
    finally:
        if client.poll() is None:
            client.kill()
        client.wait()
        if client.stdout:
            client.stdout.close()


def test_make_provider_choices() -> None:
    assert isinstance(make_provider("echo", base_url="http://h:1"), UrlProvider)
    assert isinstance(make_provider("echo"), LocalProvider)
    custom = UrlProvider(["http://a:1/", "b:2"])
    assert make_provider("echo", provider=custom) is custom
    assert custom.start() == ["http://a:1", "b:2"]
    with pytest.raises(ConfigurationError):
        make_provider("echo", provider="url")
    with pytest.raises(ConfigurationError):
        make_provider("echo", provider="local", base_url="http://h:1")
    with pytest.raises(ConfigurationError):
        make_provider("echo", provider="k8s")
    with pytest.raises(ConfigurationError):
        UrlProvider([])
    with pytest.raises(ConfigurationError):
        LocalProvider("echo", num_servers=0)


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_every_server_demands_a_token_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_GYM_TOKEN", raising=False)
    provider = LocalProvider("echo", num_servers=2)
    try:
        urls = provider.start()
        tokens = [provider.token(0), provider.token(1)]
        assert all(tokens)
        assert tokens[0] != tokens[1]
        for url, token, other in zip(urls, tokens, reversed(tokens), strict=True):
            assert get_json(f"{url}/health", 2.0, headers=auth(token))[0] == 200
            for wrong in (None, other):
                with pytest.raises(AuthenticationError):
                    get_json(f"{url}/health", 2.0, headers=None if wrong is None else auth(wrong))
    finally:
        provider.close()


def test_token_given_or_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_GYM_TOKEN", "from-env")
    assert LocalProvider("echo", num_servers=2).token(1) == "from-env"
    with LocalProvider("echo", token="given") as provider:
        assert provider.token(0) == "given"
        url = provider.start()[0]
        assert get_json(f"{url}/health", 2.0, headers=auth("given"))[0] == 200


def test_restart_replaces_a_killed_server() -> None:
    provider = LocalProvider("echo", num_servers=2)
    try:
        urls = provider.start()
        old_pid, old_token = provider.pids[0], provider.token(0)
        with pytest.raises(ProviderError):
            LocalProvider("echo").restart(0)  # never started
        assert provider.alive(0)
        os.kill(old_pid, signal.SIGKILL)
        deadline = time.monotonic() + 15  # its threads go after it: a moment as a zombie
        while provider.alive(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not provider.alive(0)
        url = provider.restart(0)
        assert provider.alive(0)
        assert provider.start() == [url, urls[1]]
        assert provider.pids[0] != old_pid
        assert provider.token(0) != old_token
        assert get_json(f"{url}/health", 2.0, headers=auth(provider.token(0)))[0] == 200
        pids = provider.pids
    finally:
        provider.close()
    assert all(wait_gone(pid) for pid in pids)
    with pytest.raises(ProviderError, match="closed"):
        provider.restart(0)


def test_restart_kills_a_hung_server() -> None:
    provider = LocalProvider("echo")
    try:
        provider.start()
        hung = provider.pids[0]
        os.kill(hung, signal.SIGSTOP)
        assert provider.alive(0)  # stopped is not dead: the client decides it is lost
        provider.restart(0)
        assert wait_gone(hung)
        assert provider.alive(0)
    finally:
        provider.close()
