"""Max, average, power-average and adaptive pooling in 1-3 dimensions, from PyTorch's docs.

Windows (``MaxPool2d``'s docs): output length ``floor((L + 2 padding - dilation (kernel - 1)
- 1) / stride + 1)``, ``ceil`` instead of ``floor`` with ``ceil_mode``, where "sliding windows
are allowed to go off-bounds if they start within the left padding or the input; sliding
windows that would start in the right padded region are ignored". Each window is gathered
along every axis at once, with a sentinel for taps outside the input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import Ambiguous, batched, expand, unbatched


def pooled_length(size: int, kernel: int, stride: int, padding: int, dilation: int,
                  ceil_mode: bool) -> int:
    """The number of windows along one axis (the docs' output length, with the rule that a
    window must start inside the input or the left padding)."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    if span < 0:
        raise ValueError("the kernel is larger than the padded input")
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def window_taps(size: int, kernel: int, stride: int, padding: int, dilation: int,
                ceil_mode: bool) -> np.ndarray:
    """``(windows, kernel)`` input positions of each window's taps; ``size`` (one past the
    input) for a tap in the padding or beyond."""
    count = pooled_length(size, kernel, stride, padding, dilation, ceil_mode)
    taps = (np.arange(count)[:, None] * stride - padding) + np.arange(kernel)[None, :] * dilation
    return np.where((taps >= 0) & (taps < size), taps, size)


def gather_windows(x: np.ndarray, taps: list[np.ndarray], fill: float) -> np.ndarray:
    """``x`` of shape ``(N, C, *spatial)`` gathered into ``(N, C, *windows, *kernel)``;
    taps outside the input read ``fill``."""
    spatial = len(taps)
    out = x
    for axis in reversed(range(spatial)):  # the last axis first: earlier positions stay put
        pos = 2 + axis
        pad = [(0, 0)] * out.ndim
        pad[pos] = (0, 1)
        out = np.pad(out, pad, constant_values=fill)
        out = np.take(out, taps[axis], axis=pos)  # (..., windows, kernel, ...)
    # (N, C, w0, k0, w1, k1, ...) -> (N, C, w0, w1, ..., k0, k1, ...)
    order = [0, 1, *(2 + 2 * a for a in range(spatial)), *(3 + 2 * a for a in range(spatial))]
    return out.transpose(order)


def _windows(x: np.ndarray, spatial: int, kernel_size: Any, stride: Any, padding: Any,
             dilation: Any, ceil_mode: bool) -> tuple[list[np.ndarray], tuple[int, ...]]:
    kernel = expand(kernel_size, spatial, "kernel_size")
    strides = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else expand(stride, spatial, "stride")
    pads = expand(padding, spatial, "padding")
    dilations = expand(dilation, spatial, "dilation")
    if any(2 * p > k for p, k in zip(pads, kernel, strict=True)):
        raise ValueError("padding should be at most half of the kernel size")
    taps = [window_taps(x.shape[2 + a], kernel[a], strides[a], pads[a], dilations[a],
                        ceil_mode) for a in range(spatial)]
    return taps, kernel


