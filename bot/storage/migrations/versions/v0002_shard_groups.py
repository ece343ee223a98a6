"""``shard_groups``: checks split into shard jobs.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "shard_groups",
        sa.Column("parent_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("jobs", sa.JSON(), nullable=False),
        sa.Column("ended", sa.String(16), nullable=True),
        sa.Column("ended_by", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
    )
    # every align job looks for the unended groups of its pull request
    op.create_index("ix_shard_groups_key_ended", "shard_groups", ["key", "ended"])


def downgrade() -> None:
    op.drop_table("shard_groups")
