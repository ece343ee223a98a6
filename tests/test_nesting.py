"""bot/nesting.py: depth measured and strings mapped without recursion, at any depth."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from alignbot.bot.nesting import MAX_DEPTH, map_strings, problem, too_deep


def nested(depth: int, leaf: Any = "leaf", kind: str = "list") -> Any:
    """``depth`` containers around ``leaf``, built without recursion."""
    value = leaf
    for index in range(depth):
        value = [value, index] if kind == "list" else {"k": value, "n": index}
    return value


def innermost(value: Any) -> Any:
    while isinstance(value, list | dict):
        value = value[0] if isinstance(value, list) else value["k"]
    return value


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_the_depth_limit_is_exact(kind: str) -> None:
    assert not too_deep(nested(MAX_DEPTH, kind=kind))
    assert too_deep(nested(MAX_DEPTH + 1, kind=kind))
    assert not too_deep("text") and not too_deep([]) and not too_deep({})
    assert too_deep(nested(3, kind=kind), limit=2) and not too_deep(nested(2, kind=kind), 2)
    assert problem(nested(MAX_DEPTH + 1, kind=kind), "the report") == \
        f"the report nests deeper than {MAX_DEPTH} levels"
    assert problem(nested(1, kind=kind), "the report") is None


@pytest.mark.parametrize("depth", [600, 100_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deep_data_is_measured_and_copied_without_recursion(depth: int, kind: str) -> None:
    assert depth > sys.getrecursionlimit() // 2  # a recursive walk (two frames a level) fails
    data = nested(depth, "a secret", kind)
    assert too_deep(data)
    copy = map_strings(data, lambda text: text.replace("secret", "[redacted]"))
    assert innermost(copy) == "a [redacted]" and innermost(data) == "a secret"
    assert not too_deep(copy, limit=depth) and too_deep(copy, limit=depth - 1)


def test_map_strings_keeps_keys_numbers_and_shape() -> None:
    data = {"secret": ["secret", 1, 2.5, None, True, {"k": "secret"}], "n": "x"}
    assert map_strings(data, str.upper) == {
        "secret": ["SECRET", 1, 2.5, None, True, {"k": "SECRET"}], "n": "X"}
    assert map_strings("secret", str.upper) == "SECRET"
    assert map_strings(7, str.upper) == 7
    report = json.loads(json.dumps(data))
    assert map_strings(report, lambda text: text) == report
