"""Conformance check of any OpenEnv server: ``openenv-gym check URL``.

:func:`check_server` runs nine checks, in order, against a running server and returns a
:class:`CheckReport` (``docs/check.md`` describes each one):

1. ``health`` -- ``GET /health`` is 200 ``{"status": "healthy"}``;
2. ``schema`` -- ``GET /schema`` has ``action``, ``observation`` and ``state`` JSON schemas;
3. ``metadata`` -- ``GET /metadata`` (a warning when absent);
4. ``session`` -- one ``/ws`` session: ``reset``, ``step``, ``state``, reply shapes checked
   (``docs/protocol.md`` section 2.3);
5. ``errors`` -- bad input on one session gets ``INVALID_JSON``, ``UNKNOWN_TYPE`` and
   ``VALIDATION_ERROR``, and the session survives them (section 2.4);
6. ``capacity`` -- sessions opened until ``CAPACITY_REACHED`` or a bound;
7. ``seed`` -- ``reset(seed=...)`` and one step with the same action, on two fresh sessions,
   give the same observations (reported, not required);
8. ``close`` -- ``{"type": "close"}`` makes the server close the socket (code 1000);
9. ``batch`` -- the batched protocol, when offered (section 3; skipped otherwise).

Every check runs under its own time budget and closes every socket it opened; whatever
goes wrong becomes a failed check carrying the exception's text, never a traceback.

The step needs a valid action: the one given (``action=``), or one made from the action
schema by :func:`example_action`.

The package's modules: ``runner`` (the run, :func:`check_server`), ``endpoints`` (the
HTTP checks), ``json_ws`` (the checks of the JSON ``/ws`` protocol), ``batch`` (the
batched protocol's), ``context`` (what the checks share, and the raw socket they talk
through: :class:`openenv_gym.transport.RawSocket`), ``actions`` and ``report``. Their
public names are the ones below.
"""

from openenv_gym.check.actions import example_action
from openenv_gym.check.report import CheckReport, CheckResult, Status
from openenv_gym.check.runner import CHECK_NAMES, DEFAULT_TIMEOUTS, check_server

__all__ = [
    "CHECK_NAMES",
    "DEFAULT_TIMEOUTS",
    "CheckReport",
    "CheckResult",
    "Status",
    "check_server",
    "example_action",
]
