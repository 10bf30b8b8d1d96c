"""Echo: OpenEnv's classic ``echo_env``, the trivial environment used by benchmarks.

:func:`.record.record` gives what openenv-gym knows of it (an
:class:`~openenv_gym.envs.EnvRecord`, registered as an entry point); everything here is
imported on first use, so reading the record imports no game code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_gym_servers import lazy_exports

if TYPE_CHECKING:
    from openenv_gym_servers.echo.environment import EchoEnvironment
    from openenv_gym_servers.echo.models import EchoAction, EchoObservation

__all__ = [
    "EchoAction",
    "EchoEnvironment",
    "EchoObservation",
]


_LAZY = {
    "EchoAction": "models",
    "EchoEnvironment": "environment",
    "EchoObservation": "models",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
