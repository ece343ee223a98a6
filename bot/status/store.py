"""The default branch's results, written per commit and read back per repository: one run
row per checked commit, one result row per op × dtype × kind (``bot/storage/status.py``).

Every read names the installation as well as the repository: the rows of one installation
are never shown for another's repository of the same name (``alignbot.bot.tenancy.authorize_viewer``
says which installation a page may read)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, select

from alignbot.bot.jobs import ALIGN, ALIGN_SHARD
from alignbot.bot.storage import (
    JOBS,
    STATUS_RESULTS,
    STATUS_RUNS,
    UPSTREAM,
    JobState,
    RunState,
    StatusOutcome,
    transaction,
    upsert,
    utcnow,
)
from alignbot.checks.api import KNOWN_PATH, KnownFileError, load_known, member_dtype

MAX_REPRO = 50_000  # characters of a repro kept per finding
MAX_MESSAGE = 2_000
NO_DTYPE = "-"  # a finding about no tensor (an exception before any input, a shape)


@dataclass(frozen=True)
class KnownMatch:
    """What the known-divergences file says about a finding."""

    reason: str
    upstream: str | None = None


# a finding (a report's entry) -> its known entry, or None:
# ``alignbot.checks.known.KnownFile.match``
KnownLookup = Callable[[Mapping[str, Any]], KnownMatch | None]


@dataclass(frozen=True)
class Run:
    id: int
    commit_sha: str
    branch: str
    state: str
    failure: str | None
    note: str | None
    candidate: str
    specs: int
    programs: int
    created_at: datetime


@dataclass(frozen=True)
class Result:
    run_id: int
    op: str
    dtype: str
    kind: str
    fingerprint: str
    outcome: str
    count: int
    detail: dict[str, Any]


def finding_dtypes(report: Mapping[str, Any], finding: Mapping[str, Any]) -> list[str]:
    """The dtypes a finding is about (the engine's cause members name them; a report without
    causes is read from the finding itself)."""
    for cause in report.get("causes") or []:
        for member in cause.get("members") or []:
            if member.get("fingerprint") == finding.get("fingerprint"):
                return _split(member.get("dtype") or "")
    try:
        return _split(member_dtype(finding))  # type: ignore[arg-type]
    except Exception:  # a program this version cannot read
        return [NO_DTYPE]


def _split(dtypes: str) -> list[str]:
    return [d[:100] for d in dict.fromkeys(dtypes.split(",")) if d] or [NO_DTYPE]


def known_lookup(text: str | None) -> tuple[KnownLookup | None, str | None]:
    """How findings are matched against a known-divergences file's ``text`` (None: no file,
    nothing is known), or why the file could not be used."""
    if text is None:
        return None, None
    try:
        entries = load_known(text, KNOWN_PATH)
    except KnownFileError as exc:
        return None, f"{KNOWN_PATH} was not used: {str(exc)[:500]}"

    def lookup(finding: Mapping[str, Any]) -> KnownMatch | None:
        entry = entries.match(finding)
        return None if entry is None else KnownMatch(entry.reason, entry.upstream)

    return lookup, None


def marked(finding: Mapping[str, Any]) -> KnownMatch | None:
    """The known entry the engine marked a finding with (``check --known``), if any."""
    mark = finding.get("known")
    if isinstance(mark, Mapping) and isinstance(mark.get("reason"), str):
        upstream = mark.get("upstream")
        return KnownMatch(mark["reason"], upstream if isinstance(upstream, str) else None)
    return None


def report_results(report: Mapping[str, Any], known: KnownLookup | None = None
                   ) -> list[dict[str, Any]]:
    """The result rows (without ``run_id``) of one report: a row per finding and dtype, and
    an ``agrees`` row per op × dtype the draws covered (``exploration[].covered``) that no
    finding names."""
    rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for finding in report.get("findings") or []:
        match = known(finding) if known is not None else marked(finding)
        detail = {
            "spec": finding.get("spec", ""),
            "message": str(finding.get("message", ""))[:MAX_MESSAGE],
            "verdict": finding.get("verdict"), "repro": (finding.get("repro") or "")[:MAX_REPRO],
            "repro_verified": finding.get("repro_verified"),
            "known": None if match is None else {"reason": match.reason,
                                                 "upstream": match.upstream},
        }
        for dtype in finding_dtypes(report, finding):
            key = (str(finding["op"])[:255], dtype, str(finding["kind"]), finding["fingerprint"])
            rows[key] = {"op": key[0], "dtype": dtype, "kind": key[2], "fingerprint": key[3],
                         "outcome": (StatusOutcome.DIVERGES if match is None
                                     else StatusOutcome.KNOWN).value,
                         "count": int(finding.get("count", 0)), "detail": detail}
    found = {(op, dtype) for op, dtype, _, _ in rows}
    for explored in report.get("exploration") or []:
        for op, dtype in explored.get("covered") or []:
            if (op, dtype) not in found:
                found.add((op, dtype))
                rows[(op, dtype, "", "")] = {"op": op, "dtype": dtype, "kind": "",
                                             "fingerprint": "",
                                             "outcome": StatusOutcome.AGREES.value,
                                             "count": 0, "detail": {}}
    return list(rows.values())


def record_run(engine: Engine, *, installation_id: int, repo: str, branch: str,
               commit_sha: str, job_id: int | None, candidate: str,
               report: Mapping[str, Any] | None, failure: str | None = None,
               known: KnownLookup | None = None, note: str | None = None) -> int:
    """Store one commit's check (its report, or why there is none; ``note``: what else the
    page should say, e.g. a known-divergences file that was refused), replacing an earlier
    one of the same commit (a re-run); returns the run's id."""
    state = RunState.COMPLETE if report is not None else RunState.FAILED
    values = {"installation_id": installation_id, "repo": repo, "branch": branch,
              "commit_sha": commit_sha, "job_id": job_id, "candidate": candidate[:255],
              "state": state.value, "failure": failure, "note": note,
              "specs": int((report or {}).get("specs_run", 0)),
              "programs": int((report or {}).get("programs_run", 0)), "created_at": utcnow()}
    rows = report_results(report, known) if report is not None else []
    with transaction(engine) as conn:
        upsert(conn, STATUS_RUNS, values, keys=["installation_id", "repo", "commit_sha"])
        run_id = int(conn.execute(select(STATUS_RUNS.c.id).where(
            STATUS_RUNS.c.installation_id == installation_id, STATUS_RUNS.c.repo == repo,
            STATUS_RUNS.c.commit_sha == commit_sha)).scalar_one())
        conn.execute(delete(STATUS_RESULTS).where(STATUS_RESULTS.c.run_id == run_id))
        if rows:
            conn.execute(insert(STATUS_RESULTS), [{**row, "run_id": run_id} for row in rows])
    return run_id


