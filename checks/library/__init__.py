"""The built-in spec library: one module per op family."""

from typing import TypeVar

from alignbot.checks.choice_points import internal
from alignbot.checks.dsl import choice_index

T = TypeVar("T")
internal(__file__)  # a ``choose`` is named by the spec line that calls it


def choose(*options: T) -> T:
    """One of ``options``, picked by the draw: for the callables and values a spec branches on,
    which ``oneof`` cannot hand back to Python code. A choice point like ``oneof``: the
    first draws of a spec pick every option at least once (checks/explore.py)."""
    return options[choice_index(len(options))]
