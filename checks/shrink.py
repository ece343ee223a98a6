"""Shrink a finding's drawn choices with Hypothesis while the same bug still fails."""

from __future__ import annotations

from random import Random
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from .dsl import DrawContext
from .engine import trace_program
from .findings import Finding
from .hypothesis_compat import (
    ConjectureData,
    ConjectureResult,
    ConjectureRunner,
    InterestingOrigin,
    RunIsComplete,
    Status,
    seed_only_draws,
    sort_key,
)
from .oracle import Oracle, ShrinkBudgetSpent
from .trace import SpecError

_ORIGIN = InterestingOrigin.from_exception(AssertionError("alignbot bug identity"))
_SETTINGS = settings(database=None, deadline=None, phases=[Phase.shrink],
                     suppress_health_check=list(HealthCheck), max_examples=10**6)


class Shrinker:
    """Replays the recorded choices as a Hypothesis test case, then lets Hypothesis' own
    shrinker minimise them. A candidate test case counts as failing only when it shows the
    *same* bug (same kind, op and signature: :meth:`Finding.same_bug`): a float mismatch may
    not slip into a crash, a shape error, another output or another error message of the same
    op. Every test case is one oracle call, so the budget bounds the whole pass.
    """

    def __init__(self, oracle: Oracle, finding: Finding) -> None:
        self.oracle, self.target = oracle, finding
        self.best = finding
        self._best_key: Any = None

    def _test(self, data: ConjectureData) -> None:
        try:
            program, ref = trace_program(self.oracle.spec, DrawContext(data=data))
        except SpecError:
            data.mark_invalid()
        try:
            found = self.oracle.traced(program, ref, self.target)
        except ShrinkBudgetSpent:
            raise RunIsComplete from None
        finding = next((f for f in found if self.target.same_bug(f)), None)
        if finding is None:
            return
        key = sort_key(data.nodes)
        if self._best_key is None or key < self._best_key:
            self.best, self._best_key = finding, key
        data.mark_interesting(_ORIGIN)

    def run(self) -> Finding:
        runner = ConjectureRunner(self._test, settings=_SETTINGS, random=Random(0))
        try:
            with seed_only_draws():
                first = runner.cached_test_function(self.target.program["choices"])
                if isinstance(first, ConjectureResult) and first.status == Status.INTERESTING:
                    runner.shrink(first, lambda d: d.status == Status.INTERESTING)
        except RunIsComplete:
            pass
        self.best.count, self.best.examples = self.target.count, list(self.target.examples)
        return self.best
