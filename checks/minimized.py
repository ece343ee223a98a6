"""What minimization and triage add to a finding: :class:`Minimized`, and its report keys."""

from __future__ import annotations

from dataclasses import dataclass

from .findings import Finding
from .program import Program, as_json
from .report_types import Evidence, FindingEntry, FindingExtra, Numbers, Shrink
from .vocab import Verdict


@dataclass
class Minimized:
    """One finding, minimized and triaged (checks/minimize.py). ``program``, ``message`` and
    ``signature`` replace the finding's own; the rest are the report keys of
    :meth:`report_fields`."""

    program: Program  # the shrunk drawn program
    repro_program: Program  # the smallest program (sliced, simplified) that still fails
    message: str
    signature: str
    repro: str
    repro_verified: bool
    repro_output: str
    repro_verify_note: str | None
    repro_reference_only: str
    verdict: Verdict
    verdict_reason: str
    evidence: Evidence
    shrink: Shrink  # the budget spent: calls, seconds (None without timings)
    upstream_draft: str | None = None
    upstream_title: str | None = None
    upstream_url: str | None = None
    # only for a reference suspect: whether the PyTorch-alone script shows the problem
    repro_reference_only_verified: bool | None = None
    numbers: Numbers | None = None  # the differing value on both sides (checks/numbers.py)

    def report_fields(self) -> FindingExtra:
        """The keys a finding's JSON gains (besides the program, message and signature it
        takes over); ``repro_reference_only_verified`` only for a reference suspect."""
        fields: FindingExtra = {
            "repro_program": as_json(self.repro_program), "repro": self.repro,
            "repro_verified": self.repro_verified, "repro_output": self.repro_output,
            "repro_verify_note": self.repro_verify_note,
            "repro_reference_only": self.repro_reference_only,
            "verdict": self.verdict, "verdict_reason": self.verdict_reason,
            "evidence": self.evidence, "upstream_draft": self.upstream_draft,
            "upstream_title": self.upstream_title, "upstream_url": self.upstream_url,
            "shrink": self.shrink,
        }
        if self.verdict is Verdict.REFERENCE_SUSPECT:
            fields["repro_reference_only_verified"] = self.repro_reference_only_verified
        if self.numbers is not None:
            fields["numbers"] = self.numbers
        return fields

    def finding_json(self, finding: Finding) -> FindingEntry:
        """``finding``'s JSON as it will read once minimized (what an upstream draft is
        written from)."""
        return {**finding.to_json(), "program": as_json(self.program), "message": self.message,
                "signature": self.signature, **self.report_fields()}
