"""``jobs``: the durable job queue's rows and their states (``bot/queue.py`` is their only
reader and writer, but for ``bot/shard_groups.py``, which stores a running shard's report)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import Index, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SUPERSEDED = "superseded"


ACTIVE_STATES = (JobState.QUEUED, JobState.RUNNING)


class Job(Base):
    """A unit of work for a worker. ``state`` (a :class:`JobState`) moves queued → running →
    done | failed | superseded (running → queued again on a retry or a recovery);
    ``attempts`` counts claims."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None]
    delivery_id: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    available_at: Mapped[datetime] = mapped_column(default=utcnow)  # not claimed before
    started_at: Mapped[datetime | None]
    worker: Mapped[str | None] = mapped_column(String(255))

    __table_args__ = (
        Index("ix_jobs_state_id", "state", "id"),
        Index("ix_jobs_kind_key_state", "kind", "key", "state"),
    )


JOBS = cast(Table, Job.__table__)
