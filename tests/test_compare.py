"""Comparison: attributes before values, torch.testing's tolerance table, NaN equals NaN."""

from __future__ import annotations

from typing import Any

import numpy as np

from alignbot.checks.compare import compare, tolerance
from alignbot.checks.runtime.dtypes import TABLE


def _t(data: object, dtype: str = "float32") -> dict[str, object]:
    arr = np.asarray(data, dtype=np.float32 if dtype == "bfloat16" else dtype)
    return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def test_table_matches_torch_testing_defaults() -> None:
    """Every dtype's tolerances are assert_close's, except where that compares bit for bit
    and the dtype is floating (float8): one rounding step of it is allowed there."""
    import torch.testing._comparison as reference

    for row in TABLE:
        assert tolerance(row.name) == (row.rtol, row.atol)
        torch_dtype = getattr(__import__("torch"), row.name)
        if reference.default_tolerances(torch_dtype) == (0.0, 0.0) and row.family == "float":
            assert (row.rtol, row.atol) == (row.eps, 1e-5), row.name
        else:
            assert reference.default_tolerances(torch_dtype) == (row.rtol, row.atol), row.name


def test_float8_results_may_be_one_step_of_their_dtype_apart() -> None:
    def t(values: list[float], dtype: str) -> dict[str, Any]:
        arr = np.asarray(values, dtype=np.float32)  # float8 travels as float32
        return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}

    assert compare(t([1.0, 8.0], "float8_e4m3fn"), t([1.125, 9.0], "float8_e4m3fn")) is None
    assert compare(t([1.0], "float8_e4m3fn"), t([1.25], "float8_e4m3fn")) is not None
    assert compare(t([1.0], "float8_e5m2"), t([1.25], "float8_e5m2")) is None
    assert compare(t([1.0], "float8_e5m2"), t([1.5], "float8_e5m2")) is not None


def test_shape_is_checked_before_values() -> None:
    mismatch = compare(_t([1.0, 2.0]), _t([[1.0, 2.0]]))
    assert mismatch is not None and mismatch.aspect == "shape"


def test_dtype_is_checked_before_values() -> None:
    mismatch = compare(_t([1.0], "float32"), _t([1.0], "float64"))
    assert mismatch is not None and mismatch.aspect == "dtype"


def test_within_tolerance_passes_and_beyond_fails_with_figures() -> None:
    assert compare(_t([1.0]), _t([1.0 + 1e-6])) is None
    mismatch = compare(_t([1.0, 2.0, 3.0, 4.0]), _t([1.0, 2.0, 3.5, 4.0]))
    assert mismatch is not None and mismatch.aspect == "value"
    assert "1 / 4 (25.0%)" in mismatch.message
    assert mismatch.max_abs == 0.5
    assert "index (2,)" in mismatch.message


def test_nan_equals_nan_and_infinities_must_match() -> None:
    assert compare(_t([np.nan, np.inf]), _t([np.nan, np.inf])) is None
    assert compare(_t([np.inf]), _t([-np.inf])) is not None
    assert compare(_t([1.0]), _t([np.nan])) is not None


def test_integers_and_bools_compare_exactly() -> None:
    assert tolerance("int64") == (0.0, 0.0)
    assert compare(_t([1, 2], "int64"), _t([1, 3], "int64")) is not None
    assert compare(_t([True], "bool"), _t([True], "bool")) is None
    zero_d = compare(_t(1, "int64"), _t(0, "int64"))
    assert zero_d is not None and "index ()" in zero_d.message


def test_explicit_tolerances_override_the_table() -> None:
    assert compare(_t([1.0]), _t([1.001])) is not None
    assert compare(_t([1.0]), _t([1.001]), rtol=1e-2, atol=0.0) is None


def test_errors_are_aligned_by_type_not_compared_by_text() -> None:
    ref_err = {"t": "error", "type": "RuntimeError", "message": "a", "missing_api": False}
    cand_err = {"t": "error", "type": "ValueError", "message": "b", "missing_api": False}
    assert compare(ref_err, {**ref_err, "message": "b"}) is None
    # a subclass of what the reference raised is what `except RuntimeError` catches
    sub = {**cand_err, "type": "LinAlgError", "bases": ["LinAlgError", "RuntimeError"]}
    assert compare(ref_err, sub) is None
    wrong = compare(ref_err, cand_err)
    assert wrong is not None and wrong.aspect == "candidate-error"
    assert "ValueError: b" in wrong.message and "RuntimeError: a" in wrong.message
    one = compare(ref_err, _t([1.0]))
    assert one is not None and one.aspect == "reference-error"
    other = compare(_t([1.0]), cand_err)
    assert other is not None and other.aspect == "candidate-error"
    missing = compare(_t([1.0]), {**cand_err, "missing_api": True})
    assert missing is not None and missing.aspect == "missing-api"


def test_plain_values_compare_by_equality_and_floats_by_closeness() -> None:
    assert compare({"t": "value", "value": [2, 3]}, {"t": "value", "value": [2, 3]}) is None
    assert compare({"t": "value", "value": [2, 3]}, {"t": "value", "value": [3, 2]}) is not None
    assert compare({"t": "value", "value": 1.0}, {"t": "value", "value": 1.0 + 1e-9}) is None


def test_complex_values_compare_both_parts() -> None:
    ref = _t([1 + 1j, 2 - 1j], "complex64")
    assert compare(ref, _t([1 + 1j, 2 - 1j + 1e-7j], "complex64")) is None
    wrong = compare(ref, _t([1 + 1j, 2 + 1j], "complex64"))
    assert wrong is not None and wrong.max_abs == 2.0
    scalar = {"t": "value", "value": {"complex": ["1.0", "2.0"]}}
    assert compare(scalar, {"t": "value", "value": {"complex": ["1.0", "2.0000001"]}}) is None
    assert compare(scalar, {"t": "value", "value": {"complex": ["1.0", "-2.0"]}}) is not None


def test_low_precision_uses_its_own_tolerance() -> None:
    ref = _t([1.0, 2.0], "float16")
    assert compare(ref, _t([1.0, 2.001], "float16")) is None  # within float16's 1e-3
    assert compare(_t([1.0, 2.0]), _t([1.0, 2.001])) is not None  # not within float32's
    assert compare(_t([1.0], "bfloat16"), _t([1.0078125], "bfloat16")) is None
