"""``reminder_sweep_lock``: named leases with an expiry (``bot/scheduler.py``'s ``Lease``)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base


class SweepLock(Base):
    """The sweep lease: one row per lock name; whoever holds an unexpired lease sweeps."""

    __tablename__ = "reminder_sweep_lock"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str | None] = mapped_column(String(255))
    expires_at: Mapped[datetime]
    acquired_at: Mapped[datetime | None]


LOCKS = cast(Table, SweepLock.__table__)
