"""The loop finder both layering tests use (``test_layering.py`` for the Python package,
``test_rust_layering.py`` for the Rust core): strongly connected components, by Tarjan."""

from __future__ import annotations

import sys
from collections.abc import Iterable


def loops(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node of the graph whose edges are
    ``pairs`` (each component holds a loop), each sorted, in a deterministic order."""
    graph: dict[str, set[str]] = {}
    for a, b in pairs:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    # The recursion goes as deep as the longest chain of modules (a few hundred at most).
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components
