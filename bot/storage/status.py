"""``status_runs`` and ``status_results``: the default branch's check, per commit, and what it
found per op × dtype × kind (the status page shows it; a later baseline reads it)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import BigInteger, Index, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class RunState(StrEnum):
    COMPLETE = "complete"  # the engine's report was stored
    FAILED = "failed"  # no report: ``failure`` says why


class StatusOutcome(StrEnum):
    """What one op × dtype × kind came to on a commit (the grid's colours, with ``not covered``
    for an op × dtype no row names)."""

    AGREES = "agrees"  # drawn and no finding
    KNOWN = "known"  # a finding the repository's known-divergences file names
    DIVERGES = "diverges"  # a finding nothing explains


class StatusRun(Base):
    """One check of a default branch's commit (a push), for one installation: the rows of
    two installations never mix, also for one repository name (a transfer)."""

    __tablename__ = "status_runs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    installation_id: Mapped[int] = mapped_column(BigInteger)
    repo: Mapped[str] = mapped_column(String(255))  # owner/name, as GitHub spelled it
    branch: Mapped[str] = mapped_column(String(255))
    commit_sha: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[int | None] = mapped_column(BigInteger)
    candidate: Mapped[str] = mapped_column(String(255), default="")
    state: Mapped[str] = mapped_column(String(16))  # a RunState
    failure: Mapped[str | None] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)  # e.g. why the known file was not used
    specs: Mapped[int] = mapped_column(Integer, default=0)
    programs: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        UniqueConstraint("installation_id", "repo", "commit_sha",
                         name="ux_status_runs_installation_repo_commit"),
        Index("ix_status_runs_repo", "repo", "installation_id", "id"),
    )


class StatusResult(Base):
    """One op × dtype × kind of a run: ``agrees`` rows have ``kind`` and ``fingerprint``
    empty; a finding's row has its kind and fingerprint, and in ``detail`` its message, repro
    and, when known, the reason and upstream issue the known-divergences file gives."""

    __tablename__ = "status_results"

    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    op: Mapped[str] = mapped_column(String(255), primary_key=True)
    dtype: Mapped[str] = mapped_column(String(100), primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    outcome: Mapped[str] = mapped_column(String(16))  # an StatusOutcome
    count: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[dict[str, Any]]


STATUS_RUNS = cast(Table, StatusRun.__table__)
STATUS_RESULTS = cast(Table, StatusResult.__table__)
