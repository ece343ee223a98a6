"""``status_runs`` and ``status_results``: the default branch's check per commit.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "status_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True,
                  autoincrement=True),
        sa.Column("installation_id", sa.BigInteger(), nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("branch", sa.String(255), nullable=False),
        sa.Column("commit_sha", sa.String(64), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("candidate", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("failure", sa.Text(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("specs", sa.Integer(), nullable=False),
        sa.Column("programs", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("installation_id", "repo", "commit_sha",
                            name="ux_status_runs_installation_repo_commit"),
    )
    # the page reads a repository's last runs, newest first
    op.create_index("ix_status_runs_repo", "status_runs", ["repo", "installation_id", "id"])
    op.create_table(
        "status_results",
        sa.Column("run_id", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("op", sa.String(255), primary_key=True),
        sa.Column("dtype", sa.String(100), primary_key=True),
        sa.Column("kind", sa.String(64), primary_key=True),
        sa.Column("fingerprint", sa.String(64), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("status_results")
    op.drop_table("status_runs")
