"""A module's import statements as ``ast`` reads them: the one walker of ``test_layers.py``
(which package may import which) and ``test_import_circles.py`` (no circles)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

# The folders ``checks/`` and ``bot/`` are installed as ``alignbot.checks`` and ``alignbot.bot``.
INSTALLED_AS = "alignbot"


def module_name(path: Path, root: Path, prefix: str = INSTALLED_AS) -> str:
    """The name the module at ``path`` under ``root`` is imported by (a package by its own),
    ``prefix`` the package its top folder is installed in (``""``: none)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([prefix, *parts] if prefix else parts)


def modules(root: Path, package: str, prefix: str = INSTALLED_AS) -> dict[str, Path]:
    """Every module of the folder ``package`` under ``root`` by the name it is imported by."""
    return {module_name(path, root, prefix): path
            for path in sorted((root / package).rglob("*.py"))}


def statements(path: Path, root: Path, prefix: str = INSTALLED_AS
               ) -> Iterator[tuple[str, list[str]]]:
    """(the module an import statement names, the names it takes from it: none for
    ``import``) for every import statement of the module at ``path`` under ``root``,
    relative imports resolved, wherever it is (top level, a function, ``TYPE_CHECKING``)."""
    name = module_name(path, root, prefix)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names]
