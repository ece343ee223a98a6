"""bot/lease.py: named leases in the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from alignbot.bot.lease import Lease
from alignbot.bot.storage import make_engine, migrate


def test_the_lease_is_exclusive_until_it_expires(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lease.db'}")
    migrate(engine)
    now = [datetime(2025, 6, 2, 9, tzinfo=UTC)]
    a, b = (Lease(engine, name, name="test", ttl=timedelta(minutes=10), clock=lambda: now[0])
            for name in ("a", "b"))
    assert a.acquire() and not b.acquire() and a.holder() == "a"
    now[0] += timedelta(minutes=11)
    assert b.acquire() and not a.renew()
    b.release()
    assert a.acquire()


def test_a_lease_name_fits_its_column() -> None:
    with pytest.raises(ValueError, match="64 characters"):
        Lease(None, "me", name="x" * 65)  # type: ignore[arg-type]
