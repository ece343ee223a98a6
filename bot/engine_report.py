"""The engine's JSON report as a strict model: the sandbox's output is untrusted input.

The report's shape is defined once, by the engine, in ``checks/report_types.py``; these models
are the same keys and types with the limits untrusted input needs (lengths, counts, patterns),
and ``tests/test_engine_report.py`` fails on any key, optionality or type that differs. A few
keys the engine always writes are optional here: job results stored by earlier versions lack
them (``complete``, ``signature``, ``examples``, ``oracles``, ``exploration``, ``cause``,
``causes``, ``candidate_packages``)."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from alignbot.bot import nesting
from alignbot.checks.api import (
    PRECISIONS,
    REPORT_VERSION,
    CauseForm,
    Kind,
    Measure,
    Side,
    Trusted,
    Verdict,
    new_issue_url,
    visible,
)

MAX_FINDINGS = 1000
MAX_SPECS = 10_000
MAX_ORACLES = 32
MAX_COUNT = 10**9
MAX_SEED = 2**63 - 1
MAX_EXAMPLES = 5
MAX_ANCESTORS = 100  # calls of one drawn program
MAX_MISSED = 100  # never-drawn alternatives a spec names (checks/explore.py)
MAX_COVERED = 2_000  # (op, dtype) pairs one spec's draws called

Name = Annotated[str, StringConstraints(max_length=300)]  # a spec, op, observation or node
Line = Annotated[str, StringConstraints(max_length=10_000)]  # a reason, claim or title
Message = Annotated[str, StringConstraints(max_length=100_000)]
Script = Annotated[str, StringConstraints(max_length=1_000_000)]  # a repro, its output, a draft
Example = Annotated[str, StringConstraints(max_length=2_000)]  # one merged draw's message
# a choice point's alternative (checks/choice_points.py): nothing that could format Markdown
Label = Annotated[str, StringConstraints(max_length=120, pattern=r"^[A-Za-z0-9_.:#\[\] -]*$")]
Fingerprint = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")]
if TYPE_CHECKING:  # a name of PRECISIONS; mypy reads no Literal made at run time
    Precision = str
else:  # the engine's declarable dtypes (its dtype table), as the schema's literals
    Precision = Literal[PRECISIONS]
# what the candidate's worker says it imported (checks/runtime/worker.py): plain names only
MAX_PACKAGES = 16
PackageName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
PackageVersion = Annotated[str, StringConstraints(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
_TRACKER = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Evidence(_Strict):
    """Why triage gave its verdict (checks/triage.py, checks/minimize.py)."""

    oracles: dict[Name, Side] = Field(default_factory=dict, max_length=MAX_ORACLES)
    measured_against: Name | None = None
    decided_by: list[Name] | None = Field(default=None, max_length=MAX_ORACLES)
    claim: Line | None = None
    expected: Line | None = None
    reference_rmse_vs_float64: Measure | None = None
    candidate_rmse_vs_float64: Measure | None = None
    multiplier: Measure | None = None
    floor: Measure | None = None
    float64: Literal["reference", "candidate", "neither"] | None = None
    finite_differences_eps: Measure | None = None
    finite_differences_rtol: Measure | None = None
    finite_differences_atol: Measure | None = None
    reference_grad_error_vs_finite_differences: Measure | None = None
    candidate_grad_error_vs_finite_differences: Measure | None = None
    reference_float64_grad_error_vs_finite_differences: Measure | None = None
    float64_relative_difference: Measure | None = None
    reference_ulps_vs_numpy: Measure | None = None
    candidate_ulps_vs_numpy: Measure | None = None
    noise_ulps: Measure | None = None
    spec_declares_invalid_input: bool | None = None
    third_frameworks_raise: list[bool] | None = Field(default=None, max_length=MAX_ORACLES)
    no_draft: Line | None = None


class Shrink(_Strict):
    calls: Count
    seconds: Annotated[float, Field(ge=0)] | None  # None: the report was written without timings
    seconds_limit: Line | None = None  # the seconds, not the calls, ended the shrinking


class AncestorFinding(_Strict):
    """A finding of the same draw that this one's call took its inputs from."""

    kind: Kind
    op: Name
    node: Name


