"""Batch, instance, layer, group and RMS normalization, local response normalization and
``F.normalize``, from PyTorch's docs.

``y = (x - E[x]) / sqrt(Var[x] + eps) * gamma + beta`` with the biased variance; running
statistics (``BatchNorm1d``'s docs) are updated as ``(1 - momentum) running + momentum
observed`` with the *unbiased* batch variance, and ``momentum=None`` takes the cumulative
average (``1 / num_batches_tracked``). The calls that write their running statistics in
place return :class:`Updated`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import Ambiguous


class Updated:
    """A result, and the arguments the call writes in place (by parameter name)."""

    def __init__(self, value: Any, writes: dict[str, Any]) -> None:
        self.value, self.writes = value, writes


def _affine(y: np.ndarray, weight: Any, bias: Any, shape: list[int]) -> np.ndarray:
    if weight is not None:
        y = y * np.asarray(weight, dtype=np.float64).reshape(shape)
    if bias is not None:
        y = y + np.asarray(bias, dtype=np.float64).reshape(shape)
    return y


def _channel_shape(x: np.ndarray) -> list[int]:
    return [1, x.shape[1], *([1] * (x.ndim - 2))]


def _updated(running: np.ndarray, observed: np.ndarray, momentum: float) -> np.ndarray:
    return (1 - momentum) * np.asarray(running, dtype=np.float64) + momentum * observed


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None,
               bias: Any = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Any:
    """Training normalizes with the batch's statistics over every axis but the channels
    (and writes the running ones, when given); evaluation with the running statistics."""
    x = np.asarray(input, dtype=np.float64)
    shape = _channel_shape(x)
    axes = tuple(a for a in range(x.ndim) if a != 1)
    if not training:
        mean = np.asarray(running_mean, dtype=np.float64).reshape(shape)
        var = np.asarray(running_var, dtype=np.float64).reshape(shape)
        return _affine((x - mean) / np.sqrt(var + eps), weight, bias, shape)
    count = x.size // x.shape[1]
    if count <= 1:
        raise ValueError("more than one value per channel is needed when training")
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    y = _affine((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps), weight, bias,
                shape)
    writes: dict[str, Any] = {}
    if running_mean is not None:
        writes["running_mean"] = _updated(running_mean, mean, momentum)
    if running_var is not None:
        writes["running_var"] = _updated(running_var, var * count / (count - 1), momentum)
    return Updated(y, writes) if writes else y


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Each sample's channels normalized over their spatial axes; the running statistics
    move towards the batch's average of the per-sample statistics."""
    x = np.asarray(input, dtype=np.float64)
    shape = _channel_shape(x)
    if not use_input_stats:
        mean = np.asarray(running_mean, dtype=np.float64).reshape(shape)
        var = np.asarray(running_var, dtype=np.float64).reshape(shape)
        return _affine((x - mean) / np.sqrt(var + eps), weight, bias, shape)
    axes = tuple(range(2, x.ndim))
    count = math.prod(x.shape[2:])
    if count <= 1:
        raise ValueError("more than one spatial element is needed")
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    y = _affine((x - mean) / np.sqrt(var + eps), weight, bias, shape)
    writes: dict[str, Any] = {}
    if running_mean is not None:
        writes["running_mean"] = _updated(running_mean, mean.reshape(x.shape[:2]).mean(0),
                                          momentum)
    if running_var is not None:
        unbiased = var.reshape(x.shape[:2]) * count / (count - 1)
        writes["running_var"] = _updated(running_var, unbiased.mean(0), momentum)
    return Updated(y, writes) if writes else y


