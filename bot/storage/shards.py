"""``shard_groups``: the checks split into shard jobs, and how each one ended."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import cast

from sqlalchemy import BigInteger, Index, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, utcnow


class GroupEnd(StrEnum):
    MERGED = "merged"  # every shard stored its report; ``ended_by`` merges and posts them
    FAILED = "failed"  # ``ended_by`` failed for good and completes the check run as failed
    CANCELLED = "cancelled"  # ``ended_by`` was superseded and cancels the check run


class ShardGroup(Base):
    """One check split into shard jobs (``jobs``, the K-th of N at index K-1) by the job
    ``parent_id``. ``ended`` is set once, by a conditional update (``WHERE ended IS NULL``):
    the shard job that set it (``ended_by``) is the only one that writes the end of the check
    run and the comment, however many shards finish, fail or are superseded at once."""

    __tablename__ = "shard_groups"

    parent_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    key: Mapped[str] = mapped_column(String(255))
    head_sha: Mapped[str] = mapped_column(String(64))
    jobs: Mapped[list[int]]
    ended: Mapped[str | None] = mapped_column(String(16))
    ended_by: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_shard_groups_key_ended", "key", "ended"),)


SHARD_GROUPS = cast(Table, ShardGroup.__table__)
