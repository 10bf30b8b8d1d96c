"""Server-side environments of the fault tests (not a test module).

Local server processes import this module by name (``openenv-gym serve --env
openenv_gym_fault_envs:EnteringCounterEnv``) with tests/faults and tests/vector on
``PYTHONPATH`` (the ``counter_servers`` fixture of :mod:`fault_support`).

:class:`EnteringCounterEnv` is the counter env of tests/vector whose :data:`SLOW` step first
creates ``<gate>.entered``: the test then knows the server is inside the step (holding its
reply) and decides when it answers by creating the gate, with no timing involved.
"""

from __future__ import annotations

from pathlib import Path

from openenv_gym_vector_envs import SLOW, CounterAction, CounterEnv, CounterObservation

ENTERING_SPEC = "openenv_gym_fault_envs:EnteringCounterEnv"
"""What ``openenv-gym serve --env`` says."""


def entered(gate: Path) -> Path:
    """The file a SLOW step creates when it starts waiting for ``gate``."""
    return gate.with_name(gate.name + ".entered")


class EnteringCounterEnv(CounterEnv):
    """:class:`CounterEnv`; a SLOW step says it started (``<gate>.entered``) and waits."""

    def step(self, action: CounterAction) -> CounterObservation:
        """Count; a SLOW step creates ``<gate>.entered`` first."""
        if action.value == SLOW and self._gate is not None:
            entered(Path(self._gate)).touch()
        return super().step(action)
