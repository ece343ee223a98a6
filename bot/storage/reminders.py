"""The reminder feature's rows: reminders sent, sweep cursors, API budgets, and the
per-pull-request settings that ``/remind`` writes (``bot/commands/``) and the sweep reads
(``bot/reminders/``)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, cast

from sqlalchemy import BigInteger, Index, Integer, String, Table, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class ReminderKind(StrEnum):
    """Who a stale pull request waits on, and so what the reminder says
    (``reminders_sent.kind``)."""

    REVIEWERS = "waiting-on-reviewers"
    AUTHOR = "waiting-on-author"
    MERGE = "waiting-to-merge"
    ESCALATION = "escalation"


class Phase(StrEnum):
    """Where a repository's sweep stands (``reminder_sweeps.phase``)."""

    LISTING = "listing"
    FOLLOWUPS = "followups"
    UPSTREAM = "upstream"
    DONE = "done"


class ReminderSent(Base):
    """One reminder posted on a pull request; ``count`` is its place in the current run of
    reminders without human activity (1 for the first; the escalation comes after
    ``max_reminders``)."""

    __tablename__ = "reminders_sent"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(Integer)
    period: Mapped[str] = mapped_column(String(10))  # the local date of the period's slot
    sent_at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(32))  # a ReminderKind
    comment_id: Mapped[int] = mapped_column(BigInteger)
    count: Mapped[int] = mapped_column(Integer)

    __table_args__ = (
        UniqueConstraint("repo", "number", "period", name="uq_reminders_sent_period"),
        Index("ix_reminders_sent_repo_sent_at", "repo", "sent_at"),
    )


class ReminderSweep(Base):
    """Where the sweep of one repository stands: its period, phase, cursor and next check."""

    __tablename__ = "reminder_sweeps"

    repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    installation_id: Mapped[int] = mapped_column(BigInteger)
    period: Mapped[str | None] = mapped_column(String(10))
    phase: Mapped[str] = mapped_column(String(16), default=Phase.DONE.value)
    cursor: Mapped[dict[str, Any]] = mapped_column(default=dict)
    next_check_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    posted: Mapped[int] = mapped_column(default=0)
    error: Mapped[str | None] = mapped_column(Text)
    digest_issue: Mapped[int | None] = mapped_column(Integer)  # when this is a tracking repo
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReminderApiCalls(Base):
    """GitHub requests made by the reminder feature, per installation and clock hour."""

    __tablename__ = "reminder_api_calls"

    installation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True,
                                                 autoincrement=False)
    hour: Mapped[datetime] = mapped_column(primary_key=True)
    calls: Mapped[int] = mapped_column(default=0)
    writes: Mapped[int] = mapped_column(default=0)


class PrReminderSettings(Base):
    """Per-pull-request reminder settings that ``/remind`` changes; the sweep reads them
    before it sends a reminder.

    - ``repo`` (``owner/name``) and ``number``: the pull request (the primary key).
    - ``snoozed_until``: no reminder before this moment (UTC, timezone-aware); None: not
      snoozed. ``/remind snooze 3d`` sets it, ``/remind on`` clears it.
    - ``disabled``: no reminders at all on this pull request (``/remind off``; ``/remind on``
      turns them back on). A missing row means the repository's defaults apply.
    - ``updated_by``: the login of whoever changed it last; ``updated_at``: when (UTC).
    """

    __tablename__ = "pr_reminder_settings"

    repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    number: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    snoozed_until: Mapped[datetime | None]
    disabled: Mapped[bool] = mapped_column(default=False)
    updated_by: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


SENT = cast(Table, ReminderSent.__table__)
SWEEPS = cast(Table, ReminderSweep.__table__)
CALLS = cast(Table, ReminderApiCalls.__table__)
PR_SETTINGS = cast(Table, PrReminderSettings.__table__)
