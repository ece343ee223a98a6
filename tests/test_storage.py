"""bot/storage: one definition per table, the portable upsert, and migrations that keep the
rows of a database created before them.

The "before" database is built from tests/fixtures/schema_pre_migrations.<dialect>.sql: the
DDL that `create_all` emitted at commit 36477b8 (compiled from that code, not hand-written).
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import (
    Engine,
    MetaData,
    Table,
    create_mock_engine,
    insert,
    inspect,
    select,
    text,
)

import alignbot.bot
from alignbot.bot.commands import register_upstream, upstream_item
from alignbot.bot.queue import JobRequest, JobState, SqlJobQueue
from alignbot.bot.reminders import Store
from alignbot.bot.storage import (
    CALLS,
    DELIVERIES,
    FILINGS,
    INSTALLATIONS,
    JOBS,
    LOCKS,
    OK_TO_TEST,
    PR_SETTINGS,
    REPLIES,
    SENT,
    SWEEPS,
    UPSTREAM,
    USES,
    Base,
    Phase,
    SchemaMismatch,
    current_revision,
    insert_ignore,
    make_engine,
    migrate,
    transaction,
    upsert,
)
from alignbot.bot.storage.migrate import MIGRATIONS
from alignbot.bot.storage.migrations.versions.v0001_initial import schema as initial_schema
from alignbot.bot.trust import record_ok

FIXTURES = Path(__file__).parent / "fixtures"
T0 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
TABLES = {
    "deliveries", "jobs", "installations", "command_replies", "command_uses",
    "pr_reminder_settings", "upstream_filings", "reminders_sent", "reminder_sweeps",
    "reminder_api_calls", "upstream_items", "pr_ok_to_test", "reminder_sweep_lock",
}  # revision 1's
LATER_TABLES = {"shard_groups", "baselines", "status_runs", "status_results"}  # revisions 2, 4, 5
CHANGED_LATER = {"upstream_items"}  # revision 3: one row per upstream item and repository
HEAD = "0005"


@pytest.fixture()
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def _dialect(engine: Engine) -> str:
    return engine.dialect.name


def legacy_ddl(dialect: str) -> list[str]:
    """The statements of the pre-migration schema for ``dialect``."""
    lines = (FIXTURES / f"schema_pre_migrations.{dialect}.sql").read_text().splitlines()
    body = "\n".join(line for line in lines if not line.startswith("--"))
    return [statement.strip() for statement in body.split(";") if statement.strip()]


def create_legacy(engine: Engine, only: set[str] | None = None) -> None:
    """The database as the code before migrations created it (``only``: just these tables)."""
    with transaction(engine) as conn:
        for statement in legacy_ddl(_dialect(engine)):
            table = statement.split(" ON ")[-1] if " INDEX " in statement else statement
            name = table.replace("CREATE TABLE ", "").split()[0].split("(")[0]
            if only is None or name in only:
                conn.exec_driver_sql(statement)


def fill(engine: Engine) -> None:
    """Jobs in every state, deliveries, installations and reminder state, as a running
    installation has them."""
    report = {"findings": [], "complete": True}
    with transaction(engine) as conn:
        conn.execute(insert(DELIVERIES), [
            {"id": f"d-{i}", "event": "pull_request", "action": "opened",
             "installation_id": 7, "jobs": 1, "received_at": T0 + timedelta(minutes=i)}
            for i in range(3)])
        conn.execute(insert(JOBS), [
            {"kind": "align", "key": "o/r#1", "payload": {"head_sha": f"sha{i}"},
             "state": state, "attempts": int(state != "queued"), "error": None,
             "result": {"report": report} if state == "done" else None,
             "delivery_id": f"d-{i % 3}", "created_at": T0, "updated_at": T0,
             "available_at": T0, "started_at": None if state == "queued" else T0,
             "worker": None if state == "queued" else "w1"}
            for i, state in enumerate(["done", "superseded", "failed", "done", "queued"])])
        conn.execute(insert(INSTALLATIONS).values(
            id=7, account_login="org", account_type="Organization",
            repository_selection="selected", repositories=["org/a", "org/b"],
            suspended=False, deleted=False, created_at=T0, updated_at=T0))
        conn.execute(insert(SENT).values(
            repo="org/a", number=3, period="2025-06-02", sent_at=T0, kind="waiting-on-author",
            comment_id=99, count=1))
        conn.execute(insert(SWEEPS).values(
            repo="org/a", installation_id=7, period="2025-06-02", phase="listing",
            cursor={"before": "2025-05-01T00:00:00Z", "posting": None}, next_check_at=None,
            started_at=T0, finished_at=None, posted=1, error=None, digest_issue=None,
            updated_at=T0))
        conn.execute(insert(CALLS).values(installation_id=7, hour=T0, calls=12, writes=1))
        conn.execute(insert(PR_SETTINGS).values(
            repo="org/a", number=4, snoozed_until=T0 + timedelta(days=3), disabled=False,
            updated_by="alice", updated_at=T0))
        conn.execute(insert(UPSTREAM).values(
            url="https://github.com/pytorch/pytorch/issues/1", repo="pytorch/pytorch",
            number=1, kind="issue", registered_by="alice", pr_repo="org/a", pr_number=3,
            created_at=T0, state="open"))
        conn.execute(insert(FILINGS).values(
            tracking_repo="org/t", fingerprint="f" * 16, issue_number=5,
            issue_url="https://github.com/org/t/issues/5", repo="org/a", number=3,
            filed_by="alice", filed_at=T0))
        conn.execute(insert(OK_TO_TEST).values(
            repo="org/a", number=3, head_sha="sha0", trusted_by="bob", created_at=T0))
        conn.execute(insert(REPLIES).values(
            source="comment", source_id=11, line_hash="h" * 64, repo="org/a", number=3,
            actor="bob", command="align", accepted=True, reaction="+1", reacted=True,
            reply_body="ok", reply_id=12, created_at=T0))
        conn.execute(insert(USES).values(
            repo="org/a", number=3, login="carol", command="align", used_at=T0))
        conn.execute(insert(LOCKS).values(
            name="reminder-sweep", owner=None, expires_at=T0, acquired_at=None))


def snapshot(engine: Engine, tables: set[str] = TABLES) -> dict[str, list[dict[str, Any]]]:
    """Every row of ``tables``, read through the app's table definitions."""
    rows = {}
    with transaction(engine) as conn:
        for table in Base.metadata.sorted_tables:
            if table.name in tables:
                query = select(table).order_by(*table.primary_key.columns)
                rows[table.name] = [dict(row._mapping) for row in conn.execute(query)]
    return rows


