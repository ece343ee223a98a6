"""A finding's numbers (checks/numbers.py): both sides' values of what differs, the largest
difference and where, named as the repro names it."""

from __future__ import annotations

from typing import Any

import numpy as np

from alignbot.checks import random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.numbers import SHOWN, numbers
from alignbot.checks.program import Program
from alignbot.checks.spec import Spec


def linear_sort_double(torch: Any) -> Any:
    module = torch.nn.Linear(3, 2)
    first, _ = torch.sort(module(random_tensor(shape=[2, 3])), dim=1)
    return first * 2


PROGRAM, REF = trace_program(Spec(name="t.numbers", fn=linear_sort_double, backward=True),
                             DrawContext(choices=[]))
# v0 module_, v1 x, v2 tmp (the module's result), v3 tmp2 (the sort), v4 out


def finding(key: str, node: str = "", program: Program = PROGRAM) -> Finding:
    return Finding(Kind.VALUE, "torch.mul", "t.numbers", "m", program, key=key,
                   node=node or key.split(".")[0])


def tensor(data: Any, dtype: str = "float32") -> dict[str, Any]:
    arr = np.asarray(data)
    return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def test_the_largest_difference_is_found_with_both_values_and_where() -> None:
    expected = np.asarray(REF["v4"]["data"], dtype=np.float64)
    actual = expected.copy()
    actual[1, 0] += 0.25
    actual[0, 1] += 0.125
    found = numbers(PROGRAM, finding("v4"), REF, {**REF, "v4": tensor(actual)})
    assert found is not None
    assert found["name"] == "out" and found["shape"] == [2, 2] and found["at"] == [1, 0]
    assert found["largest_difference"] == 0.25
    assert found["expected_at"] == expected[1, 0] and found["actual_at"] == actual[1, 0]
    assert found["expected"] == expected.reshape(-1).tolist()
    assert found["actual"] == actual.reshape(-1).tolist()


def test_at_most_shown_elements_of_each_side() -> None:
    ref = {"v4": tensor(np.arange(10.0))}
    found = numbers(PROGRAM, finding("v4"), ref, {"v4": tensor(np.arange(10.0) + 1)})
    assert found is not None
    assert found["expected"] == list(range(SHOWN)) and len(found["actual"]) == SHOWN
    assert found["at"] == [0] and found["largest_difference"] == 1.0  # the first of ties


def test_a_nan_on_one_side_is_the_largest_difference_and_written_as_text() -> None:
    ref = {"v4": tensor([1.0, float("nan"), 3.0])}
    cand = {"v4": tensor([1.5, float("nan"), float("nan")])}
    found = numbers(PROGRAM, finding("v4"), ref, cand)
    assert found is not None
    # a nan on both sides is no difference; one on the candidate's side alone is
    assert found["at"] == [2] and found["largest_difference"] == "inf"
    assert found["expected_at"] == 3.0 and found["actual_at"] == "nan"
    assert found["expected"] == [1.0, "nan", 3.0]


def test_complex_values_are_written_as_text() -> None:
    ref = {"v4": tensor([1 + 2j], "complex64")}
    found = numbers(PROGRAM, finding("v4"), ref, {"v4": tensor([1 + 3j], "complex64")})
    assert found is not None
    assert found["expected"] == ["(1+2j)"] and found["actual"] == ["(1+3j)"]
    assert found["largest_difference"] == 1.0


def test_no_numbers_for_other_shapes_errors_or_text() -> None:
    assert numbers(PROGRAM, finding("v4"), REF, {**REF, "v4": tensor([1.0, 2.0])}) is None
    error = {"t": "error", "type": "RuntimeError", "message": "no"}
    assert numbers(PROGRAM, finding("v4"), REF, {**REF, "v4": error}) is None
    assert numbers(PROGRAM, finding("v4"), {"v4": tensor(["a"])}, {"v4": tensor(["b"])}) is None
    assert numbers(PROGRAM, finding("v4"), {"v4": tensor([True])},
                   {"v4": tensor([False])}) is not None  # booleans are numbers


def test_names_are_the_repros_own() -> None:
    def named(key: str) -> str:
        data = np.asarray(REF[key]["data"])
        found = numbers(PROGRAM, finding(key), REF, {**REF, key: tensor(data + 1)})
        assert found is not None, key
        return found["name"]

    assert named("v2") == "tmp"
    assert named("v3.1") == "tmp2[1]"  # an element of a tuple result
    assert named("grad:v1") == "grad x"
    assert named("grad:v0:weight") == "grad module_.weight"


def test_a_finding_of_the_backward_shows_the_first_gradient_that_differs() -> None:
    wrong = np.asarray(REF["grad:v1"]["data"]) * 2
    found = numbers(PROGRAM, finding("backward", "v2"), REF, {**REF, "grad:v1": tensor(wrong)})
    assert found is not None and found["name"] == "grad x"
