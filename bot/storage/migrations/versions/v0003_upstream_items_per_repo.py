"""``upstream_items``: one row per upstream item and repository (``url`` was unique across
every installation, so a second tenant's ``/track`` of one upstream issue found the first
tenant's row).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

# Revision 1 left the column's UNIQUE unnamed; this names it as PostgreSQL does by default,
# so that the batch (a copy of the table on SQLite) can drop it on both.
_NAMES = {"uq": "%(table_name)s_%(column_0_name)s_key"}


def upgrade() -> None:
    with op.batch_alter_table("upstream_items", naming_convention=_NAMES) as batch:
        batch.drop_constraint("upstream_items_url_key", type_="unique")
        batch.create_index("ux_upstream_items_url_pr_repo", ["url", "pr_repo"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("upstream_items", naming_convention=_NAMES) as batch:
        batch.drop_index("ux_upstream_items_url_pr_repo")
        batch.create_unique_constraint("upstream_items_url_key", ["url"])
