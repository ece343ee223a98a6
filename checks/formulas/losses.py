"""The ``F.*_loss`` family, from the formulas of PyTorch's loss-module docs (``MSELoss``,
``CrossEntropyLoss``, ...): the unreduced loss ``l_n``, then ``mean`` or ``sum``.

Where the docs leave a case open the formula abstains: the weighted ``mean`` of
``mse_loss``/``l1_loss``/``huber_loss`` ("the mean of the output is taken", which the three
read differently).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .common import Ambiguous, legacy_reduction, log_sigmoid, log_softmax
from .common import reduce as reduce_loss

LOG_CLAMP = -100.0  # BCELoss "clamps its log function outputs to be greater than or equal to -100"


def _pair(input: Any, target: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(input, dtype=np.float64), np.asarray(target, dtype=np.float64)
    return np.broadcast_arrays(x, y)  # type: ignore[return-value]


def _weighted(loss: np.ndarray, weight: Any, reduction: str) -> np.ndarray:
    if weight is None:
        return reduce_loss(loss, reduction)
    if reduction == "mean":
        raise Ambiguous("the docs do not say what the mean of a weighted loss divides by")
    return reduce_loss(loss * np.asarray(weight, dtype=np.float64), reduction)


def mse_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Any = None) -> np.ndarray:
    """``l_n = (x_n - y_n)^2``."""
    x, y = _pair(input, target)
    return _weighted((x - y) ** 2, weight, legacy_reduction(size_average, reduce, reduction))


def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Any = None) -> np.ndarray:
    """``l_n = |x_n - y_n|``."""
    x, y = _pair(input, target)
    return _weighted(np.abs(x - y), weight, legacy_reduction(size_average, reduce, reduction))


def smooth_l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> np.ndarray:
    """``l_n = 0.5 (x_n - y_n)^2 / beta`` if ``|x_n - y_n| < beta``, else
    ``|x_n - y_n| - 0.5 beta`` (beta = 0 is the L1 loss)."""
    x, y = _pair(input, target)
    diff = np.abs(x - y)
    loss = diff if beta == 0 else np.where(diff < beta, 0.5 * diff ** 2 / beta,
                                           diff - 0.5 * beta)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0,
               weight: Any = None) -> np.ndarray:
    """``l_n = 0.5 (x_n - y_n)^2`` if ``|x_n - y_n| < delta``, else
    ``delta (|x_n - y_n| - 0.5 delta)``."""
    x, y = _pair(input, target)
    diff = np.abs(x - y)
    loss = np.where(diff < delta, 0.5 * diff ** 2, delta * (diff - 0.5 * delta))
    return _weighted(loss, weight, reduction)


def binary_cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> np.ndarray:
    """``l_n = -w_n [y_n log x_n + (1 - y_n) log(1 - x_n)]``, each log clamped at -100."""
    x, y = _pair(input, target)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_x = np.maximum(np.log(x), LOG_CLAMP)
        log_not_x = np.maximum(np.log1p(-x), LOG_CLAMP)
    loss = -(y * log_x + (1 - y) * log_not_x)
    if weight is not None:
        loss = loss * np.asarray(weight, dtype=np.float64)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None,
                                     size_average: Any = None, reduce: Any = None,
                                     reduction: str = "mean", pos_weight: Any = None
                                     ) -> np.ndarray:
    """``l_n = -w_n [p y_n log sigmoid(x_n) + (1 - y_n) log(1 - sigmoid(x_n))]``."""
    x, y = _pair(input, target)
    p = 1.0 if pos_weight is None else np.asarray(pos_weight, dtype=np.float64)
    loss = -(p * y * log_sigmoid(x) + (1 - y) * log_sigmoid(-x))
    if weight is not None:
        loss = loss * np.asarray(weight, dtype=np.float64)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def _class_axis(x: np.ndarray) -> np.ndarray:
    """``(C)`` as ``(1, C)``: the docs' unbatched input."""
    return x[None] if x.ndim == 1 else x


