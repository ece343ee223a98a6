"""Engines for SQLite or PostgreSQL, and ``transaction``: the one way the app opens one."""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_CHECKPOINT_EVERY = 200  # transactions between background WAL checkpoints
SQLITE_BACKSTOP_CHECKPOINT_PAGES = 10_000  # SQLite's own checkpoint, if ours fall behind


def database_url(url: str | URL) -> URL:
    """``url`` with PostgreSQL pointed at psycopg 3 (the driver we install)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def make_engine(url: str | URL, *, sqlite_synchronous: str = "FULL", **kwargs: Any) -> Engine:
    """An engine for ``url``: SQLite (WAL, busy timeout, shareable across threads) or PostgreSQL.

    On SQLite every transaction starts with ``BEGIN IMMEDIATE``: it takes the single write lock
    up front, so a transaction that reads and then writes waits on the busy timeout instead of
    failing with "database is locked" when another connection wrote in between. Use
    ``transaction(engine)`` rather than ``engine.begin()`` for the busy paths (see there).

    ``sqlite_synchronous``: ``FULL`` (default) fsyncs every commit, so an acknowledged
    delivery survives a power cut; ``NORMAL`` survives a crash or kill of the process but not
    of the machine, and roughly doubles the commits a small disk sustains.
    """
    parsed = database_url(url)
    if parsed.get_backend_name() == "sqlite":
        if sqlite_synchronous not in ("FULL", "NORMAL"):
            raise ValueError("sqlite_synchronous must be FULL or NORMAL")
        return _sqlite_engine(parsed, sqlite_synchronous, **kwargs)
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(parsed, **kwargs)


def _sqlite_engine(url: URL, synchronous: str, **kwargs: Any) -> Engine:
    memory = url.database in (None, "", ":memory:")
    connect_args = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    if memory:  # one shared connection, or every checkout would see its own empty database
        kwargs.setdefault("poolclass", StaticPool)
    engine = create_engine(url, connect_args=connect_args, **kwargs)

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, below
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            # transaction() checkpoints in the background; this is only the backstop for
            # writers that bypass it.
            cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_BACKSTOP_CHECKPOINT_PAGES}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class FairLock:
    """A reentrant lock granted in arrival order.

    ``threading.Lock`` lets the thread that just released it take it again at once, so a
    worker looping over claim/complete could starve the webhook requests; here a released
    lock is handed to the longest waiter.
    """

    _HANDED_OVER = -1

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._owner: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return
            if self._owner is None:
                self._owner, self._depth = me, 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by the previous owner when it hands the lock over
        with self._mutex:
            self._owner, self._depth = me, 1

    def release(self) -> None:
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("release of a FairLock this thread does not hold")
            self._depth -= 1
            if self._depth:
                return
            if self._waiters:
                self._owner = self._HANDED_OVER  # nobody barges in before the next waiter
                self._waiters.popleft().release()
            else:
                self._owner = None

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class _SqliteTurns:
    """Per-engine state that lets the threads of one process share SQLite's single writer."""

    lock: FairLock = field(default_factory=FairLock)
    checkpointing: threading.Lock = field(default_factory=threading.Lock)
    commits: int = 0


_SQLITE_TURNS: weakref.WeakKeyDictionary[Engine, _SqliteTurns] = weakref.WeakKeyDictionary()
_TURNS_GUARD = threading.Lock()


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """``engine.begin()``; on SQLite, the threads of this process take turns at it.

    SQLite admits one writer, and a connection waiting for the lock polls with growing sleeps
    (up to 100 ms each), so under load some waiters lose the race again and again; waiting on
    an in-process ``FairLock`` instead hands the database over in arrival order. A WAL checkpoint
    (an fsync of the database file) runs in a background thread every few hundred
    transactions, instead of inside whichever commit crossed SQLite's threshold while every
    other writer waited for it.
    """
    turns = _turns(engine)
    if turns is None:
        with engine.begin() as conn:
            yield conn
        return
    with turns.lock:  # reentrant: a nested transaction fails on SQLite's timeout, no hang
        with engine.begin() as conn:
            yield conn
        turns.commits += 1
        due = turns.commits % SQLITE_CHECKPOINT_EVERY == 0
    if due and engine.url.database not in (None, "", ":memory:"):
        _checkpoint_soon(engine, turns)


def _turns(engine: Engine) -> _SqliteTurns | None:
    if engine.dialect.name != "sqlite":
        return None
    with _TURNS_GUARD:
        turns = _SQLITE_TURNS.get(engine)
        if turns is None:
            turns = _SQLITE_TURNS[engine] = _SqliteTurns()
    return turns


def _checkpoint_soon(engine: Engine, turns: _SqliteTurns) -> None:
    if not turns.checkpointing.acquire(blocking=False):
        return  # one is running already

    def checkpoint() -> None:
        try:
            raw = engine.raw_connection()  # no BEGIN: a checkpoint cannot run in a transaction
            try:
                raw.cursor().execute("PRAGMA wal_checkpoint(PASSIVE)")  # never blocks writers
            finally:
                raw.close()
        except Exception:
            log.warning("SQLite WAL checkpoint failed; SQLite's own will do it", exc_info=True)
        finally:
            turns.checkpointing.release()

    threading.Thread(target=checkpoint, name="alignbot-sqlite-checkpoint", daemon=True).start()
