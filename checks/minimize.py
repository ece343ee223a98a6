"""Per finding: shrink → slice → simplify → repro (verified) → triage → upstream draft."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import repro as repros
from .candidate import CandidateConfig, CandidateProcess
from .findings import MISMATCH_KINDS, Finding, Kind
from .isolate import slice_program
from .minimized import Minimized
from .numbers import numbers
from .oracle import (
    SHRINK_CALLS,
    SHRINK_SECONDS,
    Oracle,
    ShrinkBudget,
    ShrinkBudgetSpent,
    reference_observations,
    stats,
)
from .program import Program
from .report_types import Evidence
from .runtime.dtypes import DEFAULT, FLOAT_DTYPES, PART_DTYPES
from .shrink import Shrinker
from .simplify import Simplifier
from .spec import Spec
from .triage import Triage, Verdict, oracle_observations, triage
from .upstream import DEFAULT_TRACKER, Alone, draft, reference_alone


@dataclass
class MinimizeOptions:
    max_calls: int = SHRINK_CALLS
    max_seconds: float = SHRINK_SECONDS
    tracker: str = DEFAULT_TRACKER
    thirds: list[CandidateProcess] = field(default_factory=list)
    versions: str | None = None  # collect_env output; None runs it when a draft needs it
    # on_call(calls): after each oracle call, for progress
    on_call: Callable[[int], None] | None = None


@dataclass
class _CountingBudget(ShrinkBudget):
    """A budget that reports each call it allows."""

    on_call: Callable[[int], None] | None = None

    def spend(self) -> None:
        super().spend()
        if self.on_call is not None:
            self.on_call(self.calls)


def reduce(finding: Finding, spec: Spec, candidate: CandidateProcess, budget: ShrinkBudget
           ) -> tuple[Program, Finding, Program]:
    """The shrunk drawn program, and the smallest program (sliced, simplified) that still
    shows the same bug (:meth:`Finding.same_bug`: kind, op and signature)."""
    oracle = Oracle(spec, candidate, budget)
    best = Shrinker(oracle, finding).run()
    program, current = best.program, best
    try:
        for keep_grad in (True, False):
            sliced = slice_program(program, current, keep_grad)
            found = oracle.program(sliced, finding) if sliced else []
            same = next((f for f in found if finding.same_bug(f)), None)
            if sliced is not None and same is not None:
                program, current = sliced, same
                break
    except ShrinkBudgetSpent:
        pass
    program, current = Simplifier(oracle, program, current).run()
    return best.program, current, program


def _mode(kind: Kind) -> tuple[str, str, str]:
    """How the PyTorch-alone script shows the problem: (mode, claim, expected)."""
    if kind is Kind.REFERENCE_ERROR:
        return ("raises", "raises on an input that another implementation accepts",
                "no error, as the other implementation gives")
    if kind is Kind.CANDIDATE_ERROR:
        return ("accepts", "accepts an input that another implementation rejects",
                "an error for this input")
    if kind in (Kind.VALUE, Kind.GRAD, Kind.STATE):
        return ("numeric", "the result disagrees with the same computation in float64",
                "the float64 result (within the dtype's tolerance), which the other "
                "implementation matches")
    return ("runs", f"{kind.value} against another implementation", "see the comparison")


def minimize(finding: Finding, spec: Spec, candidate: CandidateProcess,
             config: CandidateConfig, options: MinimizeOptions) -> Minimized:
    """Everything minimization and triage add to a finding in the report."""
    budget = _CountingBudget(options.max_calls, options.max_seconds, on_call=options.on_call)
    shrunk, current, program = reduce(finding, spec, candidate, budget)
    shrink = stats(budget)
    rtol, atol = repros.tolerances(program, current, spec.rtol, spec.atol)
    checked = repros.make(program, current, config, rtol, atol,
                          timeout=config.start_timeout + max(config.timeout * 2, 60.0))
    ref = reference_observations(program)
    outcome = candidate.run(program)
    cand = outcome.observations or {}
    if outcome.observations is None:
        verdict = Triage(Verdict.CANDIDATE_BUG, "the candidate " + (
            "hung" if outcome.died == "timeout" else "crashed"), {"oracles": {}})
    else:
        oracles = oracle_observations(program, candidate, options.thirds)
        verdict = triage(program, current, ref, cand, oracles, spec.rtol, spec.atol)
    mode, claim, expected = _mode(current.kind)
    obs = ref.get(current.key) or {}
    dtype = str(obs.get("dtype", DEFAULT))
    dtype = dtype if dtype in FLOAT_DTYPES else PART_DTYPES.get(dtype, DEFAULT)
    reference_only, alone_code, alone_output = repros.reference_only(
        program, current, mode, claim, rtol, atol, dtype=dtype,
        declared_invalid=bool(program.get("expect_raise")))
    if verdict.verdict is Verdict.REFERENCE_SUSPECT:
        # what the verdict rests on (the documented formula, finite differences) is what
        # the PyTorch-alone script shows
        alone = reference_alone(program, current, verdict.evidence, Alone(
            reference_only, alone_code, alone_output, claim, expected), rtol, atol)
        reference_only, alone_code, alone_output = alone.script, alone.code, alone.output
        claim, expected = alone.claim, alone.expected
    evidence: Evidence = {**verdict.evidence, "claim": claim, "expected": expected}
    result = Minimized(
        program=shrunk, repro_program=program, message=current.message,
        signature=current.signature, repro=checked.script, repro_verified=checked.verified,
        repro_output=checked.output, repro_verify_note=checked.note or None,
        repro_reference_only=reference_only, verdict=verdict.verdict,
        verdict_reason=verdict.reason, evidence=evidence, shrink=shrink,
        numbers=numbers(program, current, ref, cand) if outcome.observations else None)
    if verdict.verdict is Verdict.REFERENCE_SUSPECT:
        # A draft goes upstream only when PyTorch alone shows the problem in a fresh
        # interpreter: an unverified report would waste the maintainers' time.
        code, output = alone_code, alone_output
        result.repro_reference_only_verified = code == 1
        if code == 1:
            issue = draft(result.finding_json(current), reference_only,
                          output, config.name, options.tracker, options.versions)
            result.upstream_draft, result.upstream_title = issue.body, issue.title
            result.upstream_url = issue.url
        else:
            result.evidence["no_draft"] = ("the PyTorch-alone repro does not show the "
                                           "problem on its own")
    return result


def minimize_error(exc: BaseException) -> str:
    """One line naming what went wrong: ``KeyError: 'v0'``."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:500]}" if text else type(exc).__name__


