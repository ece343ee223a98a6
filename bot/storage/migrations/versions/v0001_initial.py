"""The schema as alignbot created it before migrations (``create_all`` of every table).

Revision ID: 0001
Revises: (none)

Frozen here, column for column, so that this revision builds the same tables forever, and so
that ``alignbot.bot.storage.migrate`` can compare a database made by ``create_all`` (no
``alembic_version`` table) with it before stamping it. Types are the DDL types: the app's
``UtcDateTime`` is ``DateTime(timezone=True)`` in the database, its big ids are ``BIGINT``
(``INTEGER`` on SQLite, which auto-increments only that).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _time(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _text(name: str, length: int | None, nullable: bool = False) -> sa.Column[Any]:
    kind = sa.Text() if length is None else sa.String(length)
    return sa.Column(name, kind, nullable=nullable)


def _int(name: str, kind: type[sa.Integer] = sa.Integer, nullable: bool = False
         ) -> sa.Column[Any]:
    return sa.Column(name, kind(), nullable=nullable)


def _flag(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.Boolean(), nullable=False)


def _id() -> sa.Column[Any]:
    return sa.Column("id", _BIG_ID, primary_key=True, autoincrement=True)


def schema() -> sa.MetaData:
    """Revision 1's tables, on a MetaData of their own."""
    meta = sa.MetaData()
    sa.Table(
        "deliveries", meta,
        sa.Column("id", sa.String(64), primary_key=True),
        _text("event", 64), _text("action", 64, True),
        _int("installation_id", sa.BigInteger, True), _int("jobs"), _time("received_at"),
        sa.Index("ix_deliveries_received_at", "received_at"),
    )
    sa.Table(
        "jobs", meta, _id(),
        _text("kind", 64), _text("key", 255), sa.Column("payload", sa.JSON(), nullable=False),
        _text("state", 16), _int("attempts"), _text("error", None, True),
        sa.Column("result", sa.JSON()), _text("delivery_id", 64, True),
        _time("created_at"), _time("updated_at"), _time("available_at"),
        _time("started_at", True), _text("worker", 255, True),
        sa.Index("ix_jobs_state_id", "state", "id"),
        sa.Index("ix_jobs_kind_key_state", "kind", "key", "state"),
    )
    sa.Table(
        "installations", meta,
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=False),
        _text("account_login", 255), _text("account_type", 32, True),
        _text("repository_selection", 16, True),
        sa.Column("repositories", sa.JSON(), nullable=False),
        _flag("suspended"), _flag("deleted"), _time("created_at"), _time("updated_at"),
    )
    sa.Table(
        "reminders_sent", meta, _id(),
        _text("repo", 255), _int("number"), _text("period", 10), _time("sent_at"),
        _text("kind", 32), _int("comment_id", sa.BigInteger), _int("count"),
        sa.UniqueConstraint("repo", "number", "period", name="uq_reminders_sent_period"),
        sa.Index("ix_reminders_sent_repo_sent_at", "repo", "sent_at"),
    )
    sa.Table(
        "reminder_sweeps", meta,
        sa.Column("repo", sa.String(255), primary_key=True),
        _int("installation_id", sa.BigInteger), _text("period", 10, True),
        _text("phase", 16), sa.Column("cursor", sa.JSON(), nullable=False),
        _time("next_check_at", True), _time("started_at", True), _time("finished_at", True),
        _int("posted"), _text("error", None, True), _int("digest_issue", nullable=True),
        _time("updated_at"),
    )
    sa.Table(
        "reminder_api_calls", meta,
        sa.Column("installation_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("hour", sa.DateTime(timezone=True), primary_key=True),
        _int("calls"), _int("writes"),
    )
    sa.Table(
        "upstream_items", meta, _id(),
        sa.Column("url", sa.String(512), nullable=False, unique=True),
        _text("repo", 255), _int("number"), _text("kind", 8),
        _text("registered_by", 255, True), _text("pr_repo", 255),
        _int("pr_number", nullable=True), _time("created_at"), _time("last_checked", True),
        _text("state", 16), _time("last_activity", True), _text("tracking_repo", 255, True),
        _text("note", None, True),
        sa.Index("ix_upstream_items_pr_repo", "pr_repo"),
    )
    sa.Table(
        "pr_ok_to_test", meta, _id(),
        _text("repo", 255), _int("number", sa.BigInteger), _text("head_sha", 64),
        _text("trusted_by", 64), _time("created_at"),
        sa.Index("ux_pr_ok_to_test", "repo", "number", "head_sha", unique=True),
    )
    sa.Table(
        "command_replies", meta,
        sa.Column("source", sa.String(16), primary_key=True),
        sa.Column("source_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("line_hash", sa.String(64), primary_key=True),
        _text("repo", 255), _int("number", sa.BigInteger), _text("actor", 64),
        _text("command", 32), _flag("accepted"), _text("reaction", 16, True),
        _flag("reacted"), _text("reply_body", None, True),
        _int("reply_id", sa.BigInteger, True), _time("created_at"),
    )
    sa.Table(
        "command_uses", meta, _id(),
        _text("repo", 255), _int("number", sa.BigInteger), _text("login", 64),
        _text("command", 32), _time("used_at"),
        sa.Index("ix_command_uses_who", "repo", "number", "login", "command", "used_at"),
    )
    sa.Table(
        "pr_reminder_settings", meta,
        sa.Column("repo", sa.String(255), primary_key=True),
        sa.Column("number", sa.BigInteger(), primary_key=True, autoincrement=False),
        _time("snoozed_until", True), _flag("disabled"), _text("updated_by", 64),
        _time("updated_at"),
    )
    sa.Table(
        "upstream_filings", meta,
        sa.Column("tracking_repo", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        _int("issue_number", sa.BigInteger, True), _text("issue_url", 1024, True),
        _text("repo", 255), _int("number", sa.BigInteger), _text("filed_by", 64),
        _time("filed_at"),
    )
    sa.Table(
        "reminder_sweep_lock", meta,
        sa.Column("name", sa.String(64), primary_key=True),
        _text("owner", 255, True), _time("expires_at"), _time("acquired_at", True),
    )
    return meta


def upgrade() -> None:
    schema().create_all(op.get_bind(), checkfirst=False)


def downgrade() -> None:
    schema().drop_all(op.get_bind(), checkfirst=False)
