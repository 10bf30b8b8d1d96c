"""``images build`` streams pip's and docker's output as it comes (INFO, ``openenv_gym.images``).

Before, the wheelhouse ran ``pip wheel --quiet`` with its output captured and the image
build returned docker's log only at the end: two log lines and no progress.
"""

from __future__ import annotations

import logging
import os
import zipfile
from pathlib import Path

import pytest

from openenv_gym.exceptions import ProviderError
from openenv_gym.images import build_images

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(600)]

BASE_IMAGE = os.environ.get("OPENENV_GYM_TEST_BASE_IMAGE", "local/python-base:bookworm")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "openenv_gym.images"]


def test_build_logs_pip_and_docker_lines_as_they_come(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openenv_gym.images")
    [tag] = build_images(["echo"], base_image=BASE_IMAGE, wheelhouse=tmp_path / "wheels")
    lines = _lines(caplog)
    assert any(line.startswith("pip: ") and "openenv" in line.lower() for line in lines), lines
    steps = [line for line in lines if line.startswith(f"{tag}: Step ")]
    assert len(steps) >= 5, lines  # one per Dockerfile instruction, as docker prints them
    assert any(f"{tag}: Successfully tagged {tag}" in line for line in lines), lines


def test_failed_build_says_why_with_the_build_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openenv_gym.images")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "openenv_gym-0.1.0-py3-none-any.whl", "w") as broken:
        broken.writestr("nothing.txt", "not a wheel")  # pip refuses it inside the build
    with pytest.raises(ProviderError) as info:
        build_images(["echo"], base_image=BASE_IMAGE, wheelhouse=wheels, wheels=False)
    message = str(info.value)
    assert message.startswith("building openenv-gym/echo:")
    assert "returned a non-zero code" in message
    assert "Step " in message  # the build log's tail, not only docker's one-line summary
    assert any("pip install" in line for line in _lines(caplog))  # streamed before failing
