"""The shrinker (checks/shrink.py): Hypothesis' shrinker on a finding's drawn choices, taking a
smaller draw only when it shows the same bug, within the oracle's budget."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateConfig, CandidateProcess, random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.oracle import Oracle, ShrinkBudget
from alignbot.checks.shrink import Shrinker
from alignbot.checks.spec import Spec

# cos raises on at most 2 elements (another bug) and is wrong from 5 elements on
PRELUDE = (Path(__file__).parent / "fixtures" / "shrink_prelude.py").read_text()


def cos_of_a_matrix(torch: Any) -> Any:
    return torch.cos(random_tensor(ndim=2, low=-2, high=2))


SPEC = Spec(name="t.shrink", fn=cos_of_a_matrix, backward=False)


@pytest.fixture(scope="module")
def candidate() -> Iterator[CandidateProcess]:
    with CandidateProcess(CandidateConfig("shrink", PRELUDE)) as process:
        yield process


def drawn(candidate: CandidateProcess, choices: list[int]) -> list[Finding]:
    """The findings of one draw: ``choices`` are the program's seed, the two sizes and the
    seed of the values."""
    program, ref = trace_program(SPEC, DrawContext(choices=choices))
    return Oracle(SPEC, candidate, ShrinkBudget()).traced(program, ref)


def elements(finding: Finding) -> int:
    return math.prod(finding.program["nodes"][0]["shape"])


def test_a_5_by_5_draw_shrinks_to_the_fewest_elements_that_show_the_same_bug(
        candidate: CandidateProcess) -> None:
    (target,) = drawn(candidate, [0, 5, 5, 123456])
    assert target.kind is Kind.VALUE and elements(target) == 25
    target.count, target.examples = 7, ["first", "second"]
    budget = ShrinkBudget(max_calls=300, max_seconds=60)
    best = Shrinker(Oracle(SPEC, candidate, budget), target).run()
    # 5 elements is the least that is wrong; 1 or 2 raise, which is another bug
    assert 5 <= elements(best) <= 6
    assert best.fingerprint == target.fingerprint and best.kind is Kind.VALUE
    assert best.program["choices"] < target.program["choices"]
    assert best.count == 7 and best.examples == ["first", "second"]  # the draws it stands for
    assert 1 < budget.calls < 300


def test_the_shrinker_stops_at_its_budget(candidate: CandidateProcess) -> None:
    (target,) = drawn(candidate, [0, 5, 5, 123456])
    budget = ShrinkBudget(max_calls=4, max_seconds=60)
    best = Shrinker(Oracle(SPEC, candidate, budget), target).run()
    assert budget.calls == 4
    assert best.fingerprint == target.fingerprint  # whatever it got to shows the bug


def test_choices_that_no_longer_show_the_bug_leave_the_finding_as_it_was(
        candidate: CandidateProcess) -> None:
    (target,) = drawn(candidate, [0, 5, 5, 123456])
    target.program = trace_program(SPEC, DrawContext(choices=[0, 1, 3, 5]))[0]  # 3: right
    budget = ShrinkBudget(max_calls=300, max_seconds=60)
    best = Shrinker(Oracle(SPEC, candidate, budget), target).run()
    assert best is target and budget.calls == 1
