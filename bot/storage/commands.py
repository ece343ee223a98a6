"""``command_replies`` and ``command_uses``: what slash-commands did and how often
(``bot/commands/``)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Index, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base, BigId, utcnow


class CommandReply(Base):
    """One command line that was handled: (source, source id, line hash) → its outcome.

    ``source`` is ``comment`` or ``review``; ``reaction`` and ``reply_body`` are what is
    owed to GitHub, ``reacted`` and ``reply_id`` say it was delivered. The row is written
    before anything is posted, so a redelivery, an edit or a re-run job only finishes the
    delivery and never acts again.
    """

    __tablename__ = "command_replies"

    source: Mapped[str] = mapped_column(String(16), primary_key=True)
    source_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    line_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    actor: Mapped[str] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(String(32))  # a command name, or "" when not understood
    accepted: Mapped[bool]
    reaction: Mapped[str | None] = mapped_column(String(16))
    reacted: Mapped[bool] = mapped_column(default=False)
    reply_body: Mapped[str | None] = mapped_column(Text)
    reply_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CommandUse(Base):
    """One rate-limited use of a command (``/align``) by ``login`` on ``repo#number``."""

    __tablename__ = "command_uses"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    login: Mapped[str] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(String(32))
    used_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_command_uses_who", "repo", "number", "login", "command",
                            "used_at"),)


REPLIES = cast(Table, CommandReply.__table__)
USES = cast(Table, CommandUse.__table__)
