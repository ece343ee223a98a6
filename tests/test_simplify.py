"""The simplifier (checks/simplify.py): plain values, fewer keywords, plain module state and
upstream gradients, each kept only while the same bug still fails, within the budget."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from alignbot.checks import CandidateConfig, CandidateProcess, random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.findings import Finding
from alignbot.checks.oracle import Oracle, ShrinkBudget
from alignbot.checks.program import InputNode, Program
from alignbot.checks.runtime.values import decode_array, make_array
from alignbot.checks.simplify import Simplifier
from alignbot.checks.spec import Spec

PRELUDE = '''import torch
F = torch.nn.functional
_softplus, _relu, _leaky, _linear = F.softplus, F.relu, F.leaky_relu, torch.nn.Linear.forward


def softplus(x, beta=1.0, threshold=20.0):  # off by 1% everywhere
    return _softplus(x, beta=beta, threshold=threshold) * 1.01


def relu(x, inplace=False):  # wrong on negative values only
    return torch.where(x < 0, x, _relu(x))


def leaky_relu(x, negative_slope=0.01, inplace=False):  # the keyword ignored
    return _leaky(x)


class _Sin(torch.autograd.Function):  # right forward, a backward off by half
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.detach().sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 0.5


F.softplus, F.relu, F.leaky_relu = softplus, relu, leaky_relu
torch.sin = _Sin.apply
torch.nn.Linear.forward = lambda self, x: _linear(self, x) * 1.01
'''


@pytest.fixture(scope="module")
def candidate() -> Iterator[CandidateProcess]:
    with CandidateProcess(CandidateConfig("simplify", PRELUDE)) as process:
        yield process


def simplified(candidate: CandidateProcess, fn: Any, calls: int = 100
               ) -> tuple[Program, Program, Finding, ShrinkBudget]:
    """The drawn program, the simplified one, its finding and the budget spent on it."""
    spec_program, _ = trace_program(_spec(fn), DrawContext(choices=[]))
    budget = ShrinkBudget(max_calls=calls, max_seconds=60)
    oracle = Oracle(_spec(fn), candidate, budget)
    (finding,) = oracle.program(spec_program)
    budget.calls = 0
    program, found = Simplifier(oracle, spec_program, finding).run()
    assert found.core == finding.core  # never another bug
    return spec_program, program, found, budget


def _spec(fn: Any) -> Spec:
    return Spec(name="t.simplify", fn=fn, backward=True)


def _input(program: Program) -> InputNode:
    node = program["nodes"][0]
    assert node["op"] == "input"
    return node


def test_an_input_becomes_zeros_when_zeros_still_fail(candidate: CandidateProcess) -> None:
    drawn, program, _, _ = simplified(candidate, lambda torch: torch.nn.functional.softplus(
        random_tensor(shape=[3], low=-1, high=1)))
    assert _input(drawn)["recipe"]["kind"] == "uniform"
    assert _input(program)["recipe"] == {"kind": "pattern", "pattern": "zeros"}


def test_an_input_takes_the_first_pattern_that_still_fails(candidate: CandidateProcess) -> None:
    # zeros, ones and arange have no negative value: relu is right on them
    _, program, _, _ = simplified(candidate, lambda torch: torch.nn.functional.relu(
        random_tensor(shape=[4], low=-1, high=1)))
    assert _input(program)["recipe"] == {"kind": "pattern", "pattern": "arange-centered"}


def test_rounded_values_when_no_pattern_fails(candidate: CandidateProcess) -> None:
    # one element of [-1, -0.5): no pattern of one element is negative, rounding keeps it so
    drawn, program, _, _ = simplified(candidate, lambda torch: torch.nn.functional.relu(
        random_tensor(shape=[1], low=-1, high=-0.5)))
    recipe = _input(program)["recipe"]
    assert recipe["kind"] == "literal"
    before = make_array(_input(drawn)["recipe"], "float32", [1])
    after = decode_array(recipe["array"])  # type: ignore[typeddict-item]
    assert after.tolist() == [-1.0] and before.tolist() != after.tolist()


def test_a_keyword_the_bug_needs_is_kept_and_one_it_does_not_is_dropped(
        candidate: CandidateProcess) -> None:
    _, needed, _, _ = simplified(candidate, lambda torch: torch.nn.functional.leaky_relu(
        random_tensor(shape=[3], low=-1, high=1), negative_slope=0.2))
    assert needed["nodes"][1]["kwargs"] == {"negative_slope": 0.2}  # type: ignore[typeddict-item]
    _, spare, found, _ = simplified(candidate, lambda torch: torch.nn.functional.softplus(
        random_tensor(shape=[3]), beta=1.0))
    assert spare["nodes"][1]["kwargs"] == {}  # type: ignore[typeddict-item]
    assert "beta" not in found.signature


def test_a_modules_state_becomes_ones(candidate: CandidateProcess) -> None:
    drawn, program, _, _ = simplified(candidate, lambda torch: torch.nn.Linear(2, 2)(
        random_tensor(shape=[1, 2])))
    module = next(n for n in program["nodes"] if n["op"] == "module")
    for name, data in module["state"].items():  # type: ignore[typeddict-item]
        assert np.array_equal(decode_array(data), np.ones_like(decode_array(data))), name
    assert drawn != program


def test_an_upstream_gradient_becomes_ones(candidate: CandidateProcess) -> None:
    drawn, program, _, _ = simplified(candidate, lambda torch: torch.sin(
        random_tensor(shape=[3])))
    plan, before = program["backward"], drawn["backward"]
    assert plan is not None and before is not None
    assert before["seeds"] != [{"kind": "pattern", "pattern": "ones"}]
    assert plan["seeds"] == [{"kind": "pattern", "pattern": "ones"}]


def test_a_spent_budget_returns_what_was_simplified_so_far(candidate: CandidateProcess) -> None:
    drawn, program, _, budget = simplified(candidate, lambda torch: torch.nn.functional.relu(
        random_tensor(shape=[4], low=-1, high=1)), calls=1)
    assert budget.calls == 1
    assert program == drawn  # its one call tried zeros, which does not fail
