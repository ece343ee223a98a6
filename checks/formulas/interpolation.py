"""``F.interpolate`` and the upsampling modules, from PyTorch's docs, one axis at a time.

Every mode is separable: along each spatial axis, output element ``i`` is a weighted sum of
a few input elements (``taps``). The source coordinate of ``i`` is ``(i + 0.5) scale - 0.5``
(``align_corners=False``; ``i (L_in - 1) / (L_out - 1)`` with ``align_corners=True``), where
``scale`` is ``1 / scale_factor`` when a scale factor is given and not recomputed
(``recompute_scale_factor``'s docs) and ``L_in / L_out`` otherwise. ``nearest`` takes
``floor(i scale)`` (OpenCV's INTER_NEAREST, the docs say; sizes kept or exactly doubled map
exactly), ``nearest-exact`` ``floor((i + 0.5) scale)`` (PIL's and scikit-image's), linear
modes the two neighbours, ``bicubic`` Keys' cubic convolution (a = -0.75) over four clamped
neighbours, ``area`` adaptive average pooling, and ``antialias`` (with
``align_corners=False``) Pillow's resampling filters, as the docs promise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import Ambiguous
from .pooling import adaptive_bins

SPATIAL = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
CUBIC_A = -0.75  # Keys' coefficient for bicubic; Pillow's antialiased bicubic uses -0.5
PIL_CUBIC_A = -0.5


def output_sizes(shape: tuple[int, ...], size: Any, scale_factor: Any
                 ) -> tuple[list[int], list[float | None]]:
    """The output size of each spatial axis and the scale factor the kernel is given
    (None where the size was given)."""
    spatial = len(shape) - 2
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, (int, np.integer)) else \
            [int(s) for s in size]
        if len(sizes) != spatial:
            raise ValueError("size has the wrong length")
        return sizes, [None] * spatial
    factors: list[float | None] = [float(scale_factor)] * spatial \
        if isinstance(scale_factor, (int, float)) else [float(f) for f in scale_factor]
    if len(factors) != spatial:
        raise ValueError("scale_factor has the wrong length")
    return [math.floor(float(shape[2 + a]) * float(factors[a] or 0)) for a in range(spatial)], \
        factors


def _scale(size_in: int, size_out: int, align_corners: bool, factor: float | None) -> float:
    if align_corners:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    return 1.0 / factor if factor is not None and factor > 0 else size_in / size_out


def _nearest_index(i: np.ndarray, scale: float, size_in: int, exact: bool) -> np.ndarray:
    shift = 0.5 if exact else 0.0
    return np.minimum(np.floor((i + shift) * scale), size_in - 1).astype(np.int64)


def nearest_taps(size_in: int, size_out: int, factor: float | None, exact: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """One tap per output element. Where ``floor`` lands on an integer that the kernel's
    single precision and double precision round apart, the formula abstains."""
    i = np.arange(size_out, dtype=np.float64)
    if not exact and size_out in (size_in, 2 * size_in):
        index = np.arange(size_out) // (size_out // size_in)
    else:
        wide = _nearest_index(i, _scale(size_in, size_out, False, factor), size_in, exact)
        scale32 = np.float32(1.0) / np.float32(factor) if factor is not None and factor > 0 \
            else np.float32(size_in) / np.float32(size_out)
        shifted = (i.astype(np.float32) + np.float32(0.5 if exact else 0.0)) * scale32
        single = np.minimum(np.floor(shifted), size_in - 1).astype(np.int64)
        if not np.array_equal(wide, single):
            raise Ambiguous("the nearest source index is on a rounding boundary")
        index = wide
    return index[:, None], np.ones((size_out, 1))


def linear_taps(size_in: int, size_out: int, factor: float | None, align_corners: bool
                ) -> tuple[np.ndarray, np.ndarray]:
    scale = _scale(size_in, size_out, align_corners, factor)
    i = np.arange(size_out, dtype=np.float64)
    src = i * scale if align_corners else np.maximum((i + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(src), size_in - 1).astype(np.int64)
    high = np.minimum(low + 1, size_in - 1)
    frac = np.clip(src - low, 0.0, 1.0)
    return np.stack([low, high], axis=1), np.stack([1 - frac, frac], axis=1)


def cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of the four neighbours at offset ``t`` in [0, 1)."""
    def near(x: np.ndarray) -> np.ndarray:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=1)


def cubic_taps(size_in: int, size_out: int, factor: float | None, align_corners: bool
               ) -> tuple[np.ndarray, np.ndarray]:
    scale = _scale(size_in, size_out, align_corners, factor)
    i = np.arange(size_out, dtype=np.float64)
    src = i * scale if align_corners else (i + 0.5) * scale - 0.5
    base = np.floor(src)
    taps = np.clip(base[:, None].astype(np.int64) + np.arange(-1, 3)[None, :], 0, size_in - 1)
    return taps, cubic_weights(src - base, CUBIC_A)


def _pil_filter(x: np.ndarray, cubic: bool) -> np.ndarray:
    x = np.abs(x)
    if not cubic:
        return np.where(x < 1.0, 1.0 - x, 0.0)
    a = PIL_CUBIC_A
    return np.where(x < 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                    np.where(x < 2.0, (((x - 5) * x + 8) * x - 4) * a, 0.0))


