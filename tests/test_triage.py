"""Verdicts from oracles: the numeric rule, exceptions, and what never blames the reference."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from checks.findings import Finding, Kind
from checks.triage import Verdict, rmse, to_float64, triage


def _t(values: list[float], dtype: str = "float32") -> dict[str, Any]:
    arr = np.asarray(values, dtype=np.float64 if dtype == "float64" else np.float32)
    return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def _err(kind: str = "RuntimeError") -> dict[str, Any]:
    return {"t": "error", "type": kind, "message": "boom", "missing_api": False}


def _finding(kind: Kind, program: dict[str, Any] | None = None) -> Finding:
    return Finding(kind, "torch.op", "t.spec", "m", program or {"nodes": []}, key="v1")


def _judge(kind: Kind, ref: dict[str, Any], cand: dict[str, Any], wide: dict[str, Any] | None,
           others: dict[str, dict[str, Any]] | None = None,
           program: dict[str, Any] | None = None) -> Verdict:
    oracles = {name: {"v1": obs} for name, obs in (others or {}).items()}
    if wide is not None:
        oracles["reference-float64"] = {"v1": wide}
    return triage(program or {"nodes": []}, _finding(kind, program), {"v1": ref},
                  {"v1": cand}, oracles).verdict


def test_rmse_handles_nan_inf_and_shape() -> None:
    assert rmse(np.array([1.0, np.nan]), np.array([1.0, np.nan])) == 0.0
    assert rmse(np.array([1.0]), np.array([np.nan])) == math.inf
    assert rmse(np.array([1.0]), np.array([1.0, 2.0])) == math.inf
    assert rmse(np.array([0.0, 0.0]), np.array([3.0, 4.0])) == math.sqrt(12.5)


def test_candidate_far_from_float64_is_a_candidate_bug() -> None:
    truth = _t([1.0, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.0, 2.0]), _t([1.1, 2.0]), truth) is Verdict.CANDIDATE_BUG


def test_reference_far_from_float64_is_reference_suspect() -> None:
    truth = _t([1.0, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.1, 2.0]), _t([1.0, 2.0]), truth) \
        is Verdict.REFERENCE_SUSPECT


def test_both_as_close_as_each_other_is_noise() -> None:
    truth = _t([1.0000001, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.0000002, 2.0]), _t([1.0, 2.0]), truth) \
        is Verdict.TOLERANCE_NOISE


def test_a_third_framework_siding_with_the_reference_blocks_reference_suspect() -> None:
    truth = _t([1.0, 2.0], "float64")
    verdict = _judge(Kind.VALUE, _t([1.1, 2.0]), _t([1.0, 2.0]), truth,
                     {"third:jax": _t([1.1, 2.0])})
    assert verdict is Verdict.UNDETERMINED


def test_crashes_hangs_and_missing_apis_are_always_candidate_bugs() -> None:
    for kind in (Kind.CANDIDATE_CRASH, Kind.CANDIDATE_TIMEOUT, Kind.MISSING_API):
        assert _judge(kind, _t([1.0]), _err(), None) is Verdict.CANDIDATE_BUG


def test_exceptions_follow_what_the_spec_declares() -> None:
    invalid = {"nodes": [], "expect_raise": True}
    # reference raises on an input declared invalid, candidate accepts it: missing validation
    assert _judge(Kind.REFERENCE_ERROR, _err(), _t([1.0]), None, program=invalid) \
        is Verdict.CANDIDATE_BUG
    # reference accepts an input declared invalid, candidate rejects it: PyTorch is suspect
    assert _judge(Kind.CANDIDATE_ERROR, _t([1.0]), _err(), None, program=invalid) \
        is Verdict.REFERENCE_SUSPECT
    # nothing declared: a candidate that raises where PyTorch does not is wrong
    assert _judge(Kind.CANDIDATE_ERROR, _t([1.0]), _err(), None) is Verdict.CANDIDATE_BUG
    # nothing declared, every third framework accepts what the reference rejects
    assert _judge(Kind.REFERENCE_ERROR, _err(), _t([1.0]), None, {"third:x": _t([1.0])}) \
        is Verdict.REFERENCE_SUSPECT


def test_shapes_go_by_the_other_oracles() -> None:
    assert _judge(Kind.SHAPE, _t([1.0]), _t([1.0, 1.0]), None) is Verdict.CANDIDATE_BUG
    assert _judge(Kind.SHAPE, _t([1.0]), _t([1.0, 1.0]), None,
                  {"third:x": _t([1.0, 1.0])}) is Verdict.REFERENCE_SUSPECT


def test_to_float64_widens_inputs_dtypes_and_modules() -> None:
    program = {"nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [2], "recipe": {}},
        {"id": "v1", "op": "input", "dtype": "int64", "shape": [2], "recipe": {}},
        {"id": "v2", "op": "module", "target": "torch.nn.Linear", "args": [2, 2], "kwargs": {}},
        {"id": "v3", "op": "call", "target": "torch.sum", "args": [{"ref": "v0"}],
         "kwargs": {"dtype": {"dtype": "float16"}}},
    ]}
    wide = to_float64(program)
    assert [n["dtype"] for n in wide["nodes"] if n["op"] == "input"] == ["float64", "int64"]
    assert wide["nodes"][3]["name"] == "double"
    assert wide["nodes"][-1]["kwargs"]["dtype"] == {"dtype": "float64"}
    assert program["nodes"][0]["dtype"] == "float32"  # the original is left alone
