"""An oracle answers "does this program still show the finding?" within a bounded budget.

Shrinking, slicing and simplifying all ask the same question many times; the oracle counts
the calls and the seconds, so every pass stays bounded and reports what it cost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .candidate import CandidateProcess
from .engine import Observations, Program, evaluate
from .findings import Finding, judge
from .runtime.replay import Hooks, replay
from .runtime.replay import seed as seed_reference
from .spec import Spec


class BudgetSpent(Exception):
    """The oracle has used its calls or seconds."""


@dataclass
class Budget:
    max_calls: int = 300
    max_seconds: float = 20.0
    calls: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def spend(self) -> None:
        if self.calls >= self.max_calls or self.seconds >= self.max_seconds:
            raise BudgetSpent
        self.calls += 1


def reference_observations(program: Program) -> Observations:
    """The reference's observations of a Program that is data only (no spec to trace)."""
    import torch

    seed_reference(torch, int(program.get("seed", 0)))
    return replay(torch, program, Hooks())


class Oracle:
    def __init__(self, spec: Spec, candidate: CandidateProcess, budget: Budget) -> None:
        self.spec, self.candidate, self.budget = spec, candidate, budget

    def traced(self, program: Program, ref: Observations) -> Finding | None:
        """A program traced from the spec, with the reference's observations at hand."""
        self.budget.spend()
        return evaluate(self.spec, program, ref, self.candidate)

    def program(self, program: Program) -> Finding | None:
        """A program built by hand (sliced, simplified): the reference replays it too."""
        self.budget.spend()
        ref = reference_observations(program)
        outcome = self.candidate.run(program)
        if outcome.observations is None:
            from .engine import outcome_finding

            return outcome_finding(self.spec, program, outcome)
        return judge(program, ref, outcome.observations, self.spec.name,
                     self.spec.rtol, self.spec.atol)

    def same(self, program: Program, fingerprint: str) -> Finding | None:
        """The finding if ``program`` still shows one with ``fingerprint``, else None."""
        finding = self.program(program)
        return finding if finding is not None and finding.fingerprint == fingerprint else None


def stats(budget: Budget) -> dict[str, Any]:
    return {"calls": budget.calls, "seconds": round(budget.seconds, 3)}
