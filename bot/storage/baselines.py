"""``baselines``: the report of a pull request's check run on its merge base, kept for the
next push of any pull request with the same base, configuration and candidate."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import JSON, Float, Index, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class BaselineReport(Base):
    """The engine's report of the check ``key`` names (a digest of the configuration, the
    candidate, the specs, seed and draws: ``alignbot.bot.baseline.cache_key``) on ``base_sha`` of
    ``repo``; one row per key, written once and read by every later push."""

    __tablename__ = "baselines"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(255))  # owner/name
    base_sha: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(64))
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    seconds: Mapped[float] = mapped_column(Float)  # what running it took
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ux_baselines_repo_base_key", "repo", "base_sha", "key",
                            unique=True),)


BASELINES = cast(Table, BaselineReport.__table__)
