"""``deliveries``: the webhook deliveries that were accepted."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, utcnow


class Delivery(Base):
    """One webhook delivery that was accepted; its id makes a redelivery a no-op."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    jobs: Mapped[int] = mapped_column(default=0)
    received_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


DELIVERIES = cast(Table, Delivery.__table__)
