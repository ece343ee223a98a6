"""The oracle (checks/oracle.py): a bounded budget of calls and seconds, "does this program still
show the bug?" asked of a real candidate, and triage's independent oracles: finite differences
in float64 and NumPy's values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from alignbot.checks import CandidateConfig, CandidateProcess, random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.findings import Kind
from alignbot.checks.oracle import (
    NUMPY_OPS,
    Oracle,
    ShrinkBudget,
    ShrinkBudgetSpent,
    finite_differences,
    numpy_observations,
    stats,
)
from alignbot.checks.program import Observations, Program, reference_observations
from alignbot.checks.spec import Spec

SOFTPLUS_OFF = """import torch
_softplus = torch.nn.functional.softplus
torch.nn.functional.softplus = lambda x, *a, **k: _softplus(x, *a, **k) * 1.01
"""


def traced(fn: Any, name: str = "t.oracle") -> tuple[Spec, Program, Observations]:
    spec = Spec(name=name, fn=fn, backward=True)
    program, ref = trace_program(spec, DrawContext(choices=[]))
    return spec, program, ref


def softplus_spec(torch: Any) -> Any:
    return torch.nn.functional.softplus(random_tensor(shape=[3], dtype="float32"))


def test_a_budget_counts_its_calls_and_refuses_the_one_past_them() -> None:
    budget = ShrinkBudget(max_calls=2, max_seconds=60)
    budget.spend()
    budget.spend()
    assert budget.calls == 2
    with pytest.raises(ShrinkBudgetSpent):
        budget.spend()
    assert budget.calls == 2  # a refused call is not counted


def test_a_budget_refuses_once_its_seconds_are_spent() -> None:
    budget = ShrinkBudget(max_calls=100, max_seconds=0.0)
    with pytest.raises(ShrinkBudgetSpent):
        budget.spend()
    assert budget.calls == 0


def test_stats_report_calls_and_seconds_rounded() -> None:
    budget = ShrinkBudget(started=0.0)
    budget.calls = 4
    report = stats(budget)
    assert report["calls"] == 4
    assert report["seconds"] is not None and report["seconds"] == round(report["seconds"], 3)
    assert report["seconds"] > 0


@pytest.fixture(scope="module")
def softplus_candidate() -> Iterator[CandidateProcess]:
    with CandidateProcess(CandidateConfig("softplus-off", SOFTPLUS_OFF)) as candidate:
        yield candidate


def test_the_oracle_finds_the_bug_again_and_counts_each_question(
        softplus_candidate: CandidateProcess) -> None:
    spec, program, ref = traced(softplus_spec)
    budget = ShrinkBudget(max_calls=3, max_seconds=60)
    oracle = Oracle(spec, softplus_candidate, budget)
    found = oracle.traced(program, ref)
    assert [(f.kind, f.op) for f in found] == [(Kind.VALUE, "torch.nn.functional.softplus")]
    again = oracle.same(program, found[0])
    assert again is not None and again.core == found[0].core
    assert budget.calls == 2


def test_a_program_without_the_bug_is_not_the_same(softplus_candidate: CandidateProcess) -> None:
    spec, program, ref = traced(softplus_spec)
    oracle = Oracle(spec, softplus_candidate, ShrinkBudget(max_calls=10, max_seconds=60))
    target = oracle.traced(program, ref)[0]
    _, other, _ = traced(lambda torch: torch.exp(random_tensor(shape=[3], dtype="float32")))
    assert oracle.program(other) == []
    assert oracle.same(other, target) is None


def test_a_spent_budget_stops_the_oracle_before_the_candidate_runs(
        softplus_candidate: CandidateProcess) -> None:
    spec, program, _ = traced(softplus_spec)
    oracle = Oracle(spec, softplus_candidate, ShrinkBudget(max_calls=0, max_seconds=60))
    with pytest.raises(ShrinkBudgetSpent):
        oracle.program(program)


def test_finite_differences_give_the_analytic_gradient_in_float64() -> None:
    _, program, ref = traced(lambda torch: torch.sin(random_tensor(shape=[4], dtype="float64")))
    numeric = finite_differences(program)
    assert set(numeric) == {"grad:v0"}
    x = np.asarray(ref["v0"]["data"])
    seed = np.asarray(ref["grad:v1"]["data"])  # the upstream gradient of the output
    np.testing.assert_allclose(numeric["grad:v0"]["data"], np.cos(x) * seed, rtol=1e-7)


def test_finite_differences_reach_a_modules_parameters() -> None:
    _, program, ref = traced(lambda torch: torch.nn.Linear(2, 1, dtype=torch.float64)(
        random_tensor(shape=[3, 2], dtype="float64")))
    numeric = finite_differences(program)
    assert {"grad:v0:weight", "grad:v0:bias"} <= set(numeric)
    for key in ("grad:v0:weight", "grad:v0:bias"):
        np.testing.assert_allclose(numeric[key]["data"], ref[key]["data"], rtol=1e-6)


def test_finite_differences_leave_out_what_is_not_float64() -> None:
    _, single, _ = traced(lambda torch: torch.sin(random_tensor(shape=[4], dtype="float32")))
    assert finite_differences(single) == {}
    _, no_backward, _ = traced(lambda torch: torch.sin(random_tensor(shape=[4], dtype="float64")))
    no_backward["backward"] = None
    assert finite_differences(no_backward) == {}


def test_numpy_recomputes_the_calls_it_implements_from_the_float64_inputs() -> None:
    def spec(torch: Any) -> Any:
        x = random_tensor(shape=[2, 3], dtype="float64")
        return torch.exp(x).sum(dim=1, keepdim=True)

    _, program, ref = traced(spec)
    wide = reference_observations(program)
    values = numpy_observations(program, wide)
    assert set(values) == {"v1", "v2"}
    x = np.asarray(ref["v0"]["data"])
    np.testing.assert_allclose(values["v1"]["data"], np.exp(x), rtol=1e-12)
    np.testing.assert_allclose(values["v2"]["data"], np.exp(x).sum(axis=1, keepdims=True),
                               rtol=1e-12)
    assert values["v2"]["shape"] == [2, 1] and values["v2"]["dtype"] == "float64"


def test_numpy_leaves_out_other_ops_and_inputs_that_are_not_float64() -> None:
    def spec(torch: Any) -> Any:
        x = random_tensor(shape=[3], dtype="float32")
        return torch.erf(torch.exp(x))

    _, program, _ = traced(spec)
    assert "erf" not in NUMPY_OPS
    assert numpy_observations(program, reference_observations(program)) == {}


def test_numpy_softplus_follows_torchs_threshold() -> None:
    x = np.array([-30.0, 0.0, 1.0, 25.0])
    np.testing.assert_allclose(NUMPY_OPS["softplus"](x), np.where(x > 20, x, np.log1p(np.exp(x))))
    np.testing.assert_allclose(NUMPY_OPS["softplus"](x, beta=2.0, threshold=1.0)[2], 1.0)
