"""A formula as standalone source, for a repro that must need nothing but NumPy (and mpmath).

The formula's top-level definition and every top-level definition of this package it
refers to, however indirectly (functions, classes, constants, names bound by assignment),
dependencies first, as they are written here (comments included), with the imports of the
names they use.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from dataclasses import dataclass

PACKAGE = __name__.rpartition(".")[0]


@dataclass(frozen=True)
class _Module:
    source: str
    tree: ast.Module
    definitions: dict[str, str]  # a top-level name -> the source that binds it
    nodes: dict[str, ast.AST]  # a top-level name -> what binds it (a def, a value)
    uses: dict[str, set[str]]  # a top-level name -> the names its source refers to
    imported: dict[str, tuple[str, str]]  # a name -> (module in this package, its name)
    imports: dict[str, str]  # a name -> the import statement that binds it (not relative)


@functools.cache
def _parse(module_name: str) -> _Module:
    source = inspect.getsource(importlib.import_module(module_name))
    tree = ast.parse(source)
    parsed = _Module(source, tree, {}, {}, {}, {}, {})
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            _define(parsed, stmt.name, ast.get_source_segment(source, stmt) or "", stmt)
        elif isinstance(stmt, ast.Assign):
            for target, value in _assignments(stmt):
                text = ast.get_source_segment(source, value) or ""
                _define(parsed, target, f"{target} = {text}", value)
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 1:
            origin = f"{PACKAGE}.{stmt.module}" if stmt.module else PACKAGE
            for alias in stmt.names:
                parsed.imported[alias.asname or alias.name] = (origin, alias.name)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                line = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                parsed.imports[alias.asname or alias.name] = line
        elif isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
            for alias in stmt.names:
                parsed.imports[alias.asname or alias.name] = \
                    f"from {stmt.module} import {alias.name}"
    return parsed


def _define(parsed: _Module, name: str, text: str, node: ast.AST) -> None:
    parsed.definitions[name] = text
    parsed.nodes[name] = node
    parsed.uses[name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assignments(stmt: ast.Assign) -> list[tuple[str, ast.expr]]:
    """``a, b = f(x), g(y)`` as ``a = f(x)`` and ``b = g(y)``; ``a = b = v`` as both."""
    out: list[tuple[str, ast.expr]] = []
    for target in stmt.targets:
        if isinstance(target, ast.Name):
            out.append((target.id, stmt.value))
        elif isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                and len(target.elts) == len(stmt.value.elts):
            out += [(t.id, v) for t, v in zip(target.elts, stmt.value.elts, strict=True)
                    if isinstance(t, ast.Name)]
    return out


def standalone(module_name: str, name: str) -> tuple[list[str], str]:
    """The import statements and the source that define ``name`` of ``module_name`` (a
    module of this package) with all it needs; the formula is then called by that name."""
    imports: set[str] = set()
    order: list[str] = []
    seen: set[tuple[str, str]] = set()

    def visit(module: str, wanted: str, alias: str) -> None:
        if (module, wanted) in seen:
            return
        seen.add((module, wanted))
        parsed = _parse(module)
        if wanted in parsed.imported:
            origin, original = parsed.imported[wanted]
            visit(origin, original, original)
            if alias != original:
                order.append(f"{alias} = {original}")
            return
        for ref in sorted(parsed.uses[wanted] - {wanted}):
            if ref in parsed.imports:
                imports.add(parsed.imports[ref])
            elif ref in parsed.definitions or ref in parsed.imported:
                visit(module, ref, ref)
        order.append(parsed.definitions[wanted])

    visit(module_name, name, name)
    return sorted(imports), "\n\n\n".join(order) + "\n"


def summary(module_name: str, name: str) -> str:
    """The formula's docstring as one paragraph: its own, else that of the private function
    it calls first (``lp_pool2d`` says what ``_lp_pool`` computes), else its module's."""
    parsed = _parse(module_name)
    stmt = parsed.nodes.get(name)
    while isinstance(stmt, ast.FunctionDef):
        doc = ast.get_docstring(stmt)
        if doc:
            return " ".join(doc.split("\n\n")[0].split())
        called = [node.func.id for node in ast.walk(stmt)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id.startswith("_") and node.func.id in parsed.nodes]
        stmt = parsed.nodes[called[0]] if called else None
    doc = ast.get_docstring(parsed.tree) or ""
    return " ".join(doc.split("\n\n")[0].split())
