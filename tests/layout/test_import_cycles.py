"""No import circle: the modules of openenv_gym (and of the servers we ship) form a DAG.

A circle (``a`` imports ``b`` imports ... imports ``a``) means neither module can be read,
tested or loaded without the other: the layers contract in ``pyproject.toml`` catches
circles between top-level layers only, so this checks every module. ``if TYPE_CHECKING``
imports count: a type a module needs is a real dependency.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("openenv_gym", "openenv_gym_servers")

KNOWN: set[frozenset[str]] = {
    # runtime/ is being split (issue 24, the server's modules): mcp.py names httpapi's
    # EnvHost under TYPE_CHECKING. This entry goes when that circle does.
    frozenset({"openenv_gym.runtime.httpapi", "openenv_gym.runtime.mcp"}),
}
"""Circles that exist today and are being removed; a new one fails, and so does an entry
here whose circle is gone (so the list only shrinks)."""


def _circles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, at = work.pop()
            if at == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = edges.get(node, [])
            if at < len(targets):
                work.append((node, at + 1))
                target = targets[at]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def _describe(graph: grimp.ImportGraph, circle: frozenset[str]) -> str:
    first, *_ = sorted(circle)
    back = next(m for m in sorted(circle) if first in graph.find_modules_directly_imported_by(m))
    chain = graph.find_shortest_chain(importer=first, imported=back) or (first, back)
    return " -> ".join([*chain, first])


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def test_the_graph_is_read(graph: grimp.ImportGraph) -> None:
    assert "openenv_gym.spaces.codec" in graph.modules
    assert "openenv_gym.spaces.printable" in graph.find_modules_directly_imported_by(
        "openenv_gym.spaces.codec"
    )


def test_no_module_imports_itself_round_a_circle(graph: grimp.ImportGraph) -> None:
    new = [c for c in _circles(graph) if c not in KNOWN]
    assert new == [], "import circles: " + "; ".join(_describe(graph, c) for c in new)


def test_every_known_circle_still_exists(graph: grimp.ImportGraph) -> None:
    gone = sorted(sorted(c) for c in KNOWN - set(_circles(graph)))
    assert gone == [], f"these circles are gone: remove them from KNOWN: {gone}"


def test_a_circle_is_found_and_described() -> None:
    made = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        made.add_module(name)
    made.add_import(importer="a.x", imported="a.y")
    made.add_import(importer="a.y", imported="a.x")
    made.add_import(importer="a.y", imported="a.z")
    assert _circles(made) == [frozenset({"a.x", "a.y"})]
    assert _describe(made, frozenset({"a.x", "a.y"})) == "a.x -> a.y -> a.x"
