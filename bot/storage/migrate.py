"""The one way the app creates or upgrades its database: ``migrate(engine)`` runs Alembic's
``upgrade head`` in one transaction.

A database that alignbot created before it had migrations (``create_all``: the tables, no
``alembic_version``) is adopted, not recreated: each of its tables is compared with revision 1
(columns, their nullability, primary keys), the tables an older version never created are
added from revision 1, and the database is stamped at revision 1 before the upgrade goes on.
A database whose tables differ from revision 1 is refused (:class:`SchemaMismatch`) and left
untouched.

Two processes starting at once cannot both migrate: on PostgreSQL the transaction first takes
an advisory lock; on SQLite it begins with ``BEGIN IMMEDIATE`` (the single writer lock).
"""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, Inspector, Table, func, inspect, select

from .engine import transaction
from .migrations.versions.v0001_initial import schema as initial_schema

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
INITIAL = "0001"
VERSION_TABLE = "alembic_version"
_LOCK_ID = 0x616C69676E626F74  # pg_advisory_xact_lock key: "alignbot"


class SchemaMismatch(RuntimeError):
    """The database has alignbot's tables but not as revision 1 defines them."""


def alembic_config(connection: Connection | None = None, scripts: Path = MIGRATIONS) -> Config:
    """Alembic's configuration, in code: the scripts (this package's ``migrations/``), and the
    connection ``env.py`` runs on."""
    config = Config()
    config.set_main_option("script_location", str(scripts))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, revision: str = "head", *, scripts: Path = MIGRATIONS
            ) -> str | None:
    """Bring the database to ``revision`` (a new one is created, a pre-migration one adopted)
    in one transaction; returns the revision it is at. ``scripts``: another migration
    environment (tests)."""
    with transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(_LOCK_ID)))
        config = alembic_config(conn, scripts)
        adopt_unversioned(conn, config)
        command.upgrade(config, revision)
        return current_revision(conn)


def current_revision(conn: Connection) -> str | None:
    """The revision the database is stamped at; None when it has no ``alembic_version``."""
    return MigrationContext.configure(conn).get_current_revision()


def adopt_unversioned(conn: Connection, config: Config) -> bool:
    """Stamp a database created by ``create_all`` (before migrations) at revision 1, adding the
    revision-1 tables it lacks; False (and nothing done) for a new or versioned database."""
    inspector = inspect(conn)
    present = set(inspector.get_table_names())
    if VERSION_TABLE in present:
        return False
    initial = initial_schema()
    ours = sorted(present & set(initial.tables))
    if not ours:
        return False
    problems = [problem for name in ours
                for problem in differences(inspector, initial.tables[name])]
    if problems:
        raise SchemaMismatch("the database has alignbot's tables, but not as its first "
                             "migration defines them, so it was left as it is:\n- "
                             + "\n- ".join(problems))
    missing = [table for table in initial.sorted_tables if table.name not in present]
    initial.create_all(conn, tables=missing, checkfirst=False)
    command.stamp(config, INITIAL)
    log.info("adopted a database created before migrations: %d tables kept, %d created, "
             "stamped at revision %s", len(ours), len(missing), INITIAL)
    return True


def differences(inspector: Inspector, expected: Table) -> list[str]:
    """How the database's table of that name differs from ``expected``: missing or extra
    columns, nullability, primary key."""
    name = expected.name
    found = {column["name"]: column for column in inspector.get_columns(name)}
    problems = [f"{name}.{column.name} is missing" for column in expected.columns
                if column.name not in found]
    problems += [f"{name}.{extra} is not in revision {INITIAL}"
                 for extra in sorted(set(found) - set(expected.columns.keys()))]
    for column in expected.columns:
        if column.name in found and bool(found[column.name]["nullable"]) != column.nullable:
            problems.append(f"{name}.{column.name} is "
                            f"{'' if found[column.name]['nullable'] else 'NOT '}NULL")
    primary = inspector.get_pk_constraint(name).get("constrained_columns") or []
    if list(primary) != [column.name for column in expected.primary_key.columns]:
        problems.append(f"{name} has the primary key ({', '.join(primary)})")
    return problems


def new_revision(engine: Engine, message: str) -> None:
    """For developers: draft a revision in ``migrations/versions`` from the difference
    between ``Base.metadata`` and ``engine``'s database (which must be at head)."""
    with transaction(engine) as conn:
        command.revision(alembic_config(conn), message=message, autogenerate=True)