def emitted_ddl(metadata: MetaData, url: str, tables: set[str]) -> list[str]:
    """The statements ``create_all`` emits for ``tables`` of ``metadata`` on the dialect of
    ``url``."""
    emitted: list[str] = []

    def record(sql: Any, *args: Any, **kwargs: Any) -> None:
        emitted.append(str(sql.compile(dialect=mock.dialect)).strip())

    mock = create_mock_engine(url, record)
    metadata.create_all(mock, tables=[metadata.tables[name] for name in tables],
                        checkfirst=False)
    return emitted


def schema_differences(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


# --------------------------------------------------------------------------- one definition


def test_every_table_is_defined_once_in_the_storage_package() -> None:
    for module in pkgutil.walk_packages(alignbot.bot.__path__, "alignbot.bot."):
        if ".migrations" not in module.name and not module.name.endswith(".__main__"):
            importlib.import_module(module.name)
    assert set(Base.metadata.tables) == TABLES | LATER_TABLES
    for mapper in Base.registry.mappers:
        assert mapper.class_.__module__.startswith("alignbot.bot.storage."), mapper.class_
    # no module holds a Table of its own (a second MetaData, a copy of a table)
    for name, module in list(sys.modules.items()):
        if name == "alignbot.bot" or name.startswith("alignbot.bot."):
            for value in vars(module).values():
                if isinstance(value, Table):
                    assert Base.metadata.tables.get(value.name) is value, (name, value.name)


def test_revision_1_builds_exactly_the_schema_of_before() -> None:
    """The frozen revision 1 and today's tables both emit the DDL of the old code, statement
    for statement, on both dialects."""
    same = TABLES - CHANGED_LATER
    for dialect, url in (("sqlite", "sqlite://"), ("postgresql", "postgresql+psycopg://")):
        assert sorted(emitted_ddl(initial_schema(), url, TABLES)) == sorted(legacy_ddl(dialect))
        assert sorted(emitted_ddl(Base.metadata, url, same)) == sorted(
            emitted_ddl(initial_schema(), url, same))


# --------------------------------------------------------------------------- migrations


def test_a_new_database_is_created_at_head_and_matches_the_tables(engine: Engine) -> None:
    assert migrate(engine) == HEAD
    assert migrate(engine) == HEAD  # a second start-up does nothing
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert schema_differences(engine) == []


def test_a_database_from_before_migrations_keeps_every_row(engine: Engine) -> None:
    create_legacy(engine)
    fill(engine)
    before = snapshot(engine)
    assert all(before.values())

    assert migrate(engine) == HEAD

    assert snapshot(engine) == before
    assert schema_differences(engine) == []
    # and the app carries on with them
    queue = SqlJobQueue(engine)
    assert [job.payload["head_sha"] for job in queue.latest("align", "o/r#1")] == \
        ["sha3", "sha0"]
    claimed = queue.claim("w2")
    assert claimed is not None and claimed.payload == {"head_sha": "sha4"}
    assert queue.enqueue(JobRequest("align", "o/r#2")) > claimed.id
    state = Store(engine).state("org/a", 7)
    assert state.phase == Phase.LISTING and state.cursor["before"] == "2025-05-01T00:00:00Z"


def test_a_create_all_database_is_stamped_not_recreated(engine: Engine) -> None:
    initial_schema().create_all(engine)  # what every start-up did before migrations
    fill(engine)
    before = snapshot(engine)
    with engine.connect() as conn:
        assert current_revision(conn) is None
    assert migrate(engine) == HEAD
    with engine.connect() as conn:
        assert current_revision(conn) == HEAD
    assert snapshot(engine) == before


def test_an_older_database_gets_the_tables_it_lacked(engine: Engine) -> None:
    """A database of a version that had only bot/models.py's tables."""
    old = {"deliveries", "jobs", "installations"}
    create_legacy(engine, only=old)
    with transaction(engine) as conn:
        conn.execute(insert(JOBS).values(
            kind="align", key="o/r#1", payload={}, state="done", attempts=1,
            created_at=T0, updated_at=T0, available_at=T0))
    before = snapshot(engine, old)
    assert migrate(engine) == HEAD
    assert snapshot(engine, old) == before
    assert schema_differences(engine) == []


def test_a_database_that_differs_from_revision_1_is_refused_untouched(engine: Engine) -> None:
    with transaction(engine) as conn:
        conn.exec_driver_sql("CREATE TABLE jobs (id INTEGER NOT NULL PRIMARY KEY, kind "
                             "VARCHAR(64) NOT NULL, color VARCHAR(8))")
    with pytest.raises(SchemaMismatch) as refused:
        migrate(engine)
    message = str(refused.value)
    assert "jobs.key is missing" in message and "jobs.color is not in revision" in message
    assert set(inspect(engine).get_table_names()) == {"jobs"}


def test_two_processes_starting_at_once_migrate_once(database_url: str) -> None:
    engines = [make_engine(database_url) for _ in range(2)]
    create_legacy(engines[0])
    fill(engines[0])
    before = snapshot(engines[0])
    results: list[str | None] = []
    errors: list[BaseException] = []

    def start(engine: Engine) -> None:
        try:
            results.append(migrate(engine))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=start, args=(engine,)) for engine in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and results == [HEAD, HEAD]
    assert snapshot(engines[0]) == before
    for engine in engines:
        engine.dispose()