def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> np.ndarray:
    x = np.asarray(input, dtype=np.float64)
    dims = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    if list(x.shape[x.ndim - len(dims):]) != [int(d) for d in dims]:
        raise ValueError("normalized_shape does not match the input's last dimensions")
    axes = tuple(range(x.ndim - len(dims), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return _affine((x - mean) / np.sqrt(var + eps), weight, bias, dims)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> np.ndarray:
    x = np.asarray(input, dtype=np.float64)
    channels = x.shape[1]
    if channels % num_groups:
        raise ValueError("the channels do not divide into the groups")
    grouped = x.reshape(x.shape[0], num_groups, -1)
    mean = grouped.mean(axis=2, keepdims=True)
    var = grouped.var(axis=2, keepdims=True)
    y = ((grouped - mean) / np.sqrt(var + eps)).reshape(x.shape)
    return _affine(y, weight, bias, _channel_shape(x))


def rms_norm(input: Any, normalized_shape: Any, weight: Any = None, eps: Any = None
             ) -> np.ndarray:
    """``y = x / sqrt(mean(x^2) + eps) * gamma``; ``eps=None`` is the machine epsilon of
    the input's dtype (here float64's)."""
    x = np.asarray(input, dtype=np.float64)
    dims = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    axes = tuple(range(x.ndim - len(dims), x.ndim))
    eps = float(np.finfo(np.float64).eps) if eps is None else eps
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return _affine(y, weight, None, dims)


def local_response_norm(input: Any, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> np.ndarray:
    """``b_c = a_c (k + alpha / n sum_{c'} a_{c'}^2)^(-beta)`` over the ``n`` channels
    centred on ``c`` (zero beyond the edges). An even ``n`` has no centre: the docs' range
    ``c - n/2 .. c + n/2`` then holds ``n + 1`` channels, so the formula abstains."""
    if size % 2 == 0:
        raise Ambiguous("an even size has no centred window")
    x = np.asarray(input, dtype=np.float64)
    if x.ndim < 3:
        raise ValueError("local_response_norm takes 3-d or larger input")
    square = np.pad(x * x, [(0, 0), (size // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    total = sum(square[:, c:c + x.shape[1]] for c in range(size))
    return x * (k + alpha / size * total) ** (-beta)


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
              ) -> np.ndarray:
    """``v / max(||v||_p, eps)`` along ``dim``."""
    x = np.asarray(input, dtype=np.float64)
    if math.isinf(p):
        norm = np.max(np.abs(x), axis=dim, keepdims=True) if p > 0 else \
            np.min(np.abs(x), axis=dim, keepdims=True)
    else:
        norm = np.sum(np.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / np.maximum(norm, eps)


def batch_norm_module(input: Any, state: dict[str, Any], training: bool, eps: float = 1e-5,
                      momentum: Any = 0.1, track_running_stats: bool = True) -> Updated:
    """``BatchNorm{1,2,3}d``: batch statistics while training or without running ones;
    ``num_batches_tracked`` counts the training calls; ``momentum=None`` averages them."""
    tracking = track_running_stats and state.get("running_mean") is not None
    writes: dict[str, Any] = {}
    factor = 0.0 if momentum is None else momentum
    if training and tracking:
        count = int(np.asarray(state["num_batches_tracked"])) + 1
        writes["num_batches_tracked"] = np.asarray(count, dtype=np.int64)
        factor = 1.0 / count if momentum is None else momentum
    use_batch = training or not tracking
    result = batch_norm(input, state.get("running_mean") if tracking else None,
                        state.get("running_var") if tracking else None,
                        state.get("weight"), state.get("bias"), use_batch, factor, eps)
    if isinstance(result, Updated):
        writes.update(result.writes)
        result = result.value
    return Updated(result, writes)


def instance_norm_module(input: Any, state: dict[str, Any], training: bool, eps: float = 1e-5,
                         momentum: Any = 0.1, track_running_stats: bool = False,
                         spatial: int = 1) -> Updated:
    """``InstanceNorm{1,2,3}d``: an unbatched input gains a batch axis; the running
    statistics are used in evaluation only when they are tracked (``momentum=None`` leaves
    them as they are)."""
    x = np.asarray(input, dtype=np.float64)
    added = x.ndim == spatial + 1
    x = x[None] if added else x
    tracking = track_running_stats and state.get("running_mean") is not None
    writes: dict[str, Any] = {}
    factor = 0.0 if momentum is None else momentum  # nothing counts the calls here
    result = instance_norm(x, state.get("running_mean") if tracking else None,
                           state.get("running_var") if tracking else None,
                           state.get("weight"), state.get("bias"),
                           training or not tracking, factor, eps)
    if isinstance(result, Updated):
        writes.update(result.writes)
        result = result.value
    return Updated(result[0] if added else result, writes)