def antialias_taps(size_in: int, size_out: int, factor: float | None, cubic: bool
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Pillow's resampling: the filter widened by the downscale, normalized per output."""
    scale = _scale(size_in, size_out, False, factor)
    support = (2.0 if cubic else 1.0) * max(scale, 1.0)
    inv = 1.0 / max(scale, 1.0)
    rows: list[tuple[np.ndarray, np.ndarray]] = []
    for i in range(size_out):
        center = (i + 0.5) * scale
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), size_in)
        taps = np.arange(first, last)
        weights = _pil_filter((taps - center + 0.5) * inv, cubic)
        total = weights.sum()
        rows.append((taps, weights / total if total != 0 else weights))
    width = max(len(t) for t, _ in rows)
    taps_out = np.full((size_out, width), size_in, dtype=np.int64)  # size_in: a zero tap
    weights_out = np.zeros((size_out, width))
    for i, (taps, weights) in enumerate(rows):
        taps_out[i, :len(taps)], weights_out[i, :len(weights)] = taps, weights
    return taps_out, weights_out


def resample_axis(x: np.ndarray, axis: int, taps: np.ndarray, weights: np.ndarray
                  ) -> np.ndarray:
    """``out[..., i, ...] = sum_t weights[i, t] x[..., taps[i, t], ...]``; a tap of index
    ``L_in`` reads a zero (and adds nothing, not even a NaN)."""
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, 1)
    gathered = np.take(np.pad(x, pad), taps, axis=axis)  # (..., out, taps, ...)
    shape = [1] * gathered.ndim
    shape[axis], shape[axis + 1] = weights.shape
    present = np.broadcast_to((taps < x.shape[axis]).reshape(shape), gathered.shape)
    terms = np.where(present, gathered * weights.reshape(shape), 0.0)
    return terms.sum(axis=axis + 1)


def _area(x: np.ndarray, sizes: list[int]) -> np.ndarray:
    out = x
    for axis, size_out in enumerate(sizes):
        bins = adaptive_bins(x.shape[2 + axis], size_out)
        width = max(end - start for start, end in bins)
        taps = np.full((size_out, width), x.shape[2 + axis], dtype=np.int64)
        weights = np.zeros((size_out, width))
        for i, (start, end) in enumerate(bins):
            taps[i, :end - start] = np.arange(start, end)
            weights[i, :end - start] = 1.0 / (end - start)
        out = resample_axis(out, 2 + axis, taps, weights)
    return out


def interpolate(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: Any = None, recompute_scale_factor: Any = None,
                antialias: bool = False) -> np.ndarray:
    """Each spatial axis resampled alone: output ``i`` reads the source coordinate
    ``(i + 0.5) scale - 0.5`` (``i (L_in - 1) / (L_out - 1)`` with ``align_corners``), where
    ``scale`` is ``1 / scale_factor`` for a given factor and ``L_in / L_out`` otherwise;
    ``nearest`` takes ``floor(i scale)``, ``nearest-exact`` ``floor((i + 0.5) scale)``, the
    linear modes the two neighbours, ``bicubic`` Keys' cubic convolution (a = -0.75),
    ``area`` adaptive average pooling, ``antialias`` Pillow's filters."""
    x = np.asarray(input, dtype=np.float64)
    spatial = x.ndim - 2
    if spatial < 1 or spatial > 3:
        raise ValueError("interpolate takes 3-d to 5-d input")
    if mode in SPATIAL and SPATIAL[mode] != spatial:
        raise ValueError(f"{mode} takes {SPATIAL[mode] + 2}-d input")
    if align_corners is not None and mode not in SPATIAL:
        raise ValueError("align_corners is for the linear modes only")
    if antialias and (mode not in ("bilinear", "bicubic") or align_corners):
        raise Ambiguous("antialias is documented for bilinear and bicubic without "
                        "align_corners")
    sizes, factors = output_sizes(x.shape, size, scale_factor)
    if recompute_scale_factor:
        factors = [None] * spatial
    if mode == "area":
        return _area(x, sizes)
    out = x
    for axis in range(spatial):
        size_in, size_out, factor = x.shape[2 + axis], sizes[axis], factors[axis]
        kept = (1, 2) if mode == "nearest" else (1,)
        if factor is not None and any(size_out == m * size_in and factor != m for m in kept):
            # the kernels copy an axis whose size is kept (nearest also one exactly doubled),
            # whatever the scale factor says: the docs do not say which is meant
            raise Ambiguous("a kept or doubled size with a scale factor of another value")
        if mode in ("nearest", "nearest-exact"):
            taps, weights = nearest_taps(size_in, size_out, factor, mode == "nearest-exact")
        elif antialias:
            taps, weights = antialias_taps(size_in, size_out, factor, mode == "bicubic")
        elif mode == "bicubic":
            taps, weights = cubic_taps(size_in, size_out, factor, bool(align_corners))
        elif mode in SPATIAL:
            taps, weights = linear_taps(size_in, size_out, factor, bool(align_corners))
        else:
            raise ValueError(f"unknown mode {mode!r}")
        out = resample_axis(out, 2 + axis, taps, weights)
    return out


def upsample(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: Any = None) -> np.ndarray:
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> np.ndarray:
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> np.ndarray:
    return interpolate(input, size, scale_factor, "bilinear", align_corners=True)
