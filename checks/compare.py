"""Compare one observation of the reference with the candidate's: attributes first, then values.

Comparison returns a :class:`Mismatch` (or None) instead of raising, as torch.testing's
internals do; the engine turns mismatches into findings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .runtime.dtypes import BY_NAME, DEFAULT


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None
              ) -> tuple[float, float]:
    """``rtol`` and ``atol`` when both are given, else the dtype's own (its row of
    ``checks/runtime/dtypes.py``); exact for a dtype that has none."""
    if rtol is not None and atol is not None:
        return rtol, atol
    row = BY_NAME.get(dtype)
    return (row.rtol, row.atol) if row is not None else (0.0, 0.0)


@dataclass(frozen=True)
class Mismatch:
    """What differs in one observation: ``aspect`` is shape, dtype, value or error."""

    aspect: str
    message: str
    max_abs: float | None = None
    max_rel: float | None = None


def compare(ref: dict[str, Any], cand: dict[str, Any] | None,
            rtol: float | None = None, atol: float | None = None) -> Mismatch | None:
    if cand is None:
        return Mismatch("error", "the candidate produced no value here")
    if ref["t"] == "error" or cand["t"] == "error":
        return _compare_errors(ref, cand)
    if ref["t"] != cand["t"]:
        return Mismatch("value", f"reference gives {_describe(ref)}, candidate {_describe(cand)}")
    if ref["t"] == "tensor":
        return compare_tensors(ref, cand, rtol, atol)
    if ref["t"] == "value":
        return _compare_values(ref["value"], cand["value"], rtol, atol)
    return None


def _describe(obs: dict[str, Any]) -> str:
    if obs["t"] == "tensor":
        return f"a {obs['dtype']} tensor of shape {tuple(obs['shape'])}"
    if obs["t"] == "value":
        return f"the value {obs['value']!r:.60}"
    if obs["t"] == "error":
        return f"{obs['type']}: {obs['message']}"
    return f"an object of type {obs.get('type')}"


def _compare_errors(ref: dict[str, Any], cand: dict[str, Any]) -> Mismatch | None:
    """Both raising agree whatever the messages say, unless the candidate's exception is not
    of the reference's type: code that catches what PyTorch raises would miss it."""
    if ref["t"] == "error" and cand["t"] == "error":
        if ref["type"] in (cand.get("bases") or [cand["type"]]):
            return None
        return Mismatch("candidate-error",
                        f"candidate raised {cand['type']}: {cand['message']}; "
                        f"the reference raised {ref['type']}: {ref['message']}")
    if ref["t"] == "error":
        return Mismatch("reference-error",
                        f"reference raised {ref['type']}: {ref['message']}; "
                        f"candidate returned {_describe(cand)}")
    aspect = "missing-api" if cand.get("missing_api") else "candidate-error"
    return Mismatch(aspect, f"candidate raised {cand['type']}: {cand['message']}")


def _compare_values(ref: Any, cand: Any, rtol: float | None, atol: float | None
                    ) -> Mismatch | None:
    ref, cand = _plain_complex(ref), _plain_complex(cand)
    if isinstance(ref, complex) and isinstance(cand, complex):
        r, a = tolerance("complex128", rtol, atol) if rtol is not None else tolerance(DEFAULT)
        both_nan = np.isnan(ref) and np.isnan(cand)
        if both_nan or ref == cand or abs(ref - cand) <= a + r * abs(ref):
            return None
    elif isinstance(ref, float) or isinstance(cand, float):
        if isinstance(ref, (int, float)) and isinstance(cand, (int, float)):
            r, a = tolerance("float64", rtol, atol) if rtol is not None else tolerance(DEFAULT)
            if (np.isnan(ref) and np.isnan(cand)) or abs(ref - cand) <= a + r * abs(ref):
                return None
    elif ref == cand:
        return None
    return Mismatch("value", f"reference gives {ref!r:.80}, candidate {cand!r:.80}")


def _plain_complex(value: Any) -> Any:
    """An observed complex scalar (``{"complex": [re, im]}``) as a Python complex."""
    if isinstance(value, dict) and "complex" in value:
        return complex(*(float(part) for part in value["complex"]))
    return value


def compare_tensors(ref: dict[str, Any], cand: dict[str, Any],
                    rtol: float | None = None, atol: float | None = None) -> Mismatch | None:
    if list(ref["shape"]) != list(cand["shape"]):
        return Mismatch("shape", f"shape {tuple(ref['shape'])} expected, "
                                 f"got {tuple(cand['shape'])}")
    if ref["dtype"] != cand["dtype"]:
        return Mismatch("dtype", f"dtype {ref['dtype']} expected, got {cand['dtype']}")
    expected, actual = ref["data"], cand["data"]
    if expected.size == 0:
        return None
    r, a = tolerance(ref["dtype"], rtol, atol)
    if expected.dtype == bool or (r == 0.0 and a == 0.0):
        bad = expected != actual
        if expected.dtype.kind == "f" or expected.dtype.kind == "c":
            bad &= ~(np.isnan(expected) & np.isnan(actual))
        if not bad.any():
            return None
        return Mismatch("value", _exact_message(expected, actual, bad))
    return _close(expected, actual, r, a)


def _exact_message(expected: np.ndarray, actual: np.ndarray, bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
    return (f"Mismatched elements: {int(bad.sum())} / {bad.size} "
            f"({100.0 * bad.sum() / bad.size:.1f}%); first at index {index}: "
            f"expected {expected[index]!r}, got {actual[index]!r} (exact match required)")


def _close(expected: np.ndarray, actual: np.ndarray, rtol: float, atol: float
           ) -> Mismatch | None:
    exp = expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64)
    act = actual.astype(exp.dtype)
    both_nan = np.isnan(exp) & np.isnan(act)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(exp - act)
        same_inf = np.isinf(exp) & (exp == act)
        finite = np.isfinite(exp) & np.isfinite(act)
        bad = ~(both_nan | same_inf | (finite & (diff <= atol + rtol * np.abs(exp))))
    if not bad.any():
        return None
    diff = np.where(both_nan | same_inf, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / np.abs(exp))
    rel = np.where(np.isnan(rel), np.inf, rel)
    abs_at = np.unravel_index(int(np.argmax(diff)), diff.shape)
    rel_at = np.unravel_index(int(np.argmax(rel)), rel.shape)
    max_abs, max_rel = float(diff[abs_at]), float(rel[rel_at])
    count = int(bad.sum())
    message = (f"Mismatched elements: {count} / {bad.size} ({100.0 * count / bad.size:.1f}%); "
               f"greatest absolute difference: {max_abs:.6g} at index "
               f"{tuple(int(i) for i in abs_at)} (up to {atol:g} allowed); "
               f"greatest relative difference: {max_rel:.6g} at index "
               f"{tuple(int(i) for i in rel_at)} (up to {rtol:g} allowed)")
    return Mismatch("value", message, max_abs, max_rel)