SECOND_REVISION = '''
"""test only: jobs.priority"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("priority", sa.Integer(), nullable=False,
                                    server_default="0"))


def downgrade() -> None:
    op.drop_column("jobs", "priority")
'''


def test_a_later_revision_upgrades_a_database_from_before_migrations(
        engine: Engine, tmp_path: Path) -> None:
    scripts = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "v0006_priority.py").write_text(SECOND_REVISION)
    create_legacy(engine)
    fill(engine)
    before = snapshot(engine)

    assert migrate(engine, scripts=scripts) == "0006"

    assert snapshot(engine) == before  # the app's tables do not read the new column
    with transaction(engine) as conn:
        priorities = conn.execute(text("SELECT priority FROM jobs")).scalars().all()
    assert priorities == [0] * 5


@pytest.mark.slow
def test_the_service_start_up_adopts_a_database_from_before_migrations(
        make_service: Any, tmp_path: Path) -> None:
    """`alignbot serve` on a database the previous release created and filled."""
    folder = tmp_path / "service"
    folder.mkdir()
    engine = make_engine(f"sqlite:///{folder / 'alignbot.db'}")
    create_legacy(engine)
    fill(engine)
    with transaction(engine) as conn:  # nothing the worker would pick up and change
        conn.execute(JOBS.update().where(JOBS.c.state == "queued").values(state="failed"))
    before = snapshot(engine)
    engine.dispose()

    service = make_service(folder)
    service.stop()

    engine = make_engine(f"sqlite:///{folder / 'alignbot.db'}")
    with engine.connect() as conn:
        assert current_revision(conn) == HEAD
    assert snapshot(engine) == before
    engine.dispose()


# --------------------------------------------------------------------------- upsert


def test_upsert_inserts_then_updates(engine: Engine) -> None:
    migrate(engine)
    key = {"repo": "org/a", "number": 4}
    with transaction(engine) as conn:
        upsert(conn, PR_SETTINGS, {**key, "disabled": True, "updated_by": "a",
                                   "updated_at": T0}, keys=list(key))
        upsert(conn, PR_SETTINGS, {**key, "disabled": False, "updated_by": "b",
                                   "updated_at": T0}, keys=list(key))
        upsert(conn, PR_SETTINGS, {"repo": "org/a", "number": 5, "updated_by": "c",
                                   "updated_at": T0}, keys=list(key), update={"disabled": True})
        rows = conn.execute(select(PR_SETTINGS.c.number, PR_SETTINGS.c.disabled,
                                   PR_SETTINGS.c.updated_by).order_by("number")).all()
    assert [tuple(row) for row in rows] == [(4, False, "b"), (5, False, "c")]


