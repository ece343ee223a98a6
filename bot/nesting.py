"""Untrusted nested data (parsed JSON or YAML) measured and copied without recursion, so that
its depth is known, and refused past a limit, before anything walks it recursively."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Deeper than anything the App reads: a report nests about 10 levels (a program's literals a
# few more), a webhook payload under 10, the configuration 4.
MAX_DEPTH = 64


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts (tuples too) nest in ``value`` more than ``limit`` levels deep;
    the walk stops at the first container past the limit."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def problem(value: Any, what: str, limit: int = MAX_DEPTH) -> str | None:
    """``"{what} nests deeper than {limit} levels"`` if it does, else None."""
    return f"{what} nests deeper than {limit} levels" if too_deep(value, limit) else None


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """A copy of ``value`` (JSON data: dicts, lists, scalars) with ``change`` applied to every
    string that is not a key, built with a stack of its own however deep it nests."""
    if not isinstance(value, dict | list):
        return change(value) if isinstance(value, str) else value
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, dict[Any, Any] | list[Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, dict | list):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
            else:
                copy = change(item) if isinstance(item, str) else item
            if isinstance(target, dict):
                target[key] = copy
            else:
                target.append(copy)
    return root
