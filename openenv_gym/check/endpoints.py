"""The HTTP checks: ``health``, ``schema`` (which also makes the example action), ``metadata``."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from openenv_gym._http import get_json
from openenv_gym.check.actions import example_action
from openenv_gym.check.context import Context, Failed, Findings
from openenv_gym.check.report import brief
from openenv_gym.exceptions import ConnectError, RemoteProtocolError
from openenv_gym.spaces import deref

__all__ = ["check_health", "check_metadata", "check_schema"]


def _get(ctx: Context, path: str) -> tuple[int, Any]:
    ctx.check_budget()
    return get_json(
        ctx.base + path, ctx.until(ctx.timeouts.step) - time.monotonic(), headers=ctx.headers
    )


def check_health(ctx: Context, _: contextlib.ExitStack, found: Findings) -> None:
    """``health``: ``GET /health`` is 200 ``{"status": "healthy"}``."""
    try:
        status, body = _get(ctx, "/health")
    except ConnectError as exc:
        ctx.reachable = False
        raise Failed(f"the server is unreachable: {exc}") from exc
    except RemoteProtocolError as exc:
        raise Failed(f"GET /health: {exc}") from exc
    if status != 200:
        found.fail(f"GET /health answered HTTP {status}, expected 200")
    elif body == {"status": "healthy"}:
        found.ok('GET /health: 200 {"status": "healthy"}')
    else:
        found.warn(f'GET /health: 200 but {brief(body)}, expected {{"status": "healthy"}}')


def _schema_part(schema: Any, name: str) -> str | None:
    """Why ``schema[name]`` is not an object schema with properties; None if it is."""
    part = schema.get(name) if isinstance(schema, Mapping) else None
    if part is None:
        return f"no {name!r} schema"
    if not isinstance(part, Mapping):
        return f"{name!r} is not a JSON schema object"
    resolved = deref(part, part)
    if not isinstance(resolved, Mapping) or not isinstance(resolved.get("properties"), Mapping):
        return f"the {name!r} schema has no properties"
    return None


def check_schema(ctx: Context, _: contextlib.ExitStack, found: Findings) -> None:
    """``schema``: ``GET /schema`` has the three schemas; makes the example action."""
    try:
        status, body = _get(ctx, "/schema")
    except RemoteProtocolError as exc:
        raise Failed(f"GET /schema: {exc}") from exc
    if status != 200:
        ctx.no_action_reason = f"GET /schema answered HTTP {status}"
        raise Failed(f"GET /schema answered HTTP {status}, expected 200 with the JSON schemas")
    if not isinstance(body, dict):
        raise Failed(f"GET /schema: not a JSON object: {brief(body)}")
    ctx.schema = body
    problems = [p for p in (_schema_part(body, n) for n in ("action", "observation", "state")) if p]
    for problem in problems:
        found.fail(f"GET /schema: {problem}")
    if not problems:
        action_fields, observation, state = (
            (deref(body[name], body[name]) or {})["properties"]
            for name in ("action", "observation", "state")
        )
        found.ok(
            f"action ({', '.join(action_fields)}), observation ({len(observation)} fields), "
            f"state ({len(state)} fields)"
        )
    if ctx.action is not None:
        return
    if _schema_part(body, "action") is not None:
        ctx.no_action_reason = "no usable action schema"
        return
    action = example_action(deref(body["action"], body["action"]) or {})
    if action is None:
        ctx.no_action_reason = "cannot make an action from the action schema"
        found.warn(f"{ctx.no_action_reason}; pass one with --action")
        return
    ctx.action, ctx.action_source = action, "made from the action schema"
    found.info["action"] = action


def check_metadata(ctx: Context, _: contextlib.ExitStack, found: Findings) -> None:
    """``metadata``: ``GET /metadata`` (a warning when absent)."""
    try:
        status, body = _get(ctx, "/metadata")
    except RemoteProtocolError as exc:
        found.warn(f"GET /metadata: {exc}")
        return
    if status != 200:
        found.warn(f"GET /metadata answered HTTP {status} (OpenEnv servers serve it)")
    elif not isinstance(body, dict):
        found.warn(f"GET /metadata: not a JSON object: {brief(body)}")
    else:
        shown = ", ".join(f"{k} {body[k]!r}" for k in ("name", "version") if body.get(k))
        found.ok(f"GET /metadata: 200{f' ({shown})' if shown else ''}")
        found.info.update({k: body[k] for k in ("name", "version") if body.get(k) is not None})
