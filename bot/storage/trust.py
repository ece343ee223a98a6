"""``pr_ok_to_test``: maintainers' ``/ok-to-test`` go-aheads."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Index, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class OkToTest(Base):
    """A maintainer's ``/ok-to-test``: ``trusted_by`` let pull request ``repo#number`` run at
    ``head_sha``. With ``trust.carry_over_pushes`` any row of the pull request counts;
    without it only the row for the current head does, so every push needs a new go-ahead."""

    __tablename__ = "pr_ok_to_test"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(255))  # owner/name
    number: Mapped[int] = mapped_column(BigInteger)
    head_sha: Mapped[str] = mapped_column(String(64))
    trusted_by: Mapped[str] = mapped_column(String(64))  # GitHub login
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ux_pr_ok_to_test", "repo", "number", "head_sha", unique=True),)


OK_TO_TEST = cast(Table, OkToTest.__table__)
