"""Alembic's environment: run only through ``alignbot.bot.storage.migrate``, which passes the
connection (already in a transaction, and on PostgreSQL holding the migration lock) in
``config.attributes["connection"]``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from alignbot.bot.storage import Base


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if context.is_offline_mode() or not isinstance(connection, Connection):
        raise RuntimeError("alignbot's migrations run online, through "
                           "alignbot.bot.storage.migrate(engine), on a connection it passes in")
    context.configure(connection=connection, target_metadata=Base.metadata,
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
