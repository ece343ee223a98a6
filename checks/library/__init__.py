"""The built-in spec library: one module per op family."""

from typing import TypeVar

from checks import random

T = TypeVar("T")


def choose(*options: T) -> T:
    """One of ``options``, picked by the draw: for the callables and values a spec branches on,
    which ``oneof`` cannot hand back to Python code. Hypothesis favours the first option (its
    lower bound), so specs list the most common form first."""
    return options[int(random(0, len(options)))]

