"""The built-in spec library: one module per op family."""

from typing import Any, TypeVar

from checks.dsl import random

T = TypeVar("T")


def choose(*options: T) -> T:
    """One of ``options``, picked by the draw: for the callables and values a spec branches on,
    which ``oneof`` cannot hand back to Python code."""
    return options[int(random(0, len(options)))]


def at_least_1d(outputs: Any) -> Any:
    """Outputs with every 0-d tensor reshaped to (1,).

    The engine builds upstream gradients through ``np.ascontiguousarray``, which turns a 0-d
    array into shape (1,), so backward from a 0-d output fails on both sides and its gradients
    go unchecked. Full reductions and losses return through this until that is fixed.
    """
    if isinstance(outputs, (tuple, list)):
        return tuple(at_least_1d(o) for o in outputs)
    if getattr(outputs, "ndim", None) == 0:
        return outputs.reshape(1)
    return outputs
