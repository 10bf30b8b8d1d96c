"""The command line without an optional package, with a URL it cannot check, on long waits.

A command whose extra is not installed prints the install hint on one line (exit 2), never
a traceback: the package is made unimportable in a child interpreter (``sys.modules[name] =
None``, what Python does for a module it must not import). ``check`` refuses URL schemes
other than http(s) and ws(s) before connecting anywhere. ``ray up`` says what it waits for
(``tests/ray/test_ray_pool.py`` runs it on a cluster).
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading

import pytest

from openenv_gym.check import check_server
from openenv_gym.cli import main
from openenv_gym.cli_ray import progress
from openenv_gym.exceptions import ConfigurationError


def without(package: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``openenv-gym ARGV`` in a child where ``package`` cannot be imported."""
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from openenv_gym.cli import main\n"
        f"sys.exit(main({list(argv)!r}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("package", "argv", "extra"),
    [
        ("docker", ["gc"], "docker"),
        ("docker", ["gc", "--all"], "docker"),
        ("ray", ["ray", "status", "--address", "127.0.0.1:1"], "ray"),
    ],
)
def test_a_missing_extra_prints_the_install_hint(package, argv, extra):
    proc = without(package, *argv)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("openenv-gym: error: ")
    assert f"pip install 'openenv-gym[{extra}]'" in lines[0]


def test_gc_from_python_without_docker_says_how_to_install_it():
    code = (
        "import sys; sys.modules['docker'] = None\n"
        "from openenv_gym.exceptions import ProviderError\n"
        "from openenv_gym.providers.docker import gc\n"
        "try:\n"
        "    gc()\n"
        "except ProviderError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'openenv-gym[docker]'" in proc.stdout


@pytest.mark.parametrize("url", ["ftp://x", "file:///etc/passwd", "gopher://host:70"])
def test_check_refuses_other_url_schemes(url, capsys):
    with pytest.raises(ConfigurationError, match="unsupported URL scheme"):
        check_server(url)
    assert main(["check", url]) == 2
    err = capsys.readouterr().err
    scheme = url.partition(":")[0]
    assert err == (
        f"openenv-gym: error: unsupported URL scheme {scheme!r} in {url!r}: use http(s)://, "
        "ws(s):// or host:port\n"
    )


def test_progress_says_it_still_waits():
    out = io.StringIO()
    ticked = threading.Event()

    class Watched(io.StringIO):
        def write(self, text: str) -> int:
            if "still waiting" in text:
                ticked.set()
            return out.write(text)

    with progress("starting 2 server(s)", every=0.05, out=Watched()):
        assert ticked.wait(30)  # the work "runs" until a progress line came
    lines = out.getvalue().splitlines()
    assert lines[0] == "openenv-gym: starting 2 server(s)..."
    assert lines[1].startswith("openenv-gym: starting 2 server(s): still waiting (")
    assert lines[-1].startswith("openenv-gym: starting 2 server(s): done in ")
