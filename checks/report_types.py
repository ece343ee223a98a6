"""The JSON report's shape as types: what ``alignbot.checks.report.to_json`` writes, key by key.

TypedDicts (the report is JSON), so the engine needs nothing beyond ``typing`` and mypy checks
every place that writes a key. The App reads the same report back from the sandbox with the
strict pydantic models of ``bot/engine_report.py``, which add the limits that untrusted input
needs; ``tests/test_engine_report.py`` walks both and fails on any key, optionality or type
that differs, so a key is added on both sides or on neither.

A key is ``NotRequired`` when some reports lack it: what judging adds only to some findings
(``max_abs``, ``judged_alone``, ``downstream_of``), and everything minimizing adds (left out
with ``--no-minimize``; only ``minimize_error`` when minimizing the finding failed).

No ``from __future__ import annotations`` here: Python 3.11 sees ``NotRequired`` only in an
evaluated annotation, and ``__required_keys__`` must be right for the App's test to read.
"""

from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

from .runtime.dtypes import DECLARABLE
from .vocab import Kind, Verdict

# A float, or its repr() where JSON has none (``_finite`` in checks/report.py).
Measure: TypeAlias = float | Literal["inf", "-inf", "nan"]
# Whom an oracle's result agrees with (checks/triage.py).
Side: TypeAlias = Literal["reference", "candidate", "both", "neither", "no result"]


class Evidence(TypedDict):
    """Why triage gave its verdict (checks/triage.py); ``claim``, ``expected`` and
    ``no_draft`` come from minimizing (checks/minimize.py). ``oracles``: whom each oracle
    sides with; ``measured_against``: the oracle the numbers below were measured against;
    ``decided_by``: the oracles the verdict rests on."""
    oracles: dict[str, Side]
    measured_against: NotRequired[str]
    decided_by: NotRequired[list[str]]
    claim: NotRequired[str]
    expected: NotRequired[str]
    reference_rmse_vs_float64: NotRequired[Measure]
    candidate_rmse_vs_float64: NotRequired[Measure]
    multiplier: NotRequired[Measure]
    floor: NotRequired[Measure]
    float64: NotRequired[Literal["reference", "candidate", "neither"]]
    finite_differences_eps: NotRequired[Measure]
    finite_differences_rtol: NotRequired[Measure]
    finite_differences_atol: NotRequired[Measure]
    reference_grad_error_vs_finite_differences: NotRequired[Measure]
    candidate_grad_error_vs_finite_differences: NotRequired[Measure]
    reference_float64_grad_error_vs_finite_differences: NotRequired[Measure]
    float64_relative_difference: NotRequired[Measure]
    reference_ulps_vs_numpy: NotRequired[Measure]
    candidate_ulps_vs_numpy: NotRequired[Measure]
    noise_ulps: NotRequired[Measure]
    spec_declares_invalid_input: NotRequired[bool]
    third_frameworks_raise: NotRequired[list[bool]]
    no_draft: NotRequired[str]


class Shrink(TypedDict):
    """The budget minimizing spent: oracle calls, and seconds (None without timings), and
    ``seconds_limit`` only when the seconds, a safety net, ended it before the calls."""
    calls: int
    seconds: float | None
    seconds_limit: NotRequired[str]


class AncestorFinding(TypedDict):
    """A finding of the same draw that this one's call took its inputs from."""
    kind: Kind
    op: str
    node: str


class KnownMark(TypedDict):
    """The entry of the known-divergences file that a finding matched (checks/known.py)."""
    entry: str  # what the entry matches: a fingerprint, or its patterns
    reason: str
    upstream: str | None
    line: int  # where the entry starts in its file


class Rechecked(TypedDict):
    """A baseline's finding that this run did not draw, its repro replayed here
    (``check --baseline``): ``agrees`` when the bug is gone (fixed), not merely undrawn."""
    fingerprint: str
    kind: Kind
    op: str
    agrees: bool


# One element of a tensor: a number, or its repr() where JSON has none (inf, nan, complex).
Scalar: TypeAlias = float | int | bool | str


class Numbers(TypedDict):
    """The value that differs, on both sides (checks/numbers.py): ``name`` as the repro
    returns it (``out``, ``grad x``), its first elements flattened, and the largest
    difference with where it is (``at``: the index) and both values there."""
    name: str
    shape: list[int]
    expected: list[Scalar]  # PyTorch's
    actual: list[Scalar]  # the candidate's
    largest_difference: Scalar
    at: list[int]
    expected_at: Scalar
    actual_at: Scalar


