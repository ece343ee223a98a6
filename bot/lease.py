"""Named leases in the database: one holder at a time across processes and replicas, until
the lease expires (the upstream digest of a tracking repository is written under one)."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import Engine, or_, select, update

from .storage import LOCKS, insert_ignore, transaction, utcnow

LEASE_TTL = timedelta(minutes=10)


class LeaseLost(Exception):
    """Another owner holds the lease now: stop at once, write nothing more."""


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    """A lease on a database row with an expiry.

    Taken with one ``UPDATE … WHERE name = ? AND (expires_at < now OR owner = me)``: on
    PostgreSQL a concurrent taker waits on the row lock and then finds the lease unexpired; on
    SQLite the statement runs under the single writer lock. A holder renews it (``guard``)
    before every write, at most every ``ttl / 3``; a holder that stalled past the expiry finds
    the lease gone and stops (:class:`LeaseLost`) instead of writing beside the new holder.
    """

    def __init__(self, engine: Engine, owner: str, *, name: str,
                 ttl: timedelta = LEASE_TTL, clock: Callable[[], datetime] = utcnow) -> None:
        if len(name) > 64:
            raise ValueError(f"a lease name has at most 64 characters: {name!r}")
        self.engine, self.owner, self.name, self.ttl, self.clock = engine, owner, name, ttl, clock
        self._renewed = 0.0

    def acquire(self) -> bool:
        now = self.clock()
        with transaction(self.engine) as conn:
            insert_ignore(conn, LOCKS, {"name": self.name, "owner": None, "acquired_at": None,
                                        "expires_at": now - timedelta(seconds=1)},
                          keys=["name"])
            taken = conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name,
                or_(LOCKS.c.expires_at < now, LOCKS.c.owner == self.owner),
            ).values(owner=self.owner, expires_at=now + self.ttl, acquired_at=now)).rowcount
        self._renewed = time.monotonic()
        return taken == 1

    def renew(self) -> bool:
        now = self.clock()
        with transaction(self.engine) as conn:
            kept = conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name, LOCKS.c.owner == self.owner,
            ).values(expires_at=now + self.ttl)).rowcount
        self._renewed = time.monotonic()
        return kept == 1

    def guard(self) -> None:
        """Renew when a third of the lease has passed; raise LeaseLost if it is gone."""
        if time.monotonic() - self._renewed >= self.ttl.total_seconds() / 3 \
                and not self.renew():
            raise LeaseLost(f"the {self.name} lease passed to another owner")

    def release(self) -> None:
        now = self.clock()
        with transaction(self.engine) as conn:
            conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name, LOCKS.c.owner == self.owner,
            ).values(owner=None, expires_at=now - timedelta(seconds=1)))

    def holder(self) -> str | None:
        with transaction(self.engine) as conn:
            row = conn.execute(select(LOCKS.c.owner, LOCKS.c.expires_at).where(
                LOCKS.c.name == self.name)).first()
        return row.owner if row is not None and row.expires_at >= self.clock() else None
