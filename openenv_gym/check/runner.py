"""The run: every check in order, each under its own time budget; :func:`check_server`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from openenv_gym._http import http_base, with_token
from openenv_gym.check.batch import check_batch
from openenv_gym.check.context import Check, Context, Failed, Findings
from openenv_gym.check.endpoints import check_health, check_metadata, check_schema
from openenv_gym.check.json_ws import check_capacity, check_close, check_errors, check_session
from openenv_gym.check.report import CheckReport, CheckResult, Status, brief
from openenv_gym.check.seed import check_seed
from openenv_gym.config import Timeouts
from openenv_gym.exceptions import ArgumentTypeError, ConfigurationError, OpenEnvGymError

__all__ = ["CHECK_NAMES", "DEFAULT_TIMEOUTS", "check_server"]

DEFAULT_TIMEOUTS = Timeouts(connect=5.0, step=10.0, close=5.0)
"""Timeouts of the check: ``step`` bounds each reply, ``close`` the wait for a closed socket."""

_CHECKS: tuple[tuple[str, Check], ...] = (
    ("health", check_health),
    ("schema", check_schema),
    ("metadata", check_metadata),
    ("session", check_session),
    ("errors", check_errors),
    ("capacity", check_capacity),
    ("seed", check_seed),
    ("close", check_close),
    ("batch", check_batch),
)

CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in _CHECKS)
"""The checks, in the order they run."""


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, Failed | OpenEnvGymError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _run_one(name: str, check: Check, ctx: Context, budget: float) -> CheckResult:
    found = Findings()
    ctx.deadline, ctx.budget = time.monotonic() + budget, budget
    try:
        with contextlib.ExitStack() as stack:
            check(ctx, stack, found)
    except Exception as exc:
        found.fail(_error_text(exc))
    finally:
        ctx.deadline = None
    return found.result(name)


def _run(ctx: Context, budget: float) -> CheckReport:
    results: list[CheckResult] = []
    for name, check in _CHECKS:
        if not ctx.reachable:
            results.append(CheckResult(name, Status.SKIP, "the server is unreachable"))
            continue
        results.append(_run_one(name, check, ctx, budget))
    return CheckReport(ctx.base, tuple(results))


def check_server(
    url: str,
    *,
    timeouts: Timeouts | None = None,
    seed: int = 1,
    action: Mapping[str, Any] | None = None,
    max_sessions: int = 16,
    check_timeout: float = 60.0,
    token: str | None = None,
) -> CheckReport:
    """Check that the server at ``url`` speaks OpenEnv's protocols as specified.

    Args:
        url: Base URL (``http(s)://host:port[/prefix]``, ``ws(s)://`` or ``host:port``).
        timeouts: ``connect`` and ``step`` (each reply) and ``close`` (the wait for a
            closed socket); default :data:`DEFAULT_TIMEOUTS`. ``None`` fields take the
            default's value: the check never waits forever.
        seed: Passed to every ``reset``.
        action: A valid action (the fields of the env's action model); default: made
            from the action schema by :func:`example_action`.
        max_sessions: Most sessions the capacity check opens at once.
        check_timeout: Seconds each check may take in all.
        token: Bearer token for a server that demands one (default: ``OPENENV_GYM_TOKEN``).

    Returns:
        The report; :attr:`CheckReport.ok` is false when any check failed.

    Raises:
        ConfigurationError: An argument is invalid, e.g. a URL scheme other than http(s) and
            ws(s). (Everything the server does is reported, not raised.)
    """
    if not isinstance(url, str):
        raise ArgumentTypeError(f"url must be a string, got {brief(url)}")
    if timeouts is not None and not isinstance(timeouts, Timeouts):
        raise ArgumentTypeError(f"timeouts must be a Timeouts or None, got {brief(timeouts)}")
    base = DEFAULT_TIMEOUTS if timeouts is None else timeouts
    base = replace(
        base,
        **{
            name: getattr(DEFAULT_TIMEOUTS, name)
            for name in ("connect", "step", "close")
            if getattr(base, name) is None
        },
    )
    if action is not None and not isinstance(action, Mapping):
        raise ConfigurationError(f"action must be a JSON object, got {brief(action)}")
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigurationError(f"max_sessions must be a positive integer, got {max_sessions!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigurationError(f"seed must be an integer, got {seed!r}")
    if not check_timeout > 0:
        raise ConfigurationError(f"check_timeout must be > 0, got {check_timeout!r}")
    base_url = http_base(url)
    scheme = base_url.partition("://")[0].lower()
    if scheme not in ("http", "https"):
        raise ConfigurationError(
            f"unsupported URL scheme {scheme!r} in {url!r}: use http(s)://, ws(s):// or host:port"
        )
    ctx = Context(
        base=base_url,
        timeouts=base,
        seed=seed,
        max_sessions=max_sessions,
        action=dict(action) if action is not None else None,
        action_source="the given action" if action is not None else "",
        headers=with_token(None, token),
    )
    return _run(ctx, check_timeout)