def nll_loss(input: Any, target: Any, weight: Any = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean"
             ) -> np.ndarray:
    """``l_n = -w_{y_n} x_{n, y_n}`` (0 where ``y_n`` is ``ignore_index``); ``mean`` divides
    by the sum of ``w_{y_n}`` over the targets not ignored."""
    x = _class_axis(np.asarray(input, dtype=np.float64))
    y = np.asarray(target).astype(np.int64)
    squeeze = np.ndim(input) == 1
    y = y.reshape(1) if squeeze else y
    classes = x.shape[1]
    w = np.ones(classes) if weight is None else np.asarray(weight, dtype=np.float64)
    keep = y != ignore_index
    if ((y[keep] < 0) | (y[keep] >= classes)).any():
        raise ValueError("target out of range")
    safe = np.where(keep, y, 0)
    picked = np.take_along_axis(x, safe[:, None, ...], axis=1)[:, 0]
    weights = np.where(keep, w[safe], 0.0)
    loss = np.where(keep, -weights * picked, 0.0)
    mode = legacy_reduction(size_average, reduce, reduction)
    if mode == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(loss.sum() / weights.sum())
    if mode == "none" and squeeze:
        return loss[0]
    return reduce_loss(loss, mode)


def cross_entropy(input: Any, target: Any, weight: Any = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> np.ndarray:
    """``CrossEntropyLoss``: class indices, ``l_n = (1 - e) (-w_{y_n} log p_{n, y_n})
    + e / C sum_c (-w_c log p_{n, c})`` (``mean`` divides by the sum of ``w_{y_n}`` over the
    targets not ignored); class probabilities, ``l_n = -sum_c w_c y'_{n, c} log p_{n, c}``
    with ``y' = (1 - e) y + e / C`` (``mean`` divides by the number of samples)."""
    x = np.asarray(input, dtype=np.float64)
    mode = legacy_reduction(size_average, reduce, reduction)
    probabilities = np.asarray(target).dtype.kind == "f"
    squeeze = x.ndim == 1
    x = _class_axis(x)
    classes = x.shape[1]
    w = np.ones(classes) if weight is None else np.asarray(weight, dtype=np.float64)
    shape = [1] * x.ndim
    shape[1] = classes
    w_axis = w.reshape(shape)
    logp = log_softmax(x, axis=1)
    if probabilities:
        y = _class_axis(np.asarray(target, dtype=np.float64))
        y = (1 - label_smoothing) * y + label_smoothing / classes
        loss = -(w_axis * y * logp).sum(axis=1)
        if mode == "mean":
            return np.asarray(loss.sum() / (loss.size if loss.size else math.nan))
        return loss[0] if mode == "none" and squeeze else reduce_loss(loss, mode)
    y = np.asarray(target).astype(np.int64)
    y = y.reshape(1) if squeeze else y
    keep = y != ignore_index
    safe = np.where(keep, y, 0)
    if ((y[keep] < 0) | (y[keep] >= classes)).any():
        raise ValueError("target out of range")
    picked = np.take_along_axis(logp, safe[:, None, ...], axis=1)[:, 0]
    weights = np.where(keep, w[safe], 0.0)
    loss = -weights * picked
    if label_smoothing:
        smooth = -(w_axis * logp).sum(axis=1) / classes
        loss = (1 - label_smoothing) * loss + label_smoothing * np.where(keep, smooth, 0.0)
    loss = np.where(keep, loss, 0.0)
    if mode == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(loss.sum() / weights.sum())
    return loss[0] if mode == "none" and squeeze else reduce_loss(loss, mode)


def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
           reduction: str = "mean", log_target: bool = False) -> np.ndarray:
    """``l = y (log y - x)`` (0 where ``y = 0``); with ``log_target``, ``exp(y) (y - x)``;
    ``batchmean`` divides the sum by the batch size."""
    x, y = _pair(input, target)
    if log_target:
        loss = np.exp(y) * (y - x)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(y == 0, 0.0, y * np.log(np.where(y == 0, 1.0, y))) - y * x
    mode = legacy_reduction(size_average, reduce, reduction)
    if mode == "batchmean":
        return np.asarray(loss.sum() / (x.shape[0] if x.ndim else 1))
    return reduce_loss(loss, mode)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> np.ndarray:
    """``exp(x) - y x`` (``log_input``), else ``x - y log(x + eps)``; ``full`` adds
    Stirling's ``y log y - y + 0.5 log(2 pi y)`` where ``y > 1``."""
    x, y = _pair(input, target)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.exp(x) - y * x if log_input else x - y * np.log(x + eps)
        if full:
            safe = np.where(y > 1, y, 2.0)
            stirling = safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe)
            loss = loss + np.where(y > 1, stirling, 0.0)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> np.ndarray:
    """``0.5 (log max(var, eps) + (x - y)^2 / max(var, eps))`` (+ ``0.5 log 2 pi`` with
    ``full``); ``var`` one dimension short, or 1 wide in its last, is broadcast."""
    x, y = np.asarray(input, dtype=np.float64), np.asarray(target, dtype=np.float64)
    v = np.asarray(var, dtype=np.float64)
    if v.ndim and v.shape != x.shape:
        if v.shape == x.shape[:-1]:
            v = v[..., None]
        elif not (v.shape[:-1] == x.shape[:-1] and v.shape[-1] == 1):
            raise ValueError("var has the wrong shape")
    if (v < 0).any():
        raise ValueError("var has a negative entry")
    v = np.maximum(v, eps)
    loss = 0.5 * (np.log(v) + (x - y) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> np.ndarray:
    """``l_n = x_n`` where ``y_n = 1``, ``max(0, margin - x_n)`` where ``y_n = -1``."""
    x, y = _pair(input, target)
    loss = np.where(y != -1, x, 0.0) + np.where(y != 1, np.maximum(margin - x, 0.0), 0.0)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean"
                        ) -> np.ndarray:
    """``max(0, -y (x1 - x2) + margin)``."""
    a, b, y = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                    for v in (input1, input2, target)))
    loss = np.maximum(-y * (a - b) + margin, 0.0)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def soft_margin_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> np.ndarray:
    """``log(1 + exp(-y x))`` per element."""
    x, y = _pair(input, target)
    return reduce_loss(-log_sigmoid(y * x), legacy_reduction(size_average, reduce, reduction))


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None,
                                size_average: Any = None, reduce: Any = None,
                                reduction: str = "mean") -> np.ndarray:
    """``l_n = -1/C sum_c w_c [y log sigmoid(x) + (1 - y) log sigmoid(-x)]``."""
    x, y = _pair(input, target)
    terms = -(y * log_sigmoid(x) + (1 - y) * log_sigmoid(-x))
    if weight is not None:
        terms = terms * np.asarray(weight, dtype=np.float64)
    loss = terms.mean(axis=-1)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                          size_average: Any = None, reduce: Any = None,
                          reduction: str = "mean") -> np.ndarray:
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y = -1``; ``cos = x1.x2 / sqrt((|x1|^2 + e)(|x2|^2 + e))``, e = 1e-12."""
    a, b = np.asarray(input1, dtype=np.float64), np.asarray(input2, dtype=np.float64)
    y = np.asarray(target, dtype=np.float64)
    eps = 1e-12
    cos = (a * b).sum(axis=-1) / np.sqrt(((a * a).sum(axis=-1) + eps)
                                         * ((b * b).sum(axis=-1) + eps))
    loss = np.where(y == 1, 1 - cos, 0.0) + np.where(y == -1, np.maximum(cos - margin, 0.0), 0.0)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> np.ndarray:
    """``||x1 - x2 + eps||_p`` over the last dimension (``F.pairwise_distance``'s docs)."""
    diff = np.asarray(x1, dtype=np.float64) - np.asarray(x2, dtype=np.float64) + eps
    if math.isinf(p):
        out = np.max(np.abs(diff), axis=-1, keepdims=keepdim)
    elif p == 0:
        out = np.sum(diff != 0, axis=-1, keepdims=keepdim).astype(np.float64)
    else:
        out = np.sum(np.abs(diff) ** p, axis=-1, keepdims=keepdim) ** (1.0 / p)
    return out


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean"
                        ) -> np.ndarray:
    """``max(d(a, p) - d(a, n) + margin, 0)``; ``swap`` takes ``min(d(a, n), d(p, n))``."""
    to_pos = pairwise_distance(anchor, positive, p, eps)
    to_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        to_neg = np.minimum(to_neg, pairwise_distance(positive, negative, p, eps))
    loss = np.maximum(to_pos - to_neg + margin, 0.0)
    return reduce_loss(loss, legacy_reduction(size_average, reduce, reduction))


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,
                      weight: Any = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> np.ndarray:
    """``l_n = sum_{i != y} w_y max(0, margin - x[y] + x[i])^p / C``."""
    x = _class_axis(np.asarray(input, dtype=np.float64))
    y = np.asarray(target).astype(np.int64).reshape(-1)
    classes = x.shape[1]
    if ((y < 0) | (y >= classes)).any():
        raise ValueError("target out of range")
    picked = x[np.arange(x.shape[0]), y][:, None]
    terms = np.maximum(margin - picked + x, 0.0) ** p
    terms[np.arange(x.shape[0]), y] = 0.0
    if weight is not None:
        terms = terms * np.asarray(weight, dtype=np.float64)[y][:, None]
    loss = terms.sum(axis=1) / classes
    mode = legacy_reduction(size_average, reduce, reduction)
    return loss[0] if mode == "none" and np.ndim(input) == 1 else reduce_loss(loss, mode)
