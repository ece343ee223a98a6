"""Insert-or-update and insert-or-ignore, the same call on SQLite and PostgreSQL.

Both backends know ``INSERT … ON CONFLICT (keys) DO UPDATE | DO NOTHING`` (SQLite since
3.24, with ``RETURNING`` since 3.35), a single statement: no read-then-write race, and on
PostgreSQL the conflicting row is locked until the transaction ends. SQLAlchemy builds it per
dialect; this module is the only place that picks the dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

_INSERTS: dict[str, Callable[[Table], Any]] = {
    "postgresql": postgresql.insert,
    "sqlite": sqlite.insert,
}


def _insert(conn: Connection, table: Table) -> Any:
    try:
        return _INSERTS[conn.dialect.name](table)
    except KeyError:
        raise NotImplementedError(f"no upsert for the {conn.dialect.name} dialect") from None


def upsert(conn: Connection, table: Table, values: Mapping[str, Any], *, keys: Sequence[str],
           update: Mapping[str, Any] | None = None) -> None:
    """Insert ``values``; where a row with the same ``keys`` (a primary key or unique
    constraint) exists, set ``update`` on it instead: by default every value but the keys.
    ``update`` may hold expressions on the existing row (``{"calls": T.c.calls + 1}``)."""
    changes = dict(update) if update is not None else {
        name: value for name, value in values.items() if name not in keys}
    if not changes:
        raise ValueError("an upsert needs something to update; use insert_ignore")
    statement = _insert(conn, table).values(**values)
    conn.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=changes))


def insert_ignore(conn: Connection, table: Table, values: Mapping[str, Any], *,
                  keys: Sequence[str]) -> bool:
    """Insert ``values`` unless a row with the same ``keys`` exists; True when inserted.

    Told by the row ``RETURNING`` gives back, not by ``rowcount``: on PostgreSQL an insert
    into a table with a generated id returns that id, and its ``rowcount`` is -1 either way.
    """
    statement = (_insert(conn, table).values(**values)
                 .on_conflict_do_nothing(index_elements=list(keys))
                 .returning(*table.primary_key.columns))
    return conn.execute(statement).first() is not None
