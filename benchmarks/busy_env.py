"""A CPU-bound environment for the sharding row: Echo whose step burns a fixed CPU time.

Served as ``openenv-gym serve --env busy_env:BusyEnvironment`` with ``benchmarks/`` on
``PYTHONPATH`` (``run.py`` sets it for its workers and their servers). Each ``step``
spins on the thread's CPU clock for ``OPENENV_GYM_BENCH_BUSY_US`` microseconds
(default 100), then echoes like :class:`~openenv_gym_servers.echo.EchoEnvironment`, so
the client side (spaces, codec) is Echo's. Spinning on the CPU clock, not the wall
clock, makes the cost the same however busy the machine is.
"""

from __future__ import annotations

import os
import time

from openenv_gym.runtime.environment import ObservationBatch
from openenv_gym_servers.echo import EchoAction, EchoEnvironment, EchoObservation

__all__ = ["BUSY_US", "BusyEnvironment", "burn"]

BUSY_US = float(os.environ.get("OPENENV_GYM_BENCH_BUSY_US", "100"))


def burn(microseconds: float) -> None:
    """Spin until this thread has used ``microseconds`` more of CPU time."""
    clock = time.thread_time
    end = clock() + microseconds * 1e-6
    while clock() < end:
        pass


class BusyEnvironment(EchoEnvironment):
    """Echo with a step that costs ``BUSY_US`` µs of CPU.

    Example:
        >>> env = BusyEnvironment()
        >>> _ = env.reset()
        >>> env.step(EchoAction(message="hi")).echoed_message
        'hi'
    """

    def step(self, action: EchoAction) -> EchoObservation:
        """Burn the CPU time, then echo."""
        burn(BUSY_US)
        return super().step(action)

    @classmethod
    def step_batch(cls, envs: list[EchoEnvironment], actions: list[EchoAction]) -> ObservationBatch:
        """Burn each step's CPU time, then echo them all (Echo's batched hook).

        Without this override the runtime took Echo's ``step_batch`` and no step burned.
        """
        for _ in envs:
            burn(BUSY_US)
        return super().step_batch(envs, actions)
