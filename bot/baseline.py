"""The change, not the candidate: a pull request's findings against the same check on its
merge base (cached) and the repository's known divergences, each new, pre-existing or known,
and the base's findings the head fixed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from sqlalchemy import Engine, select

from alignbot.checks.api import KnownEntry, KnownFile, Verdict, fingerprints

from .config import RepoConfig
from .engine_report import EngineFinding, EngineReport, InvalidReport, parse_report
from .storage import BASELINES, insert_ignore, transaction

BASELINE_FILE = ".alignbot/baseline.json"  # where the head's check finds the base's report
# verdicts that do not fail a check (PyTorch or rounding is to blame)
NOT_THE_CANDIDATE = frozenset({Verdict.REFERENCE_SUSPECT, Verdict.TOLERANCE_NOISE})


def cache_key(config: RepoConfig, specs: list[str], seed: int, draws: int | None) -> str:
    """What a baseline's report depends on besides the base: the whole configuration (the
    candidate, its setup and interpreter, tolerances, spec files), the specs, seed and draws,
    and alignbot's own version."""
    try:
        version = metadata.version("alignbot")
    except metadata.PackageNotFoundError:
        version = "?"
    data = {"config": config.model_dump(mode="json"), "specs": specs, "seed": seed,
            "draws": config.draws if draws is None else draws, "alignbot": version}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def cached(engine: Engine, repo: str, base_sha: str, key: str) -> EngineReport | None:
    """The stored baseline report, validated again (the database is no reason to trust it)."""
    with transaction(engine) as conn:
        row = conn.execute(select(BASELINES.c.report).where(
            BASELINES.c.repo == repo, BASELINES.c.base_sha == base_sha,
            BASELINES.c.key == key)).first()
    if row is None:
        return None
    try:
        return parse_report(row[0])
    except InvalidReport:
        return None


def store(engine: Engine, repo: str, base_sha: str, key: str, report: EngineReport,
          seconds: float) -> None:
    """Keep the base's report for the next push (the first one stored stays)."""
    with transaction(engine) as conn:
        insert_ignore(conn, BASELINES, {"repo": repo, "base_sha": base_sha, "key": key,
                                        "report": report.dump(), "seconds": seconds},
                      keys=["repo", "base_sha", "key"])


@dataclass
class Classified:
    """The head's findings by where they come from, and what the head fixed. A base finding
    the head did not draw is ``fixed`` only when its repro, replayed on the head, agreed
    (``rechecked``); otherwise it is ``undrawn``: still there as far as anyone knows."""

    new: list[EngineFinding] = field(default_factory=list)
    pre_existing: list[EngineFinding] = field(default_factory=list)
    known: list[tuple[EngineFinding, KnownEntry]] = field(default_factory=list)
    fixed: list[EngineFinding] = field(default_factory=list)
    undrawn: list[EngineFinding] = field(default_factory=list)
    known_fixed: list[KnownEntry] = field(default_factory=list)  # entries to remove
    base_sha: str | None = None
    base_problem: str | None = None  # why the base has no report (everything counts as new)

    def failing(self) -> list[EngineFinding]:
        """The new findings that fail the check: the candidate's bugs (and those that could
        not be triaged), not PyTorch's or rounding's."""
        return [f for f in self.new if f.verdict not in NOT_THE_CANDIDATE]

    def counts(self) -> str:
        """``12 pre-existing, 3 known, 1 fixed``: what is not new, in words."""
        fixed = len(self.fixed) + len(self.known_fixed)
        parts = [(len(self.pre_existing) + len(self.undrawn), "pre-existing"),
                 (len(self.known), "known"), (fixed, "fixed")]
        return ", ".join(f"{n} {what}" for n, what in parts if n)


def classify(head: EngineReport, base: EngineReport | None, known: KnownFile | None
             ) -> Classified:
    """Each head finding known (an entry of the file matches it), else pre-existing (the
    base showed it, as drawn or minimized), else new; each base finding the head did not
    draw fixed or undrawn, by the head's replay of its repro. An entry whose every finding
    on the base is fixed on the head, or whose spec ran on the head and matched nothing, is
    to be removed from the file."""
    result = Classified()
    base_prints = {p for f in (base.findings if base else []) for p in _prints(f)}
    for finding in head.findings:
        entry = known.match(_entry(finding)) if known is not None else None
        if entry is not None:
            result.known.append((finding, entry))
        elif finding.fingerprint in base_prints:
            result.pre_existing.append(finding)
        else:
            result.new.append(finding)
    drawn = {f.fingerprint for f in head.findings}
    agreed = {r.fingerprint for r in head.rechecked or [] if r.agrees}
    for finding in base.findings if base else []:
        if _prints(finding) & drawn:
            continue
        (result.fixed if finding.fingerprint in agreed else result.undrawn).append(finding)
    if known is not None:
        result.known_fixed = _entries_fixed(known, head, result)
        removed = {id(e) for e in result.known_fixed}  # told as entries to remove instead
        result.fixed = [f for f in result.fixed if id(known.match(_entry(f))) not in removed]
        result.undrawn = [f for f in result.undrawn if known.match(_entry(f)) is None]
    return result


def _entries_fixed(known: KnownFile, head: EngineReport, result: Classified
                   ) -> list[KnownEntry]:
    matched_head = {id(e) for _, e in result.known}
    still = {id(known.match(_entry(f))) for f in result.undrawn}
    by_base = [known.match(_entry(f)) for f in result.fixed]
    entries = {id(e): e for e in by_base if e is not None and id(e) not in matched_head
               and id(e) not in still}
    for entry in known.fixed([_entry(f) for f in head.findings], head.specs):
        entries.setdefault(id(entry), entry)
    return [e for e in known.entries if id(e) in entries]


def _prints(finding: EngineFinding) -> set[str]:
    return fingerprints(_entry(finding))


def _entry(finding: EngineFinding) -> dict[str, Any]:
    return finding.model_dump(mode="json")
