"""docs/report-format.md's tables, rendered from the report's types (checks/report_types.py).

``python -m alignbot.checks.report_doc`` prints them; ``python -m alignbot.checks.report_doc --write
docs/report-format.md`` puts them between the page's two markers (``tests/test_report_doc.py``
fails while the page holds other tables, or a real report has a key they do not name). Each
type is a table of its keys: the JSON type, whether every report has it, and the comment
beside it in report_types.py; a type's docstring heads its table."""

from __future__ import annotations

import ast
import enum
import inspect
import sys
import types
import typing
from collections.abc import Sequence
from typing import Any

from . import report_types
from .generated_pages import page_command, replace_between

BEGIN = ("<!-- report format: begin (python -m alignbot.checks.report_doc --write "
         "docs/report-format.md) -->")
END = "<!-- report format: end -->"
UPDATE = "python -m alignbot.checks.report_doc --write docs/report-format.md"


def _is_typed_dict(value: Any) -> bool:
    return isinstance(value, type) and typing.is_typeddict(value)


def _comments() -> dict[tuple[str, str], str]:
    """(class, key) -> the comment on the key's line, or on the lines just above it."""
    source = inspect.getsource(report_types)
    lines = source.splitlines()
    found: dict[tuple[str, str], str] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                line = lines[item.lineno - 1]
                said = [line.split("  # ", 1)[1]] if "  # " in line else []
                above: list[str] = []
                index = item.lineno - 2
                while index >= 0 and lines[index].strip().startswith("#"):
                    above.insert(0, lines[index].strip().lstrip("#").strip())
                    index -= 1
                found[(node.name, item.target.id)] = " ".join(above + said)
    return found


def _type(hint: Any) -> str:
    """The JSON type of an annotation, in words; a TypedDict links to its own table."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.NotRequired, typing.Required):
        return _type(args[0])
    if _is_typed_dict(hint):
        return f"[{hint.__name__}](#{hint.__name__.lower()})"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return " \\| ".join(f'`"{member.value}"`' for member in hint)
    if origin is typing.Literal:
        return " \\| ".join(f"`{value!r}`".replace("'", '"') for value in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type(arg) for arg in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"object: {_type(args[0])} → {_type(args[1])}"
    names = {str: "string", int: "integer", float: "number", bool: "boolean",
             type(None): "null", Any: "any"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def _types() -> list[type]:
    """Report first, then every TypedDict it reaches, in the order they are reached."""
    order: list[type] = []

    def visit(hint: Any) -> None:
        if _is_typed_dict(hint):
            if hint not in order:
                order.append(hint)
                for value in typing.get_type_hints(hint).values():
                    visit(value)
            return
        for arg in typing.get_args(hint):
            visit(arg)

    visit(report_types.Report)
    return order


def tables() -> str:
    """One section per type: its docstring, then a row per key in the class's order."""
    comments, parts = _comments(), []
    for kind in _types():
        hints = typing.get_type_hints(kind)
        required = kind.__required_keys__  # type: ignore[attr-defined]
        doc = " ".join((inspect.getdoc(kind) or "").split())
        rows = [f"### {kind.__name__}", "", doc, "", "| key | type | in every report | meaning |",
                "| --- | --- | --- | --- |"]
        for key, hint in hints.items():
            meaning = comments.get((_owner(kind, key), key), "").replace("|", "\\|")
            rows.append(f"| `{key}` | {_type(hint)} | {'yes' if key in required else 'no'} "
                        f"| {meaning} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def _owner(kind: type, key: str) -> str:
    """The class that declares ``key`` (a finding's keys come from FindingExtra too)."""
    classes = _classes()
    name = kind.__name__
    while name in classes and key not in classes[name][0]:
        bases = [base for base in classes[name][1] if base in classes]
        if not bases:
            break
        name = bases[0]
    return name


def _classes() -> dict[str, tuple[set[str], list[str]]]:
    """Each class of report_types: the keys its own body declares, and its bases' names."""
    found = {}
    for node in ast.parse(inspect.getsource(report_types)).body:
        if isinstance(node, ast.ClassDef):
            declared = {item.target.id for item in node.body if isinstance(item, ast.AnnAssign)
                        and isinstance(item.target, ast.Name)}
            found[node.name] = (declared, [b.id for b in node.bases if isinstance(b, ast.Name)])
    return found


def keys() -> dict[str, set[str]]:
    """Every documented type's keys, by type name (for the test that reads a real report)."""
    return {kind.__name__: set(typing.get_type_hints(kind)) for kind in _types()}


def with_tables(page: str) -> str:
    """``page`` with the text between its markers replaced by the current tables."""
    return replace_between(page, BEGIN, END, tables())


def main(argv: Sequence[str] | None = None) -> int:
    return page_command("python -m alignbot.checks.report_doc",
                        "The JSON report's keys as Markdown tables.", tables, with_tables, argv)


if __name__ == "__main__":
    sys.exit(main())
