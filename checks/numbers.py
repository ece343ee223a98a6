"""The numbers of a finding: what PyTorch gave and what the candidate gave for the value that
differs (a few elements, the largest difference and where), named as the repro names it."""

from __future__ import annotations

from typing import Any

import numpy as np

from .findings import Finding, gradient_mismatches
from .program import Program
from .report_types import Numbers
from .repro import variable_names
from .runtime.replay import Observations
from .signatures import node_of

SHOWN = 6  # elements shown of each side


def numbers(program: Program, finding: Finding, ref: Observations, cand: Observations
            ) -> Numbers | None:
    """The differing value of ``finding`` in ``program``'s run on both sides, or None when it
    is no pair of numeric tensors of one shape (an error, a shape or dtype mismatch)."""
    key = finding.key
    if not key.startswith("grad:") and (key == "backward" or key not in ref):
        key = next(iter(gradient_mismatches(ref, cand)), key)
    expected, actual = _data(ref.get(key)), _data(cand.get(key))
    if expected is None or actual is None or expected.shape != actual.shape:
        return None
    with np.errstate(all="ignore"):
        diff = np.abs(expected.astype(np.complex128 if np.iscomplexobj(expected) else
                                      np.float64) - actual)
        diff = np.where(np.isnan(diff) & (np.isnan(expected) != np.isnan(actual)), np.inf,
                        np.nan_to_num(diff, nan=0.0))
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) \
        if diff.size else ()
    name = _name(program, key, finding)
    return {"name": name, "shape": list(expected.shape),
            "expected": [_plain(v) for v in expected.reshape(-1)[:SHOWN]],
            "actual": [_plain(v) for v in actual.reshape(-1)[:SHOWN]],
            "largest_difference": _plain(diff[where]) if diff.size else 0.0,
            "at": list(where), "expected_at": _plain(expected[where]) if diff.size else 0.0,
            "actual_at": _plain(actual[where]) if diff.size else 0.0}


def _data(obs: dict[str, Any] | None) -> np.ndarray | None:
    if not obs or obs.get("t") != "tensor":
        return None
    data = np.asarray(obs.get("data"))
    return data if data.dtype.kind in "biufc" else None


def _name(program: Program, key: str, finding: Finding) -> str:
    """``out``, ``tmp[1]``, ``grad x``: what the repro's returned dictionary calls it."""
    names = variable_names(program)
    if key.startswith("grad:"):
        base, _, attr = key[len("grad:"):].partition(":")
        leaf = f"{names.get(base, base)}.{attr}" if attr else names.get(node_of(base), base)
        return f"grad {leaf}"
    base = node_of(key) if not key.startswith("final:") else key[len("final:"):]
    if base in names:
        rest = key[len(base):] if key.startswith(base) else ""
        indices = [part for part in rest.split(".") if part.isdigit()]
        return names[base] + "".join(f"[{i}]" for i in indices)
    return names.get(finding.node, key)


def _plain(value: Any) -> float | int | bool | str:
    """A JSON value: numbers as they are, non-finite ones and complex ones as text."""
    item = value.item() if hasattr(value, "item") else value
    if isinstance(item, complex):
        return repr(item)
    if isinstance(item, float) and not np.isfinite(item):
        return repr(item)
    return item
