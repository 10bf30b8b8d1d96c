"""No test asserts a latency, and no test sleeps to synchronise (STYLE, Tests; issue 23).

Speed is measured by ``benchmarks/``, never gated by a test: a bound on how long something
took fails on a slow or busy machine, and passes whatever the code does on a fast one. A
test waits for the event itself (a reply, a file, a process gone, a ``threading.Event``),
with a generous deadline that only stops a hang; it never sleeps and hopes the other side
got there meanwhile.

This module reads every ``.py`` file under ``tests/`` (the AST, not the text) and fails on:

* **a latency assert**: an ``assert`` whose expression depends on a clock reading
  (``time.monotonic()``, ``perf_counter()``, ``time.time()``, ``loop.time()``...), followed
  through assignments, containers the reading was appended to, attributes it was stored in,
  and functions that return it;
* **a sleep** (``time.sleep``, ``asyncio.sleep``) that is not the pause of a polling loop
  (a ``while`` loop that re-checks its condition: waiting for the event itself), and a
  sleep in disguise: ``wait(...)`` on a ``threading.Event`` that nothing in the module
  sets (``Event().wait(3)``, ``assert not paused.wait(3)``) can only ever time out.

Some pauses are not synchronisation: a fake server that is slow on purpose, a child process
that must stay alive until it is killed. Those are listed in :data:`ALLOWED`, each with why;
an entry that no longer matches anything fails too, so the list stays true.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CLOCKS = frozenset(
    {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
)
"""Functions whose result is a clock reading (``time.X()``, ``loop.time()``, ``X()``)."""

SLEEPS = frozenset({"sleep"})

AGGREGATES = frozenset(
    {
        "abs",
        "float",
        "int",
        "list",
        "max",
        "mean",
        "median",
        "min",
        "percentile",
        "quantiles",
        "round",
        "sorted",
        "sum",
        "tuple",
        "fmean",
    }
)
"""Calls whose result carries a clock reading given one (``max(latencies)``)."""

ALLOWED: dict[tuple[str, str, str], str] = {
    # (file under tests/, enclosing function's qualified name, "sleep" or "assert") -> why.
    # Lower bounds on a configured timeout: the timeout did not fire early. A slow machine
    # only makes the wait longer, so they cannot fail for want of speed.
    ("faults/test_server_faults.py", "test_server_stopped_mid_step_times_out", "assert"): (
        "lower bound: the step timeout did not fire before its time"
    ),
    ("faults/test_server_faults.py", "test_slow_env_beyond_the_step_timeout_is_fatal", "assert"): (
        "lower bound: the step timeout did not fire before its time"
    ),
    (
        "runtime/test_server_limits.py",
        "test_connection_without_a_complete_head_is_dropped_after_handshake_timeout",
        "assert",
    ): "lower bound: the handshake timeout did not fire before its time",
    (
        "runtime/test_server_limits.py",
        "test_idle_websocket_is_closed_and_its_session_freed_pings_do_not_count",
        "assert",
    ): "lower bound: the idle timeout did not fire before its time",
    (
        "runtime/test_server_fragments.py",
        "test_empty_continuation_frames_are_not_activity",
        "assert",
    ): "lower bound: the idle timeout did not fire before its time",
    ("runtime/test_server_fragments.py", "test_the_opt_in_needs_the_pings_themselves", "assert"): (
        "lower bound: the idle timeout did not fire before its time"
    ),
    (
        "transport/test_transport_raw.py",
        "test_close_is_bounded_when_the_server_never_answers_it",
        "assert",
    ): "lower bound: close() waited its close timeout before dropping the socket",
    ("transport/test_transport_wire.py", "_spy_spins.spy", "assert"): (
        "upper bound on the spin budget the code computes (until - now), which a slow "
        "machine only makes smaller: the spin never exceeds SPIN_S"
    ),
    # Pauses that are behaviour, not synchronisation: nothing waits on them.
    (
        "transport/test_transport_wire.py",
        "test_waits_longer_than_the_budget_stop_spinning.slow_echo",
        "sleep",
    ): (
        "a server slow on purpose (30 ms a reply): what the client does with waits beyond "
        "its spin budget"
    ),
    ("runtime/test_server_httpapi.py", "AsyncPingEnv.reset_async", "sleep"): (
        "an async env that awaits: the HTTP API must await it"
    ),
    ("runtime/test_server_httpapi.py", "AsyncPingEnv.step_async", "sleep"): (
        "an async env whose 'slow' step awaits, so that requests behind it queue in order"
    ),
    (
        "runtime/test_server_limits.py",
        "test_a_websocket_that_keeps_asking_is_never_idle",
        "sleep",
    ): ("pacing: requests must span more than the idle timeout; no other party is waited for"),
    (
        "runtime/test_server_fragments.py",
        "test_one_fragment_more_fails_the_connection_with_1009",
        "sleep",
    ): "pacing: the last fragment leaves as a TCP segment of its own",
    (
        "runtime/test_server_fragments.py",
        "test_a_read_of_many_frames_is_answered_whole_and_in_order_over_turns",
        "sleep",
    ): "pacing: the cut frame's end leaves as a TCP segment of its own",
    (
        "runtime/test_server_fragments.py",
        "test_a_client_that_asks_keeps_its_session_with_its_pings",
        "sleep",
    ): "pacing: the pause must span idle timeouts; no other party is waited for",
    (
        "faults/test_server_guards.py",
        "test_a_pinging_client_keeps_its_session_through_a_long_pause",
        "sleep",
    ): "pacing: the pause must span three idle timeouts; no other party is waited for",
    (
        "runtime/test_server_large_messages.py",
        "test_large_message_arrives_whole_however_its_bytes_are_cut",
        "sleep",
    ): "pacing: the pieces leave as separate TCP segments (as far as TCP lets us)",
    (
        "runtime/test_server_large_messages.py",
        "test_fragmented_message_with_a_large_fragment_is_assembled",
        "sleep",
    ): "pacing: the fragments leave as separate TCP segments",
    (
        "runtime/test_server_large_messages.py",
        "test_large_new_message_inside_a_fragmented_one_fails_the_connection",
        "sleep",
    ): "pacing: the fragments leave as separate TCP segments",
    (
        "vector/test_vector_failures.py",
        "test_close_from_another_thread_while_stepping_in_a_loop",
        "sleep",
    ): (
        "varies the moment close() comes during a stepping loop (0, 10, 50 ms): every "
        "moment must end the loop with EnvClosedError"
    ),
    # A window for a negative check, confirmed by an event after it.
    ("runtime/test_server_httpapi.py", "test_the_session_outlives_its_websocket", "sleep"): (
        "a window in which a wrong server would end the session as its WebSocket goes; "
        "the reattach after it proves the session is still there"
    ),
}
"""Deadline-only waits and deliberate pauses, each with the reason it is not a sync."""


@dataclass(frozen=True)
class Finding:
    """One latency assert or sleep: where it is and what it is."""

    path: str
    function: str
    kind: str  # "sleep" or "assert"
    line: int

    @property
    def key(self) -> tuple[str, str, str]:
        """Its :data:`ALLOWED` key."""
        return (self.path, self.function, self.kind)

    def __str__(self) -> str:
        return f"tests/{self.path}:{self.line} ({self.function}): {self.kind}"


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _is_clock(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    name = _called_name(node)
    if name not in CLOCKS:
        return False
    func = node.func
    # time.time(), loop.time(), monotonic(); not e.g. an object's .time(x) with arguments
    return isinstance(func, ast.Attribute | ast.Name)


def _is_sleep(node: ast.AST, never_set: frozenset[str] = frozenset()) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if _called_name(node) in SLEEPS:
        return True
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "wait"):
        return False
    waited = func.value  # ``Event().wait(t)``, or ``e.wait(t)`` for an e nothing sets
    return (isinstance(waited, ast.Call) and _called_name(waited) == "Event") or (
        isinstance(waited, ast.Name) and waited.id in never_set
    )


def _events_never_set(nodes: list[ast.AST]) -> frozenset[str]:
    """Names bound to a new ``Event()`` in the module whose ``.set()`` is never called."""
    events = {
        target.id
        for node in nodes
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and _called_name(node.value) == "Event"
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    set_somewhere = {  # ``e.set()``, or ``e.set`` handed on (``Thread(target=e.set)``)
        node.value.id
        for node in nodes
        if isinstance(node, ast.Attribute)
        and node.attr == "set"
        and isinstance(node.value, ast.Name)
    }
    passed = {  # handed to another function or stored: someone else may set it
        arg.id
        for node in nodes
        if isinstance(node, ast.Call)
        for arg in [*node.args, *(k.value for k in node.keywords)]
        if isinstance(arg, ast.Name)
    }
    return frozenset(events - set_somewhere - passed)


class _Taint:
    """Names, attributes and functions that hold or return a clock reading (one file)."""

    def __init__(self, returning: set[str]) -> None:
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        self.returning = returning  # functions (by name) that return a clock reading

    def carries(self, node: ast.AST) -> bool:
        """Whether the value of ``node`` depends on a clock reading.

        Through arithmetic, comparisons, containers and aggregates (``max``, ``sorted``...);
        not through the arguments of other calls (``sock.receive(deadline)`` is a reply).
        """
        if _is_clock(node):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.names
        if isinstance(node, ast.Attribute) and node.attr in self.attrs:
            return True
        if isinstance(node, ast.Call):
            name = _called_name(node)
            if name in self.returning:
                return True
            if name not in AGGREGATES:
                return isinstance(node.func, ast.Attribute) and self.carries(node.func.value)
            parts: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
            return any(self.carries(part) for part in parts)
        if isinstance(node, ast.Lambda):
            return False
        return any(self.carries(child) for child in ast.iter_child_nodes(node))

    def mark(self, target: ast.AST) -> bool:
        """Mark what ``target`` names as tainted; whether anything new was marked."""
        before = len(self.names) + len(self.attrs)
        if isinstance(target, ast.Name):
            self.names.add(target.id)
        elif isinstance(target, ast.Attribute):
            self.attrs.add(target.attr)  # ``self.steps``: the attribute, not ``self``
        elif isinstance(target, ast.Subscript | ast.Starred):
            self.mark(target.value)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self.mark(element)
        return len(self.names) + len(self.attrs) != before

    def spread(self, tree: ast.AST) -> None:
        """Follow assignments and appends until nothing new is tainted."""
        flows = [
            (target, value)
            for node in ast.walk(tree)
            for target, value in _flows(node)
            if value is not None
        ]
        changed = True
        while changed:
            changed = False
            for target, value in flows:
                if self.carries(value):
                    changed |= self.mark(target)


def _flows(node: ast.AST) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """(target, value) pairs through which a value flows into a name or container."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if (
                isinstance(target, ast.Tuple | ast.List)
                and isinstance(node.value, ast.Tuple | ast.List)
                and len(target.elts) == len(node.value.elts)
            ):  # ``start, count = time.monotonic(), 0``: element by element
                yield from zip(target.elts, node.value.elts, strict=True)
            else:
                yield target, node.value
    elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.NamedExpr):
        yield node.target, node.value
    elif isinstance(node, ast.For | ast.comprehension):
        yield node.target, node.iter
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("append", "extend", "add", "insert", "update", "setdefault")
    ):
        for arg in node.args:
            yield node.func.value, arg