class KnownMark(_Strict):
    """The known-divergences entry a finding matched (checks/known.py), as the engine's
    ``--known`` wrote it; the App classifies findings against the file itself."""

    entry: Line
    reason: Line
    upstream: Line | None
    line: Count


class Rechecked(_Strict):
    """A baseline finding the head did not draw, its repro replayed on the head."""

    fingerprint: Fingerprint
    kind: Kind
    op: Name
    agrees: bool


Scalar = float | int | bool | Annotated[str, StringConstraints(max_length=100)]


class Numbers(_Strict):
    """The value that differs on both sides (checks/numbers.py)."""

    name: Name
    shape: list[Count] = Field(max_length=64)
    expected: list[Scalar] = Field(max_length=16)
    actual: list[Scalar] = Field(max_length=16)
    largest_difference: Scalar
    at: list[Count] = Field(max_length=64)
    expected_at: Scalar
    actual_at: Scalar


class EngineFinding(_Strict):
    """One finding as ``Finding.to_json`` writes it, with what minimizing adds (all optional:
    ``--no-minimize`` leaves them out)."""

    fingerprint: Fingerprint
    kind: Kind
    op: Name
    spec: Name
    message: Message
    count: Annotated[int, Field(ge=1, le=MAX_COUNT)]
    observation: Name
    node: Name
    program: dict[str, Any]
    signature: Line | None = None  # what failed, without values (checks/findings.py)
    examples: list[Example] | None = Field(default=None, max_length=MAX_EXAMPLES)
    cause: Line | None = None  # the failure it shares with other findings (checks/causes.py)
    max_abs: Measure | None = None
    max_rel: Measure | None = None
    repro: Script | None = None
    repro_verified: bool | None = None
    repro_output: Script | None = None
    repro_verify_note: Line | None = None  # why the repro did not verify
    repro_program: dict[str, Any] | None = None
    repro_reference_only: Script | None = None
    repro_reference_only_verified: bool | None = None
    verdict: Verdict | None = None
    verdict_reason: Line | None = None
    evidence: Evidence | None = None
    upstream_draft: Script | None = None
    upstream_title: Line | None = None
    upstream_url: Annotated[str, StringConstraints(max_length=10_000)] | None = None
    shrink: Shrink | None = None
    minimize_error: Line | None = None  # why minimizing this finding failed
    judged_alone: bool | None = None  # its call, fed the reference's inputs (checks/calls.py)
    downstream_of: list[AncestorFinding] | None = Field(default=None, max_length=MAX_ANCESTORS)
    known: KnownMark | None = None  # with --known: the entry that expects it
    baseline: Literal["new", "pre-existing"] | None = None  # with --baseline
    drawn_fingerprint: Fingerprint | None = None  # as drawn, when minimizing changed it
    numbers: Numbers | None = None  # the differing value on both sides


class CauseMember(_Strict):
    """A finding of a cause, as a line of its table."""

    fingerprint: Fingerprint
    kind: Kind
    op: Name
    dtype: Name
    count: Count


class Cause(_Strict):
    """Findings that share one candidate-side failure (checks/causes.py). The App groups the
    findings it validated itself (``alignbot.checks.causes.group``); this list is only checked."""

    id: Fingerprint
    form: CauseForm
    signature: Line
    summary: Line
    count: Count
    members: list[CauseMember] = Field(max_length=MAX_FINDINGS)


