"""What minimizing adds to a finding (checks/minimized.py): the report keys, the reference-only
verification for a reference suspect alone, the numbers when there are any."""

from __future__ import annotations

from typing import Any

from alignbot.checks.findings import Finding, Kind
from alignbot.checks.minimized import Minimized
from alignbot.checks.program import Program
from alignbot.checks.report_types import Numbers
from alignbot.checks.vocab import Verdict

DRAWN: Program = {"version": 1, "spec": "t.min", "seed": 0, "choices": [3, 4], "nodes": [],
                  "backward": None, "expect_raise": False}
SHRUNK: Program = {**DRAWN, "choices": [0, 1]}
REPRO: Program = {**DRAWN, "choices": [], "sliced_from": "v2"}
ALWAYS = {"repro_program", "repro", "repro_verified", "repro_output", "repro_verify_note",
          "repro_reference_only", "verdict", "verdict_reason", "evidence", "upstream_draft",
          "upstream_title", "upstream_url", "shrink"}


def minimized(verdict: Verdict = Verdict.CANDIDATE_BUG, **changed: Any) -> Minimized:
    fields: dict[str, Any] = {
        "program": SHRUNK, "repro_program": REPRO, "message": "shrunk message",
        "signature": "self float32 kw=[]", "repro": "print('repro')", "repro_verified": True,
        "repro_output": "MISMATCH", "repro_verify_note": None,
        "repro_reference_only": "print('torch alone')", "verdict": verdict,
        "verdict_reason": "why", "evidence": {"claim": "c"},
        "shrink": {"calls": 5, "seconds": None}}
    return Minimized(**{**fields, **changed})


def test_the_report_keys_of_a_candidate_bug() -> None:
    fields = minimized().report_fields()
    assert set(fields) == ALWAYS
    assert fields["repro_program"] == REPRO and fields["shrink"] == {"calls": 5, "seconds": None}
    assert fields["verdict"] == "candidate-bug" and fields["upstream_draft"] is None


def test_only_a_reference_suspect_says_whether_pytorch_alone_shows_it() -> None:
    fields = minimized(Verdict.REFERENCE_SUSPECT, repro_reference_only_verified=True,
                       upstream_draft="draft", upstream_title="title").report_fields()
    assert set(fields) == ALWAYS | {"repro_reference_only_verified"}
    assert fields["repro_reference_only_verified"] is True
    assert (fields["upstream_draft"], fields["upstream_title"]) == ("draft", "title")
    other = minimized(Verdict.TOLERANCE_NOISE, repro_reference_only_verified=True)
    assert "repro_reference_only_verified" not in other.report_fields()


def test_numbers_are_a_key_only_when_there_are_some() -> None:
    numbers: Numbers = {"name": "out", "shape": [1], "expected": [1.0], "actual": [2.0],
                        "largest_difference": 1.0, "at": [0], "expected_at": 1.0,
                        "actual_at": 2.0}
    assert minimized(numbers=numbers).report_fields()["numbers"] == numbers
    assert "numbers" not in minimized().report_fields()


def test_the_findings_json_once_minimized_takes_over_program_message_and_signature() -> None:
    finding = Finding(Kind.VALUE, "torch.exp", "t.min", "drawn message", DRAWN, key="v2",
                      node="v2", count=4, signature="self float32 kw=[alpha]")
    entry = minimized().finding_json(finding)
    assert entry["program"] == SHRUNK and entry["message"] == "shrunk message"
    assert entry["signature"] == "self float32 kw=[]"
    assert entry["count"] == 4 and entry["op"] == "torch.exp"
    assert set(entry) >= ALWAYS
    assert finding.program is DRAWN and finding.message == "drawn message"  # left as it was