class _Module:
    """One parsed test module, indexed once: its functions, loops and imports."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.functions = [
            node for node in self.nodes if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        # per function: whether it reads a clock itself, and the names it calls
        self.reads: dict[ast.AST, tuple[bool, set[str]]] = {}
        for func in self.functions:
            inner = list(ast.walk(func))
            called = {n for sub in inner if isinstance(sub, ast.Call) if (n := _called_name(sub))}
            self.reads[func] = (any(_is_clock(sub) for sub in inner), called)
        self.in_loop: set[int] = set()
        for node in self.nodes:
            if isinstance(node, ast.While) and id(node) not in self.in_loop:
                self.in_loop.update(id(sub) for sub in ast.walk(node))
        self.never_set = _events_never_set(self.nodes)
        self.imports = [
            (node.module, alias.name)
            for node in self.nodes
            if isinstance(node, ast.ImportFrom) and node.module is not None
            for alias in node.names
        ]
        # (first line, last line, qualified name, node), in source order: outer before inner
        self.scopes = [
            (node.lineno, node.end_lineno or node.lineno, name, node)
            for name, node in _named(tree, "")
        ]

    def reads_clock(self, func: ast.AST, returning: set[str]) -> bool:
        """Whether ``func`` reads a clock or calls a function that returns a reading."""
        clock, called = self.reads[func]
        return clock or not called.isdisjoint(returning)

    def scope_of(self, line: int) -> str:
        """The qualified name of the innermost function or class around ``line``."""
        found = "<module>"
        for first, last, name, _ in self.scopes:
            if first <= line <= last:
                found = name
        return found


def _named(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
            yield name, child
            yield from _named(child, f"{name}.")
        else:
            yield from _named(child, prefix)


def _returning_clock(module: _Module, imported: set[str]) -> set[str]:
    """Names of the module's functions that return a clock reading (and ``imported`` ones)."""
    returning = set(imported)
    changed = True
    while changed:
        changed = False
        for func in module.functions:
            if func.name in returning or not module.reads_clock(func, returning):
                continue
            taint = _Taint(returning)
            taint.spread(func)
            if any(
                isinstance(node, ast.Return)
                and node.value is not None
                and taint.carries(node.value)
                for node in ast.walk(func)
            ):
                returning.add(func.name)
                changed = True
    return returning