def minimize_all(findings: list[Finding], specs: list[Spec], candidate: CandidateProcess,
                 config: CandidateConfig, options: MinimizeOptions,
                 timings: bool = True,
                 on_finding: Callable[[int, Finding], None] | None = None) -> None:
    """Minimise and triage every finding in place (its JSON gains the fields above, and
    ``minimize_error``: None, or why this finding stayed as drawn while the others went on).
    ``on_finding(index, finding)`` runs before each one."""
    by_name = {spec.name: spec for spec in specs}
    try:
        for index, finding in enumerate(findings):
            if on_finding is not None:
                on_finding(index, finding)
            _minimize_one(finding, by_name[finding.spec], candidate, config, options, timings)
    finally:  # also when interrupted: the report holds one entry per bug
        merge_same_bugs(findings)


def _minimize_one(finding: Finding, spec: Spec, candidate: CandidateProcess,
                  config: CandidateConfig, options: MinimizeOptions, timings: bool) -> None:
    try:
        result = minimize(finding, spec, candidate, config, options)
    except Exception as exc:  # one finding's failure must not lose the whole report
        if candidate.pending:
            candidate.kill()
        finding.extra["minimize_error"] = minimize_error(exc)
        return
    drawn = finding.fingerprint
    finding.program, finding.message = result.program, result.message
    if finding.kind in MISMATCH_KINDS:  # the keywords the minimized call still needs
        finding.signature = result.signature
    if finding.fingerprint != drawn:  # a baseline matches the next run's draws by it
        finding.extra["drawn_fingerprint"] = drawn
    if not timings:
        result.shrink["seconds"] = None
    finding.extra.update(result.report_fields())
    finding.extra["minimize_error"] = None


def merge_same_bugs(findings: list[Finding]) -> None:
    """Findings that minimized to the same bug (a draw that passed two keywords, of which
    the bug needs one) become one, in place; the first keeps its repro."""
    kept: dict[str, Finding] = {}
    for finding in findings:
        twin = kept.get(finding.fingerprint)
        if twin is None:
            kept[finding.fingerprint] = finding
        elif finding.extra.get("repro_verified") and not twin.extra.get("repro_verified"):
            finding.merge(twin)  # the one with a verified repro stays, in the first's place
            kept[finding.fingerprint] = finding
        else:
            twin.merge(finding)
    findings[:] = list(kept.values())
