"""Reading the app an image serves from its entrypoint and command (no Docker needed).

The commands are the ones upstream's Dockerfiles use (``docs/official-envs.md``), and the
forms a shell or uvicorn also accepts.
"""

from __future__ import annotations

import pytest

from openenv_gym.exceptions import UnsupportedImageError
from openenv_gym.providers.image_command import served_app
from openenv_gym.providers.wheels import TargetPython


def test_most_envs_cd_into_app_env_and_run_uvicorn() -> None:
    cmd = ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000"]
    app = served_app(None, cmd, "/app")
    assert (app.target, app.workdir, app.port, app.in_entrypoint) == (
        "server.app:app",
        "/app/env",
        8000,
        False,
    )
    assert app.command == "sh -c 'cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port 8000'"


def test_an_env_installed_as_a_package_runs_from_the_working_dir() -> None:
    cmd = ["uvicorn", "finqa_env.server.app:app", "--host", "0.0.0.0", "--port", "8000"]
    app = served_app(None, cmd, "/app")
    assert (app.target, app.workdir) == ("finqa_env.server.app:app", "/app")


def test_the_older_layout_names_the_package_path() -> None:
    cmd = ["uvicorn", "envs.grid_world_env.server.app:app", "--host", "0.0.0.0", "--port", "8000"]
    app = served_app(None, cmd, "/app")
    assert app.target == "envs.grid_world_env.server.app:app"


def test_shell_form_cmd_with_variables_and_workers() -> None:
    script = (
        "uvicorn server.app:app --host 0.0.0.0 --port 8000 --timeout-keep-alive 120 "
        "--workers ${WORKERS}"
    )
    app = served_app(None, ["/bin/sh", "-c", script], "/app")
    assert (app.target, app.workdir, app.port) == ("server.app:app", "/app", 8000)


@pytest.mark.parametrize(
    ("cmd", "target", "workdir", "port"),
    [
        (["sh", "-c", "cd env&&exec uvicorn m:app --port=7860"], "m:app", "/app/env", 7860),
        (["bash", "-ec", "A=1 B=2 exec uvicorn m:app"], "m:app", "/app", 8000),
        (["sh", "-c", "cd /srv; python3 -m uvicorn m:create --factory"], "m:create", "/srv", 8000),
        (
            ["python", "-u", "-m", "uvicorn", "--port", "9000", "pkg.mod:app"],
            "pkg.mod:app",
            "/app",
            9000,
        ),
        (["tini", "--", "uvicorn", "m:app"], "m:app", "/app", 8000),
        (
            ["sh", "-c", "echo starting; cd .. && uvicorn m:app --reload --host ::"],
            "m:app",
            "/",
            8000,
        ),
    ],
)
def test_shell_and_uvicorn_forms(cmd: list[str], target: str, workdir: str, port: int) -> None:
    app = served_app(None, cmd, "/app")
    assert (app.target, app.workdir, app.port) == (target, workdir, port)


def test_factory_app_dir_and_python_are_kept() -> None:
    cmd = ["/app/.venv/bin/python", "-m", "uvicorn", "--factory", "--app-dir", "src", "m:make"]
    app = served_app(None, cmd, "/app")
    assert app.factory
    assert app.app_dir == "/app/src"
    assert app.python == "/app/.venv/bin/python"


def test_an_entrypoint_that_starts_the_server_is_replaced_a_wrapper_is_kept() -> None:
    app = served_app(["uvicorn"], ["server.app:app", "--port", "8001"], "/app/env")
    assert (app.target, app.port, app.in_entrypoint) == ("server.app:app", 8001, True)
    wrapped = served_app(["/docker-entrypoint.sh"], ["uvicorn", "server.app:app"], "/app")
    assert (wrapped.target, wrapped.in_entrypoint) == ("server.app:app", False)
    shell = served_app(["/bin/sh", "-c"], ["cd /app/env && uvicorn server.app:app"], "/")
    assert (shell.target, shell.workdir, shell.in_entrypoint) == (
        "server.app:app",
        "/app/env",
        True,
    )


def test_python_m_module_names_no_app_but_is_read() -> None:
    app = served_app(None, ["python", "-m", "server.app"], "/app/env")
    assert (app.target, app.python, app.workdir) == (None, "python", "/app/env")


@pytest.mark.parametrize(
    ("entrypoint", "cmd"),
    [
        (None, None),
        (None, ["/server"]),
        (None, ["sh", "-c", "cd $HOME && ./run.sh"]),
        (None, ["sh", "script.sh"]),
        (None, ["sh", "-c", "unterminated 'quote"]),
        (["/entrypoint.sh"], None),
        (None, ["gunicorn", "m:app"]),
    ],
)
def test_commands_that_name_no_app_say_so(
    entrypoint: list[str] | None, cmd: list[str] | None
) -> None:
    with pytest.raises(UnsupportedImageError):
        served_app(entrypoint, cmd, "/app")


def test_uvicorn_without_module_attr_names_no_target() -> None:
    assert served_app(None, ["uvicorn", "--port", "8000"], "/").target is None
    assert served_app(None, ["uvicorn", "justamodule"], "/").target is None


def test_wheel_platform_tags_of_glibc_and_musl() -> None:
    glibc = TargetPython((3, 11), "cpython", "x86_64", "glibc", (2, 36)).platforms()
    assert glibc[0] == "manylinux_2_36_x86_64"
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(glibc)
    assert glibc[-1] == "linux_x86_64"
    musl = TargetPython((3, 12), "cpython", "aarch64", "musl", (1, 2)).platforms()
    assert musl == ["musllinux_1_2_aarch64", "musllinux_1_1_aarch64", "musllinux_1_0_aarch64"]
    assert TargetPython((3, 12), "cpython", "aarch64", "musl", (1, 2)).tag == (
        "cp312-musl_1_2-aarch64"
    )
