"""What every formula shares: argument shapes as PyTorch's docs describe them, reductions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class Ambiguous(ValueError):
    """The documented formula does not pin the value down for these arguments (a nearest
    index that single and double precision round differently, an undocumented option): the
    formula abstains rather than vote."""


def expand(value: Any, n: int, name: str = "argument") -> tuple[int, ...]:
    """An int, or a sequence of n ints, as n ints (``kernel_size=2`` for 2-d is ``(2, 2)``)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * n
    items = tuple(int(v) for v in value)
    if len(items) == 1:
        return items * n
    if len(items) != n:
        raise ValueError(f"{name} needs {n} values, got {len(items)}")
    return items


def batched(x: np.ndarray, spatial: int) -> tuple[np.ndarray, bool]:
    """``x`` with a batch axis: an unbatched ``(C, *spatial)`` input gains one (and the
    flag says so, for :func:`unbatched`)."""
    if x.ndim == spatial + 1:
        return x[None], True
    if x.ndim != spatial + 2:
        raise ValueError(f"expected a {spatial + 1}-d or {spatial + 2}-d input, got {x.ndim}-d")
    return x, False


def unbatched(x: np.ndarray, added: bool) -> np.ndarray:
    return x[0] if added else x


def reduce(loss: np.ndarray, reduction: str) -> np.ndarray:
    """``none``, ``mean`` (over every element) or ``sum``."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(np.sum(loss))
    if reduction == "mean":
        return np.asarray(np.mean(loss)) if loss.size else np.asarray(math.nan)
    raise ValueError(f"{reduction} is not a valid value for reduction")


def legacy_reduction(size_average: Any, reduce_: Any, reduction: str) -> str:
    """The deprecated ``size_average``/``reduce`` pair, as the docs define it, over
    ``reduction``."""
    if size_average is None and reduce_ is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce_ = True if reduce_ is None else reduce_
    if not reduce_:
        return "none"
    return "mean" if size_average else "sum"


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log(1 / (1 + exp(-x))) without overflow: -log1p(exp(-|x|)) + min(x, 0)."""
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
