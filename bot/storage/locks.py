"""``reminder_sweep_lock``: named leases with an expiry (``bot/lease.py``'s ``Lease``)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base


class SweepLock(Base):
    """A named lease: one row per name; whoever holds it unexpired may do what it guards."""

    __tablename__ = "reminder_sweep_lock"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(255))
    expires_at: Mapped[datetime]
    acquired_at: Mapped[datetime | None]


LOCKS = cast(Table, SweepLock.__table__)