def _max_pool(x: np.ndarray, spatial: int, kernel_size: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: bool, return_indices: bool) -> Any:
    """The largest value of each window (NaN wins), and with ``return_indices`` its flat
    index in the input's spatial axes: the first of equal maxima, the last NaN (as the
    kernel scans the window; the docs leave ties open)."""
    x, added = batched(np.asarray(x, dtype=np.float64), spatial)
    taps, _ = _windows(x, spatial, kernel_size, stride, padding, dilation, ceil_mode)
    values = gather_windows(x, taps, -math.inf)
    valid = gather_windows(np.ones_like(x), taps, 0.0) > 0
    flat = np.arange(math.prod(x.shape[2:]), dtype=np.int64).reshape(x.shape[2:])
    index = gather_windows(np.broadcast_to(flat, x.shape).astype(np.float64), taps, -1.0)
    lead = values.shape[:2 + spatial]
    values, valid = values.reshape(*lead, -1), valid.reshape(*lead, -1)
    index = index.reshape(*lead, -1)
    if return_indices and not valid.any(axis=-1).all():
        # the docs pad with -inf; which index a window of padding alone holds they leave open
        raise Ambiguous("a window lies wholly in the padding")
    masked = np.where(valid, values, -math.inf)
    nan = np.isnan(masked) & valid
    best = np.max(np.where(nan, -math.inf, masked), axis=-1)
    result = np.where(nan.any(axis=-1), math.nan, best)
    first_max = np.argmax(valid & (masked == best[..., None]), axis=-1)
    last_nan = masked.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
    chosen = np.where(nan.any(axis=-1), last_nan, first_max)
    indices = np.take_along_axis(index, chosen[..., None], axis=-1)[..., 0].astype(np.int64)
    result = unbatched(result, added)
    if return_indices:
        return result, unbatched(indices, added)
    return result


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _max_pool(input, 1, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _max_pool(input, 3, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def _avg_pool(x: np.ndarray, spatial: int, kernel_size: Any, stride: Any, padding: Any,
              ceil_mode: bool, count_include_pad: bool, divisor_override: Any) -> np.ndarray:
    """The sum of each window over its divisor: ``divisor_override`` when given; else the
    window's taps inside the padded input (``count_include_pad``: the zero padding counts,
    the part of a ``ceil_mode`` window beyond the padding does not) or inside the input."""
    x, added = batched(np.asarray(x, dtype=np.float64), spatial)
    taps, kernel = _windows(x, spatial, kernel_size, stride, padding, 1, ceil_mode)
    pads = expand(padding, spatial, "padding")
    values = gather_windows(x, taps, 0.0)
    axes = tuple(range(-spatial, 0))
    total = values.sum(axis=axes)
    inside = gather_windows(np.ones_like(x), taps, 0.0).sum(axis=axes)
    if divisor_override:
        divisor: Any = float(divisor_override)
    elif count_include_pad:
        divisor = np.ones(total.shape[2:])
        strides = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
            else expand(stride, spatial, "stride")
        for a in range(spatial):
            starts = np.arange(total.shape[2 + a]) * strides[a] - pads[a]
            ends = np.minimum(starts + kernel[a], x.shape[2 + a] + pads[a])
            shape = [1] * spatial
            shape[a] = -1
            divisor = divisor * (ends - starts).reshape(shape)
    else:
        divisor = inside
    return unbatched(total / divisor, added)


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> np.ndarray:
    return _avg_pool(input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     None)


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Any = None) -> np.ndarray:
    return _avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: Any = None) -> np.ndarray:
    return _avg_pool(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def _lp_pool(x: np.ndarray, spatial: int, norm_type: float, kernel_size: Any, stride: Any,
             ceil_mode: bool) -> np.ndarray:
    """``LPPool``'s docs: ``f(X) = (sum over x in X of x^p)^(1/p)`` over each window's
    elements (a ``ceil_mode`` window that runs off the input sums the elements it holds);
    ``p = inf`` is max pooling."""
    if math.isinf(norm_type):
        return _max_pool(x, spatial, kernel_size, stride, 0, 1, ceil_mode, False)
    x, added = batched(np.asarray(x, dtype=np.float64), spatial)
    taps, _ = _windows(x, spatial, kernel_size, stride, 0, 1, ceil_mode)
    with np.errstate(invalid="ignore", divide="ignore"):
        powered = np.power(x, norm_type)
    total = gather_windows(powered, taps, 0.0).sum(axis=tuple(range(-spatial, 0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return unbatched(np.power(total, 1.0 / norm_type), added)


def lp_pool1d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> np.ndarray:
    return _lp_pool(input, 1, float(norm_type), kernel_size, stride, ceil_mode)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> np.ndarray:
    return _lp_pool(input, 2, float(norm_type), kernel_size, stride, ceil_mode)


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> np.ndarray:
    return _lp_pool(input, 3, float(norm_type), kernel_size, stride, ceil_mode)


def adaptive_bins(size: int, out: int) -> list[tuple[int, int]]:
    """Adaptive pooling's bins: ``[floor(i L / out), ceil((i + 1) L / out))``."""
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_sizes(x: np.ndarray, spatial: int, output_size: Any) -> list[int]:
    sizes = [output_size] * spatial if isinstance(output_size, int) else list(output_size)
    if len(sizes) == 1 and spatial > 1:
        sizes = sizes * spatial
    if len(sizes) != spatial:
        raise ValueError("output_size has the wrong length")
    return [x.shape[2 + a] if s is None else int(s) for a, s in enumerate(sizes)]


def _adaptive(x: np.ndarray, spatial: int, output_size: Any, use_max: bool,
              return_indices: bool) -> Any:
    x, added = batched(np.asarray(x, dtype=np.float64), spatial)
    sizes = _adaptive_sizes(x, spatial, output_size)
    bins = [adaptive_bins(x.shape[2 + a], sizes[a]) for a in range(spatial)]
    values = np.zeros((*x.shape[:2], *sizes))
    indices = np.zeros((*x.shape[:2], *sizes), dtype=np.int64)
    flat = np.arange(math.prod(x.shape[2:])).reshape(x.shape[2:])
    for position in np.ndindex(*sizes):
        region = tuple(slice(*bins[a][i]) for a, i in enumerate(position))
        block = x[(slice(None), slice(None), *region)].reshape(*x.shape[:2], -1)
        where = (slice(None), slice(None), *position)
        if not use_max:
            values[where] = block.mean(axis=-1)
            continue
        nan = np.isnan(block)
        best = np.argmax(np.where(nan, -math.inf, block), axis=-1)
        last_nan = block.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
        chosen = np.where(nan.any(axis=-1), last_nan, best)
        values[where] = np.take_along_axis(block, chosen[..., None], axis=-1)[..., 0]
        indices[where] = flat[region].reshape(-1)[chosen]
    if return_indices:
        return unbatched(values, added), unbatched(indices, added)
    return unbatched(values, added)


def adaptive_avg_pool1d(input: Any, output_size: Any) -> np.ndarray:
    return _adaptive(input, 1, output_size, False, False)


def adaptive_avg_pool2d(input: Any, output_size: Any) -> np.ndarray:
    return _adaptive(input, 2, output_size, False, False)


def adaptive_avg_pool3d(input: Any, output_size: Any) -> np.ndarray:
    return _adaptive(input, 3, output_size, False, False)


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive(input, 1, output_size, True, return_indices)


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive(input, 2, output_size, True, return_indices)


def adaptive_max_pool3d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    return _adaptive(input, 3, output_size, True, return_indices)