class SpecExploration(_Strict):
    """What one spec's draws exercised: choice-point alternatives seen, drawn, never drawn."""

    spec: Name
    seen: Count
    drawn: Count
    missed: list[Label] = Field(max_length=MAX_MISSED)
    # [op, dtype] of each call to one of the spec's ops (older reports lack it)
    covered: list[Annotated[list[Name], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list, max_length=MAX_COVERED)


class Capabilities(_Strict):
    """What the candidate declared it cannot do (checks/capabilities.py)."""

    gradients: bool
    precision: Precision | None
    declared_by: dict[Literal["gradients", "precision"], Literal["prelude", "command line"]]


class EngineReport(_Strict):
    """The whole report, as checks/report.py ``to_json`` writes it."""

    report_version: Annotated[int, Field(ge=1, le=REPORT_VERSION)]
    reference: Name
    candidate: Script
    candidate_packages: dict[PackageName, PackageVersion] | None = Field(
        default=None, max_length=MAX_PACKAGES)
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)]
    specs_run: Annotated[int, Field(ge=0, le=MAX_SPECS)]
    specs: list[Name] = Field(max_length=MAX_SPECS)
    programs_run: Count
    complete: bool = True  # False: the run was interrupted, findings so far
    findings: list[EngineFinding] = Field(max_length=MAX_FINDINGS)
    causes: list[Cause] | None = Field(default=None, max_length=MAX_FINDINGS)
    exploration: list[SpecExploration] | None = Field(default=None, max_length=MAX_SPECS)
    known_fixed: list[KnownMark] | None = Field(default=None, max_length=MAX_FINDINGS)
    rechecked: list[Rechecked] | None = Field(default=None, max_length=MAX_FINDINGS)
    capabilities: Capabilities | None = None  # absent: full PyTorch

    def dump(self) -> dict[str, Any]:
        """JSON data for the job's result (read again by ``latest_report``)."""
        return self.model_dump(mode="json")


def empty_report(seed: int = 0) -> EngineReport:
    """The report of a check that had no spec to run."""
    return EngineReport(report_version=REPORT_VERSION, reference="-", candidate="-", seed=seed,
                        specs_run=0, specs=[], programs_run=0, findings=[])


class InvalidReport(ValueError):
    """The report did not match the model; ``str()`` is the first problem, in one line."""


def parse_report(data: Any) -> EngineReport:
    """The report the sandbox read, validated; InvalidReport names the first problem. Its
    depth is measured first, without recursion: nothing walks it before that."""
    if (deep := nesting.problem(data, "the report")) is not None:
        raise InvalidReport(deep)
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidReport(f"not plain JSON ({type(exc).__name__})") from exc
    try:
        return EngineReport.model_validate_json(text)
    except ValidationError as exc:
        raise InvalidReport(first_problem(exc)) from exc


def first_problem(error: ValidationError) -> str:
    """``findings.0.kind: Input should be …``, without the offending value, names cut short."""
    problem = error.errors(include_url=False, include_input=False)[0]
    where = ".".join(visible(str(part))[:40] for part in problem["loc"]) or "the report"
    return " ".join(f"{where}: {problem['msg']}".split())[:300]


def valid_tracker(tracker: str) -> bool:
    return _TRACKER.fullmatch(tracker) is not None and ".." not in tracker


def new_issue_link(tracker: str, finding: EngineFinding) -> Trusted | None:
    """The prefilled new-issue link for ``finding``'s upstream draft, built from the bot's own
    configuration (the tracker) and the draft's title and body, URL-encoded and cut to fit;
    never the report's ``upstream_url``. None without a draft or a valid tracker."""
    if not finding.upstream_draft or not valid_tracker(tracker):
        return None
    title = " ".join(visible(finding.upstream_title or f"{finding.kind} at {finding.op}")
                     .split())[:200]
    return Trusted(new_issue_url(tracker, title, visible(finding.upstream_draft)))


def stored_findings(report: Any) -> list[dict[str, Any]] | None:
    """The findings of a report kept in a job's result, validated again (a job recorded
    before validation existed may hold anything), as JSON data; None if it is not valid."""
    try:
        return [f.model_dump(mode="json") for f in parse_report(report).findings]
    except InvalidReport:
        return None


def checked_finding(finding: dict[str, Any], tracker: str) -> dict[str, Any]:
    """``finding`` (JSON data) without the report's own ``upstream_url`` and with
    ``new_issue_link``, the prefilled link the bot builds itself (:func:`new_issue_link`)."""
    try:
        parsed: EngineFinding | None = None if nesting.too_deep(finding) else \
            EngineFinding.model_validate_json(json.dumps(finding, allow_nan=False))
    except (TypeError, ValueError, RecursionError):  # ValidationError is a ValueError
        parsed = None
    link = new_issue_link(tracker, parsed) if parsed is not None else None
    return {**finding, "upstream_url": None, "new_issue_link": link}
