"""Assertion helpers of tests/vector (not a test module).

* :func:`same` -- strict, NaN-aware structural equality (types, dtypes, shapes, values).
  ``gymnasium.utils.env_checker.data_equivalence`` is tried first; it compares float
  arrays with ``np.allclose`` and so calls two arrays holding NaN different, which
  happens whenever a ``reward_raw`` of ``None`` (a reset) lands in a float column.
* :func:`gym_infos` -- the oracle for batched infos: Gymnasium's own
  ``VectorEnv._add_info`` folded over per-env info dicts.
* :func:`counter_info` -- the info dict one :class:`CounterEnv` sub-env reports.
* :func:`descendants`, :func:`wait_gone` -- process leak checks.
* :class:`Awaited` -- an asyncio env behind the sync envs' calls, for the shared suites.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psutil
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import VectorEnv


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype == object:
            return all(_same(x, y) for x, y in zip(a.ravel(), b.ravel(), strict=True))
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, float | np.floating) and np.isnan(a):
        return bool(np.isnan(b))
    return bool(a == b)


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal data (see the module docstring)."""
    return bool(data_equivalence(a, b, exact=True)) or _same(a, b)


class _Batcher(VectorEnv[Any, Any, Any]):
    """A VectorEnv used only for its ``_add_info``."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def gym_infos(per_env: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """What Gymnasium's ``_add_info`` builds from these infos (``None``: env not reported)."""
    batcher = _Batcher(len(per_env))
    infos: dict[str, Any] = {}
    for i, info in enumerate(per_env):
        if info is not None:
            infos = batcher._add_info(infos, info, i)
    return infos


def counter_info(count: int, steps: int = 0, action: int = -1, length: int = 3) -> dict[str, Any]:
    """One CounterEnv sub-env's info: its wire fields.

    The env sends no metadata, so there is no ``metadata`` key, over either protocol.
    """
    return {
        "count": count,
        "steps": steps,
        "action": action,
        "episode_length": length,
    }


def numeric_arrays(data: Any) -> Iterator[np.ndarray[Any, Any]]:
    """Every non-object ndarray inside ``data`` (tuples, lists, dicts, object arrays)."""
    if isinstance(data, np.ndarray):
        if data.dtype == object:
            for item in data.ravel():
                yield from numeric_arrays(item)
        else:
            yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from numeric_arrays(value)
    elif isinstance(data, list | tuple):
        for value in data:
            yield from numeric_arrays(value)


def descendants() -> set[int]:
    """Process ids of every live (non-zombie) descendant of this process.

    Leaves out multiprocessing's resource tracker: ``spawn`` starts it once and it lives as
    long as this process, by design.
    """
    alive = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if any("resource_tracker" in part for part in child.cmdline()):
                continue
            alive.add(child.pid)
    return alive


def wait_gone(pids: set[int], within: float = 15.0) -> set[int]:
    """Wait until every pid has exited (a bound on waiting, not a speed check); the rest."""
    deadline = time.monotonic() + within
    left = set(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    left.discard(pid)
            except psutil.NoSuchProcess:
                left.discard(pid)
        if left:
            time.sleep(0.05)
    return left


class Awaited:
    """An asyncio env driven from sync test code: each of its coroutine calls runs to the
    end on ``loop``, so a suite written for the sync envs runs against the asyncio ones.

    Attributes read and set go to the env itself.
    """

    def __init__(self, env: Any, loop: asyncio.AbstractEventLoop) -> None:
        object.__setattr__(self, "_env", env)
        object.__setattr__(self, "_loop", loop)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._env, name)
        if inspect.iscoroutinefunction(value):
            loop = self._loop

            def call(*args: Any, **kwargs: Any) -> Any:
                return loop.run_until_complete(value(*args, **kwargs))

            return call
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._env, name, value)