def last_runs(engine: Engine, installation_id: int, repo: str, limit: int) -> list[Run]:
    """The repository's last ``limit`` runs, newest first (names compare as GitHub's do)."""
    with transaction(engine) as conn:
        found = conn.execute(
            select(STATUS_RUNS).where(STATUS_RUNS.c.installation_id == installation_id,
                                      STATUS_RUNS.c.repo == repo)
            .order_by(STATUS_RUNS.c.id.desc()).limit(limit)).mappings().all()
    return [Run(row["id"], row["commit_sha"], row["branch"], row["state"], row["failure"],
                row["note"], row["candidate"], row["specs"], row["programs"], row["created_at"])
            for row in found]


def results_of(engine: Engine, run_ids: Sequence[int]) -> list[Result]:
    """The result rows of these runs."""
    if not run_ids:
        return []
    with transaction(engine) as conn:
        found = conn.execute(select(STATUS_RESULTS).where(
            STATUS_RESULTS.c.run_id.in_(list(run_ids)))).mappings().all()
    return [Result(row["run_id"], row["op"], row["dtype"], row["kind"], row["fingerprint"],
                   row["outcome"], row["count"], dict(row["detail"] or {})) for row in found]


def results_at(engine: Engine, installation_id: int, repo: str, commit_sha: str
               ) -> list[Result] | None:
    """The results of one commit's complete run (what a baseline compares with), or None
    when that commit was not checked or its check failed."""
    with transaction(engine) as conn:
        run_id = conn.execute(select(STATUS_RUNS.c.id).where(
            STATUS_RUNS.c.installation_id == installation_id, STATUS_RUNS.c.repo == repo,
            STATUS_RUNS.c.commit_sha == commit_sha,
            STATUS_RUNS.c.state == RunState.COMPLETE.value)).scalar()
    return None if run_id is None else results_of(engine, [int(run_id)])


def upstream_states(engine: Engine, repo: str, urls: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What the upstream watch last saw of these issues (``state``, ``last_checked``), from
    this repository's own rows only."""
    wanted = sorted(set(urls))
    if not wanted:
        return {}
    with transaction(engine) as conn:
        found = conn.execute(select(UPSTREAM.c.url, UPSTREAM.c.state, UPSTREAM.c.last_checked)
                             .where(UPSTREAM.c.pr_repo == repo, UPSTREAM.c.url.in_(wanted))
                             ).mappings().all()
    return {row["url"]: {"state": row["state"], "last_checked": row["last_checked"]}
            for row in found}


def pull_report(engine: Engine, installation_id: int, repo: str, number: int
                ) -> tuple[str, dict[str, Any]] | None:
    """The head and report of the pull request's last finished check (its ``align`` job, or
    the shard that merged a split one), or None."""
    with transaction(engine) as conn:
        found = conn.execute(
            select(JOBS.c.payload, JOBS.c.result)
            .where(and_(JOBS.c.key == f"{repo}#{number}", JOBS.c.state == JobState.DONE.value,
                        JOBS.c.kind.in_((ALIGN, ALIGN_SHARD))))
            .order_by(JOBS.c.id.desc()).limit(50)).all()
    for payload, result in found:
        if (isinstance(payload, dict) and payload.get("installation_id") == installation_id
                and isinstance(result, dict) and isinstance(result.get("report"), dict)):
            return str(payload.get("head_sha", "")), result["report"]
    return None