def check_module(module: _Module, rel: str, returning: set[str]) -> list[Finding]:
    """The latency asserts and sleeps of one module.

    A ``while`` loop that re-checks its condition is a wait for the event itself: its pause
    and its deadline (``assert time.monotonic() < deadline``, the hang stop) are fine.
    """
    found: list[Finding] = []
    taints: dict[str, _Taint] = {}
    for node in module.nodes:
        is_assert = isinstance(node, ast.Assert)
        if not (is_assert or _is_sleep(node, module.never_set)) or id(node) in module.in_loop:
            continue
        name = module.scope_of(node.lineno)  # type: ignore[attr-defined]
        if not is_assert:
            found.append(Finding(rel, name, "sleep", node.lineno))  # type: ignore[attr-defined]
            continue
        # taint over the outermost function or class: closures and attributes of methods
        outer = name.split(".")[0]
        taint = taints.get(outer)
        if taint is None:
            taint = taints[outer] = _Taint(returning)
            scope = next((n for *_, q, n in module.scopes if q == outer), module.tree)
            if any(
                _is_clock(sub) or (isinstance(sub, ast.Call) and _called_name(sub) in returning)
                for sub in ast.walk(scope)
            ):
                taint.spread(scope)
        if taint.carries(node.test):  # type: ignore[attr-defined]
            found.append(Finding(rel, name, "assert", node.lineno))  # type: ignore[attr-defined]
    return found


