"""No import circles within ``checks`` or within ``bot``: every module of a package can be
read, changed and imported from the bottom up. Checked by parsing every module with ``ast``.

An edge A -> B for every import of B anywhere in A (top level, a function, ``TYPE_CHECKING``);
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
A circle is a strongly connected component of more than one module."""

from __future__ import annotations

from pathlib import Path

import pytest
from imports import INSTALLED_AS, modules, statements

ROOT = Path(__file__).resolve().parent.parent

Graph = dict[str, set[str]]


def imports(name: str, path: Path, root: Path, known: dict[str, Path], prefix: str
            ) -> set[str]:
    """The modules of ``known`` that the module ``name`` at ``path`` imports, but itself."""
    targets: set[str] = set()
    for module, names in statements(path, root, prefix):
        if not names:
            targets.add(module)
        for alias in names:
            child = f"{module}.{alias}"
            targets.add(child if child in known else module)
    return {target for target in targets if target in known and target != name}


def import_graph(root: Path, package: str, prefix: str = INSTALLED_AS) -> Graph:
    known = modules(root, package, prefix)
    return {name: imports(name, path, root, known, prefix) for name, path in known.items()}


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted (Tarjan's
    algorithm, iterative: a deep package needs no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return sorted(found)


def describe(circle: list[str], graph: Graph) -> str:
    members = set(circle)
    edges = "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in circle)
    return f"{len(circle)} modules: {edges}"


@pytest.mark.parametrize("package", ["checks", "bot"])
def test_no_import_circles(package: str) -> None:
    graph = import_graph(ROOT, package)
    found = circles(graph)
    assert not found, f"import circles in {package}/:\n" + "\n".join(
        describe(circle, graph) for circle in found)


def test_circles_are_found() -> None:
    graph: Graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert circles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_edges_follow_every_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from . import sub\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..top import X\n")
    (package / "top.py").write_text(
        "def f():\n    import pkg.sub.leaf\n\nfrom pkg.sub import leaf, name\n")
    graph = import_graph(tmp_path, "pkg", prefix="")
    assert graph == {"pkg": {"pkg.sub"}, "pkg.sub": set(), "pkg.sub.leaf": {"pkg.top"},
                     "pkg.top": {"pkg.sub.leaf", "pkg.sub"}}
    assert circles(graph) == [["pkg.sub.leaf", "pkg.top"]]
