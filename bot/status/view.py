"""What a status page shows, built from stored rows alone: the op × dtype grid, each cell's
findings with their repros, the last runs with when each finding was first and last seen,
and the known divergences with the state of their upstream issues."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from alignbot.bot.storage import StatusOutcome
from alignbot.checks.api import DTYPE_ORDER

from .store import NO_DTYPE, Result, Run

NOT_COVERED = "not-covered"
# how a cell's findings add up: the worst one colours it
_RANK = {StatusOutcome.DIVERGES.value: 3, StatusOutcome.KNOWN.value: 2,
         StatusOutcome.AGREES.value: 1}


@dataclass
class FindingView:
    fingerprint: str
    op: str
    dtype: str
    kind: str
    outcome: str
    count: int
    spec: str
    message: str
    verdict: str
    repro: str
    repro_verified: bool
    known_reason: str | None
    upstream: str | None
    first_seen: str | None = None  # the commit of the oldest run shown that has it
    last_seen: str | None = None


@dataclass
class CellView:
    op: str
    dtype: str
    outcome: str  # a StatusOutcome's value, or NOT_COVERED
    anchor: str
    findings: list[FindingView] = field(default_factory=list)


@dataclass
class RunView:
    commit_sha: str
    branch: str
    created_at: datetime
    state: str
    failure: str | None
    diverges: int
    known: int
    agrees: int


@dataclass
class SeenView:
    """A finding of the runs shown, with the first and last commit that had it."""

    fingerprint: str
    op: str
    dtype: str
    kind: str
    outcome: str  # in the newest run that had it
    first_seen: str
    last_seen: str
    runs: int
    current: bool  # in the newest run
    anchor: str


@dataclass
class KnownView:
    reason: str
    upstream: str | None
    upstream_state: str | None  # what the upstream watch last saw; None: not watched
    last_checked: datetime | None
    cells: list[CellView]


@dataclass
class Grid:
    ops: list[str]
    dtypes: list[str]
    cells: dict[tuple[str, str], CellView]

    def cell(self, op: str, dtype: str) -> CellView:
        return self.cells.get((op, dtype)) or CellView(op, dtype, NOT_COVERED, "")

    @property
    def findings(self) -> list[FindingView]:
        return [f for cell in self.cells.values() for f in cell.findings]


def anchor(op: str, dtype: str) -> str:
    """The id of a cell's section: letters, digits, ``.``, ``_`` and ``-`` only."""
    return "cell-" + re.sub(r"[^A-Za-z0-9._-]", "_", f"{op}--{dtype}")[:200]


def _dtype_key(name: str) -> tuple[int, str]:
    return (DTYPE_ORDER.index(name) if name in DTYPE_ORDER else len(DTYPE_ORDER) + (
        name == NO_DTYPE), name)


def _finding(result: Result) -> FindingView:
    detail = result.detail
    known = detail.get("known") if isinstance(detail.get("known"), dict) else None
    return FindingView(
        result.fingerprint, result.op, result.dtype, result.kind, result.outcome, result.count,
        str(detail.get("spec") or ""), str(detail.get("message") or ""),
        str(detail.get("verdict") or ""), str(detail.get("repro") or ""),
        detail.get("repro_verified") is True,
        None if known is None else str(known.get("reason") or ""),
        _web_link(known.get("upstream")) if known is not None else None)


def _web_link(url: Any) -> str | None:
    """An upstream link the page may make: http(s) only (the file is the repository's)."""
    if isinstance(url, str) and re.fullmatch(r"https?://[^\s<>\"']{1,500}", url):
        return url
    return None


def grid(results: Sequence[Result]) -> Grid:
    """The grid of one run's results: a row per op, a column per dtype seen."""
    cells: dict[tuple[str, str], CellView] = {}
    for result in sorted(results, key=lambda r: (r.op, r.dtype, r.kind, r.fingerprint)):
        key = (result.op, result.dtype)
        cell = cells.setdefault(key, CellView(*key, result.outcome, anchor(*key)))
        if _RANK.get(result.outcome, 0) > _RANK.get(cell.outcome, 0):
            cell.outcome = result.outcome
        if result.fingerprint:
            cell.findings.append(_finding(result))
    return Grid(sorted({op for op, _ in cells}),
                sorted({dtype for _, dtype in cells}, key=_dtype_key), cells)


def history(runs: Sequence[Run], results: Sequence[Result], current: Grid
            ) -> tuple[list[RunView], list[SeenView]]:
    """The runs, newest first, with their counts, and every finding they had with its first
    and last seen commit (also set on the findings of ``current``)."""
    by_run: dict[int, list[Result]] = {}
    for result in results:
        by_run.setdefault(result.run_id, []).append(result)
    seen: dict[str, list[str]] = {}  # fingerprint -> commits, newest first
    views = []
    for run in runs:
        rows = by_run.get(run.id, [])
        for fingerprint in dict.fromkeys(r.fingerprint for r in rows if r.fingerprint):
            seen.setdefault(fingerprint, []).append(run.commit_sha)
        findings = {o: len({(r.fingerprint, r.op) for r in rows if r.outcome == o})
                    for o in (StatusOutcome.DIVERGES, StatusOutcome.KNOWN)}
        views.append(RunView(run.commit_sha, run.branch, run.created_at, run.state, run.failure,
                             findings[StatusOutcome.DIVERGES], findings[StatusOutcome.KNOWN],
                             sum(1 for r in rows if r.outcome == StatusOutcome.AGREES)))
    for finding in current.findings:
        commits = seen.get(finding.fingerprint) or []
        finding.last_seen = commits[0] if commits else None
        finding.first_seen = commits[-1] if commits else None
    newest = runs[0].id if runs else None
    order = {run.id: index for index, run in enumerate(runs)}
    latest: dict[tuple[str, str, str], Result] = {}
    for result in sorted(results, key=lambda r: order.get(r.run_id, len(order)), reverse=True):
        if result.fingerprint:  # oldest first: the newest run's row is kept
            latest[(result.fingerprint, result.op, result.dtype)] = result
    timeline = [SeenView(r.fingerprint, r.op, r.dtype, r.kind, r.outcome,
                         seen[r.fingerprint][-1], seen[r.fingerprint][0],
                         len(seen[r.fingerprint]), r.run_id == newest, anchor(r.op, r.dtype))
                for r in latest.values()]
    timeline.sort(key=lambda s: (not s.current, s.op, s.dtype, s.fingerprint))
    return views, timeline


def known_divergences(current: Grid, upstream: Mapping[str, Mapping[str, Any]]
                      ) -> list[KnownView]:
    """The known entries the current run matched, each with its cells and the upstream
    watch's last look at its issue."""
    entries: dict[tuple[str, str | None], KnownView] = {}
    for cell in current.cells.values():
        for finding in cell.findings:
            if finding.known_reason is None:
                continue
            watched = upstream.get(finding.upstream or "") or {}
            view = entries.setdefault((finding.known_reason, finding.upstream), KnownView(
                finding.known_reason, finding.upstream, watched.get("state"),
                watched.get("last_checked"), []))
            if cell not in view.cells:
                view.cells.append(cell)
    return sorted(entries.values(), key=lambda k: k.reason)
