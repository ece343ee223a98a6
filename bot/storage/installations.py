"""``installations``: the GitHub App's installations and their repositories."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Engine, String, Table, select
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, utcnow
from .engine import transaction


class InstallationRow(Base):
    """A GitHub App installation, kept up to date from ``installation*`` webhooks."""

    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    account_login: Mapped[str] = mapped_column(String(255))
    account_type: Mapped[str | None] = mapped_column(String(32))
    repository_selection: Mapped[str | None] = mapped_column(String(16))  # "all" | "selected"
    repositories: Mapped[list[str]] = mapped_column(default=list)  # full names, sorted
    suspended: Mapped[bool] = mapped_column(default=False)
    deleted: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


INSTALLATIONS = cast(Table, InstallationRow.__table__)


def installation_gone(engine: Engine, installation_id: int) -> str | None:
    """Why the App must not act for ``installation_id`` ("uninstalled", "suspended"), as the
    ``installation`` webhooks recorded it, or None (live, or never recorded): a job queued
    before the App was removed asks GitHub for no token."""
    with transaction(engine) as conn:
        row = conn.execute(select(INSTALLATIONS.c.deleted, INSTALLATIONS.c.suspended).where(
            INSTALLATIONS.c.id == installation_id)).first()
    if row is None:
        return None
    return "uninstalled" if row.deleted else "suspended" if row.suspended else None
