"""``upstream_items`` and ``upstream_filings``: upstream issues and pull requests that pull
requests here wait on, and the issues alignbot filed upstream."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import cast

from sqlalchemy import BigInteger, Index, Integer, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class UpstreamState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


class UpstreamItem(Base):
    """An upstream issue or pull request that a pull request here waits on: one row per
    upstream item and repository here (two tenants watching one upstream issue have a row
    each, and neither sees the other's).

    ``bot/commands/`` inserts rows (``/upstream … file``, ``/track URL``) with ``url``,
    ``repo``, ``number``, ``kind``, ``registered_by``, ``pr_repo``, ``pr_number`` (the rest
    default); the weekly watch (``bot/reminders/``) fills ``last_checked``, ``state`` (an
    :class:`UpstreamState`), ``last_activity``, ``tracking_repo`` and ``note``.
    """

    __tablename__ = "upstream_items"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    url: Mapped[str] = mapped_column(String(512))
    repo: Mapped[str] = mapped_column(String(255))  # upstream owner/name
    number: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(8))  # "issue" | "pr"
    registered_by: Mapped[str | None] = mapped_column(String(255))
    pr_repo: Mapped[str] = mapped_column(String(255))
    pr_number: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_checked: Mapped[datetime | None]
    state: Mapped[str] = mapped_column(String(16), default=UpstreamState.OPEN.value)
    last_activity: Mapped[datetime | None]
    tracking_repo: Mapped[str | None] = mapped_column(String(255))
    note: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_upstream_items_pr_repo", "pr_repo"),
                      Index("ux_upstream_items_url_pr_repo", "url", "pr_repo", unique=True))


class UpstreamFiling(Base):
    """An issue alignbot opened in a tracking repository for one finding (``/upstream …
    file``): one per (tracking repository, fingerprint), whichever pull request asks again.
    ``issue_number`` is None while the issue is being opened."""

    __tablename__ = "upstream_filings"

    tracking_repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    issue_number: Mapped[int | None] = mapped_column(BigInteger)
    issue_url: Mapped[str | None] = mapped_column(String(1024))
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    filed_by: Mapped[str] = mapped_column(String(64))
    filed_at: Mapped[datetime] = mapped_column(default=utcnow)


UPSTREAM = cast(Table, UpstreamItem.__table__)
FILINGS = cast(Table, UpstreamFiling.__table__)
