"""A check against a baseline: the report of the same check (specs, seed, draws) on the base
of a change. A finding the baseline showed is pre-existing; a baseline finding this run did
not draw is fixed only when its repro, replayed on this candidate, now agrees (a draw that
missed it is no fix)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .candidate import CandidateConfig, CandidateProcess
from .engine import CheckResult, evaluate
from .findings import Finding
from .program import Program, reference_observations
from .report_types import FindingEntry, Rechecked
from .spec import Spec

MAX_BASELINE_BYTES = 64 * 1024 * 1024


class BaselineError(ValueError):
    """The baseline report cannot be read."""


def fingerprints(entry: FindingEntry | dict[str, Any]) -> set[str]:
    """The fingerprints a report's finding goes by: its own and, when minimizing changed it,
    the one it was drawn with (what the next run's draws give)."""
    return {str(entry["fingerprint"]), *(
        [str(entry["drawn_fingerprint"])] if entry.get("drawn_fingerprint") else [])}


@dataclass(frozen=True)
class BaselineFindings:
    """The base's findings, by the fingerprints they go by."""

    findings: tuple[FindingEntry, ...]

    @classmethod
    def read(cls, path: Path) -> BaselineFindings:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_BASELINE_BYTES + 1)
        except OSError as exc:
            raise BaselineError(f"cannot read {path}: {exc.strerror}") from exc
        if len(data) > MAX_BASELINE_BYTES:
            raise BaselineError(f"{path} is larger than {MAX_BASELINE_BYTES >> 20} MiB")
        try:
            report = json.loads(data)
        except ValueError as exc:
            raise BaselineError(f"{path} is not JSON: {exc}") from exc
        if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
            raise BaselineError(f"{path} is not an alignbot report (no 'findings')")
        return cls(tuple(cast(list[FindingEntry], report["findings"])))

    @property
    def known_prints(self) -> set[str]:
        return {p for entry in self.findings for p in fingerprints(entry)}

    def showed(self, finding: Finding) -> bool:
        """Whether the base showed ``finding`` (as drawn or as minimized)."""
        return finding.fingerprint in self.known_prints

    def undrawn(self, findings: Iterable[Finding]) -> list[FindingEntry]:
        """The base's findings none of ``findings`` is (the run did not draw them)."""
        drawn = {f.fingerprint for f in findings}
        return [entry for entry in self.findings if not fingerprints(entry) & drawn]


def recheck(baseline: BaselineFindings, result: CheckResult, config: CandidateConfig,
            specs: list[Spec]) -> list[Rechecked]:
    """Mark each finding of ``result`` new or pre-existing, and replay the repro of each
    baseline finding the run did not draw (its minimized program, else the drawn one) on a
    candidate of its own: it agrees when no finding of the same kind at the same op shows."""
    for finding in result.findings:
        finding.extra["baseline"] = "pre-existing" if baseline.showed(finding) else "new"
    by_name = {spec.name: spec for spec in specs}
    todo = [e for e in baseline.undrawn(result.findings) if e["spec"] in by_name]
    if not todo or not result.complete:
        return []
    rechecked: list[Rechecked] = []
    with CandidateProcess(config) as candidate:
        for entry in todo:
            program = cast(Program, entry.get("repro_program") or entry["program"])
            try:
                found = evaluate(by_name[entry["spec"]], program,
                                 reference_observations(program), candidate)
            except Exception:  # a program this version cannot replay: no evidence of a fix
                if candidate.pending:
                    candidate.kill()
                agrees = False
            else:
                agrees = not any(f.kind == entry["kind"] and f.op == entry["op"] for f in found)
            rechecked.append({"fingerprint": entry["fingerprint"], "kind": entry["kind"],
                              "op": entry["op"], "agrees": agrees})
    return rechecked