class FindingExtra(TypedDict, total=False):
    """What a finding carries beyond its identity (``Finding.extra``), each key only in some
    reports: what judging found, then what minimizing added (``Minimized.report_fields``:
    all of it but ``repro_reference_only_verified``, which is only for a reference
    suspect)."""
    max_abs: Measure
    max_rel: Measure
    judged_alone: bool  # its call, fed the reference's inputs (checks/calls.py)
    downstream_of: list[AncestorFinding]
    minimize_error: str | None  # why minimizing this finding failed; None once it worked
    repro_program: dict[str, Any]
    repro: str
    repro_verified: bool
    repro_output: str
    repro_verify_note: str | None  # why the repro did not verify
    repro_reference_only: str
    repro_reference_only_verified: bool | None
    verdict: Verdict
    verdict_reason: str
    evidence: Evidence
    upstream_draft: str | None
    upstream_title: str | None
    upstream_url: str | None
    shrink: Shrink
    known: KnownMark  # with ``--known FILE``: the entry that says this divergence is expected
    # with ``--baseline REPORT``: whether the baseline showed it (then it is not minimized)
    baseline: Literal["new", "pre-existing"]
    drawn_fingerprint: str  # the fingerprint as drawn, when minimizing changed it
    numbers: Numbers  # minimizing: the differing value on both sides, when both are tensors


class FindingEntry(FindingExtra):
    """One finding in the report (``alignbot.checks.findings.Finding.to_json``)."""
    fingerprint: str
    kind: Kind
    op: str
    spec: str
    message: str
    count: int
    observation: str
    node: str
    program: dict[str, Any]
    signature: str  # what failed, without values (checks/findings.py)
    examples: list[str]  # distinct messages of merged draws
    cause: str  # the candidate-side failure it shares with others, "" if none (causes.py)


class SpecExploration(TypedDict):
    """What one spec's draws exercised (``alignbot.checks.explore.Exploration``): alternatives of
    its
    choice points seen and drawn, and the first ``MAX_MISSED`` never drawn, by label
    (``reductions.py:42 oneof[2]``), and ``[op, dtype]`` of every call to one of its ops
    (``alignbot.checks.engine.coverage``: what agrees when no finding names it)."""
    spec: str
    seen: int
    drawn: int
    missed: list[str]
    covered: list[list[str]]


# How the members of a cause fail alike (checks/causes.py); ``finding``: a finding alone.
CauseForm: TypeAlias = Literal["raised", "region", "precision", "dtype", "detached", "finding"]


class CauseMember(TypedDict):
    """A finding of a cause, as a line of its table."""
    fingerprint: str
    kind: Kind
    op: str
    dtype: str  # what the call was fed (or the dtype of what differed), comma-separated
    count: int  # draws


class Cause(TypedDict):
    """Findings whose candidate-side failure is one (``alignbot.checks.causes.group``): one missing
    kernel, one precision loss; a finding that shares its failure with none is a cause of
    its own (``form`` ``finding``, its ``id`` the finding's fingerprint)."""
    id: str  # stable across runs: a digest of the signature
    form: CauseForm
    signature: str  # the failure they share ("" for a finding alone)
    summary: str  # the failure in words
    count: int  # draws, over every member
    members: list[CauseMember]


if TYPE_CHECKING:  # a name of DECLARABLE; mypy reads no Literal made at run time
    Precision: TypeAlias = str
else:  # the declarable rows of the dtype table, as literals the App's model holds too
    Precision: TypeAlias = Literal[DECLARABLE]


class CapabilitiesEntry(TypedDict):
    """What the candidate can do (checks/capabilities.py): whether gradients were compared,
    the precision whose tolerances were allowed, and who declared each."""
    gradients: bool
    precision: Precision | None
    declared_by: dict[Literal["gradients", "precision"], Literal["prelude", "command line"]]


class Report(TypedDict):
    """The whole report (``alignbot.checks.report.to_json``)."""
    report_version: int
    reference: str
    candidate: str
    # the top-level packages the candidate's prelude imported, with their versions, read in
    # its worker (checks/runtime/worker.py)
    candidate_packages: dict[str, str]
    seed: int
    specs_run: int
    specs: list[str]
    programs_run: int
    complete: bool  # False: the run was interrupted, findings so far
    findings: list[FindingEntry]
    causes: list[Cause]  # the findings grouped by root cause, most members first
    exploration: list[SpecExploration]  # the specs run to the end, in order
    # with ``--known FILE``: entries whose spec ran and matched nothing (remove them)
    known_fixed: NotRequired[list[KnownMark]]
    # with ``--baseline REPORT``: its findings this run did not draw, replayed here
    rechecked: NotRequired[list[Rechecked]]
    capabilities: NotRequired[CapabilitiesEntry]  # absent: full PyTorch, nothing declared