def parse(source: str) -> _Module:
    """A module of test source, indexed."""
    return _Module(ast.parse(source))


@functools.cache
def findings() -> tuple[Finding, ...]:
    """Every latency assert and every sleep outside a polling loop, under tests/."""
    files = sorted(p for p in TESTS.rglob("*.py") if ".venv" not in p.parts)
    modules = {path: parse(path.read_text()) for path in files}
    own = {path.stem: _returning_clock(module, set()) for path, module in modules.items()}
    found: list[Finding] = []
    for path, module in modules.items():
        imported = {name for source, name in module.imports if name in own.get(source, ())}
        returning = _returning_clock(module, imported) if imported else own[path.stem]
        found += check_module(module, path.relative_to(TESTS).as_posix(), returning)
    return tuple(found)


def test_no_latency_asserts_and_no_sleeps_to_synchronise() -> None:
    bad = [str(f) for f in findings() if f.key not in ALLOWED]
    assert bad == [], (
        "a test asserts a latency or sleeps to synchronise; wait for the event itself with a "
        "generous deadline (or, if this pause is not a sync, add it to ALLOWED with why):\n"
        + "\n".join(bad)
    )


def test_every_allowed_pause_still_exists() -> None:
    keys = {f.key for f in findings()}
    stale = sorted(key for key in ALLOWED if key not in keys)
    assert stale == [], f"ALLOWED entries that match nothing any more: {stale}"


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("import time\nt = time.monotonic()\nx()\nassert time.monotonic() - t < 1\n", "assert"),
        (
            "import time\ndef f():\n    s = time.perf_counter()\n"
            "    took = time.perf_counter() - s\n    assert took < 2\n",
            "assert",
        ),
        (
            "import time\ndef f(xs):\n    xs.append(time.perf_counter())\n    d = [x for x in xs]\n"
            "    assert max(d) < 1\n",
            "assert",
        ),
        (
            "import time\ndef g():\n    return time.monotonic()\ndef f():\n    e = g()\n"
            "    assert e < 3\n",
            "assert",
        ),
        ("import time\ndef f():\n    time.sleep(0.3)\n    assert x\n", "sleep"),
        ("import asyncio\nasync def f():\n    await asyncio.sleep(0.1)\n", "sleep"),
        ("import threading\ndef f():\n    threading.Event().wait(2)\n", "sleep"),
        (
            "import threading\ndef f():\n    paused = threading.Event()\n"
            "    assert not paused.wait(3.5)\n",
            "sleep",
        ),
    ],
    ids=["direct", "elapsed", "list", "helper", "sleep", "asyncio-sleep", "event", "unset"],
)
def test_the_checker_finds_what_it_forbids(source: str, kind: str) -> None:
    module = parse(source)
    found = check_module(module, "t.py", _returning_clock(module, set()))
    assert {f.kind for f in found} == {kind}


@pytest.mark.parametrize(
    "source",
    [
        "import time\nend = time.monotonic() + 30\nwhile not done():\n"
        "    assert time.monotonic() < end\n    time.sleep(0.05)\n",
        "import time\ndef soon():\n    return time.monotonic() + 5\ndef f(sock):\n"
        "    reply = sock.receive(soon())\n    assert reply == 1\n",
        "import time\ndef f(stats):\n    stats.append(time.perf_counter())\n"
        "    print(max(stats))\n    assert stats\n",
        "import threading\ndef f():\n    done = threading.Event()\n"
        "    threading.Thread(target=done.set).start()\n    assert done.wait(30)\n",
        "import threading\ndef f(start):\n    ready = threading.Event()\n"
        "    start(ready)\n    assert ready.wait(30)\n",
    ],
    ids=["polling-loop", "deadline-argument", "printed-not-asserted", "event-set", "event-passed"],
)
def test_the_checker_lets_waits_and_measurements_be(source: str) -> None:
    module = parse(source)
    found = check_module(module, "t.py", _returning_clock(module, set()))
    if "stats" in source:  # ``assert stats``: a list of readings is still a reading
        assert [f.kind for f in found] == ["assert"]
    else:
        assert found == []
