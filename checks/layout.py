"""The memory layout of a tensor, rebuilt from a contiguous literal with view calls.

A call judged alone is fed the reference's values as literal inputs. A literal is
contiguous, but the call may have received a transposed, sliced, strided or broadcast view,
and a kernel that mishandles strides is wrong only there. :func:`plan_layout` finds the
contiguous base and the view calls (a slice with steps, ``unsqueeze``, ``permute``,
``expand``: what every PyTorch-compatible framework has) that give a tensor of the same
shape and strides, up to the strides of dimensions of size one, which no kernel may depend
on. The storage outside the view (gaps between strided elements) is zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_SEARCH = 4096  # candidate sizes tried per dimension when fitting a base


@dataclass(frozen=True)
class Layout:
    """``base_shape``: the contiguous literal; ``steps``: (method, arguments) applied in
    order; ``order``: the original dimensions the base's dimensions stand for, outermost
    first; ``window``: (stop, step) of the slice taken from each base dimension."""

    base_shape: list[int]
    steps: list[tuple[str, list[Any]]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    window: list[tuple[int, int]] = field(default_factory=list)

    def base_array(self, values: np.ndarray) -> np.ndarray:
        """The literal: ``values`` (the view's elements, in its own shape) placed where the
        view reads them, zeros elsewhere."""
        essential = set(self.order)
        index = tuple(slice(None) if d in essential else 0 for d in range(values.ndim))
        kept = [d for d in range(values.ndim) if d in essential]
        compact = np.transpose(values[index], [kept.index(d) for d in self.order])
        base = np.zeros(self.base_shape, dtype=values.dtype)
        base[tuple(slice(0, stop, step) for stop, step in self.window)] = compact
        return base


def _contiguous(shape: list[int], strides: list[int]) -> bool:
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _fit(sizes: list[int], strides: list[int]) -> list[int] | None:
    """Sizes of a contiguous base whose dimensions, sliced with steps, have these sizes and
    strides (outermost first), or None when there is none: the innermost base stride is 1
    and each base dimension is large enough to hold its slice."""
    def search(j: int, inner: int) -> list[int] | None:
        if strides[j] % inner:
            return None
        step = strides[j] // inner
        need = (sizes[j] - 1) * step + 1
        if j == 0:
            return [need]
        outer = strides[j - 1]
        for size in range(need, min(outer // inner, need + MAX_SEARCH) + 1):
            if outer % (size * inner) == 0:
                found = search(j - 1, size * inner)
                if found is not None:
                    return [*found, size]
        return None

    return search(len(sizes) - 1, 1) if sizes else []


def plan_layout(shape: list[int], strides: list[int]) -> Layout | None:
    """How to rebuild a view of this shape and these strides; None when it is contiguous
    (a plain literal will do), empty, or overlapping in a way slicing cannot make."""
    if _contiguous(shape, strides) or 0 in shape or any(s < 0 for s in strides):
        return None
    rank = len(shape)
    essential = [d for d in range(rank) if shape[d] != 1 and strides[d] != 0]
    order = sorted(essential, key=lambda d: -strides[d])
    sizes, inner = [shape[d] for d in order], [strides[d] for d in order]
    base_shape = _fit(sizes, inner)
    if base_shape is None:
        return None
    base_strides = [int(np.prod(base_shape[j + 1:], dtype=np.int64)) for j in range(len(order))]
    window = [((n - 1) * (s // b) + 1, s // b) for n, s, b in zip(sizes, inner, base_strides,
                                                                   strict=True)]
    steps: list[tuple[str, list[Any]]] = []
    if [stop for stop, _ in window] != base_shape or any(step != 1 for _, step in window):
        steps.append(("__getitem__", [tuple(slice(0, stop, step) for stop, step in window)]))
    labels = list(order)
    for d in range(rank):
        if d not in essential:
            steps.append(("unsqueeze", [len(labels)]))
            labels.append(d)
    permutation = [labels.index(d) for d in range(rank)]
    if permutation != list(range(rank)):
        steps.append(("permute", [permutation]))
    if any(shape[d] != 1 and strides[d] == 0 for d in range(rank)):
        steps.append(("expand", [list(shape)]))
    return Layout(base_shape, steps, order, window)