def test_upsert_updates_with_expressions_on_a_composite_key(engine: Engine) -> None:
    migrate(engine)
    keys = ["installation_id", "hour"]
    with transaction(engine) as conn:
        for calls in (3, 4, 5):
            upsert(conn, CALLS, {"installation_id": 7, "hour": T0, "calls": calls,
                                 "writes": 1}, keys=keys,
                   update={"calls": CALLS.c.calls + calls, "writes": CALLS.c.writes + 1})
        upsert(conn, CALLS, {"installation_id": 7, "hour": T0 + timedelta(hours=1),
                             "calls": 1, "writes": 0}, keys=keys,
               update={"calls": CALLS.c.calls + 1})
        rows = conn.execute(select(CALLS.c.hour, CALLS.c.calls, CALLS.c.writes)
                            .order_by(CALLS.c.hour)).all()
    assert [tuple(row) for row in rows] == [(T0, 12, 3), (T0 + timedelta(hours=1), 1, 0)]


def test_insert_ignore_keeps_the_first_row(engine: Engine) -> None:
    migrate(engine)
    values = {"repo": "org/a", "number": 3, "head_sha": "abc", "created_at": T0}
    keys = ["repo", "number", "head_sha"]
    with transaction(engine) as conn:
        assert insert_ignore(conn, OK_TO_TEST, {**values, "trusted_by": "bob"}, keys=keys)
        assert not insert_ignore(conn, OK_TO_TEST, {**values, "trusted_by": "eve"}, keys=keys)
        assert insert_ignore(conn, OK_TO_TEST, {**values, "head_sha": "def",
                                                "trusted_by": "eve"}, keys=keys)
        rows = conn.execute(select(OK_TO_TEST.c.head_sha, OK_TO_TEST.c.trusted_by)
                            .order_by(OK_TO_TEST.c.id)).all()
    assert [tuple(row) for row in rows] == [("abc", "bob"), ("def", "eve")]


def test_second_ok_to_test_and_second_watch_of_a_url_change_nothing(engine: Engine) -> None:
    """On PostgreSQL the generated id's RETURNING once made both answer True again."""
    migrate(engine)
    assert record_ok(engine, "org/a", 3, "abc", "bob")
    assert not record_ok(engine, "org/a", 3, "abc", "eve")
    watch = {"url": "https://github.com/pytorch/pytorch/issues/9", "repo": "pytorch/pytorch",
             "number": 9, "kind": "issue", "pr_repo": "org/a", "pr_number": 3}
    assert register_upstream(engine, registered_by="bob", **watch)
    assert not register_upstream(engine, registered_by="eve", **watch)
    item = upstream_item(engine, watch["url"], "org/a")
    assert item is not None and item.registered_by == "bob"


def test_upsert_needs_something_to_update(engine: Engine) -> None:
    migrate(engine)
    with transaction(engine) as conn, pytest.raises(ValueError, match="insert_ignore"):
        upsert(conn, LOCKS, {"name": "x"}, keys=["name"])


def test_latest_jobs_newest_first_of_one_kind_key_and_state(engine: Engine) -> None:
    migrate(engine)
    fill(engine)
    queue = SqlJobQueue(engine)
    assert [job.id for job in queue.latest("align", "o/r#1")] == [4, 1]
    assert [job.id for job in queue.latest("align", "o/r#1", JobState.FAILED)] == [3]
    assert [job.id for job in queue.latest("align", "o/r#1", limit=1)] == [4]
    assert queue.latest("align", "o/r#9") == []


def test_revision_3_keeps_the_watched_items_and_lets_two_repositories_watch_one(
        engine: Engine) -> None:
    migrate(engine, "0002")
    watch = {"url": "https://github.com/pytorch/pytorch/issues/9", "repo": "pytorch/pytorch",
             "number": 9, "kind": "issue", "pr_number": 3, "created_at": T0, "state": "open"}
    with transaction(engine) as conn:
        conn.execute(insert(UPSTREAM).values(**watch, pr_repo="org/a", registered_by="bob"))
    assert migrate(engine) == HEAD
    assert schema_differences(engine) == []
    assert register_upstream(engine, registered_by="eve", **{
        k: v for k, v in watch.items() if k not in ("created_at", "state")}, pr_repo="other/b")
    with transaction(engine) as conn:
        rows = conn.execute(select(UPSTREAM.c.pr_repo, UPSTREAM.c.registered_by)
                            .order_by(UPSTREAM.c.id)).all()
    assert [tuple(row) for row in rows] == [("org/a", "bob"), ("other/b", "eve")]
