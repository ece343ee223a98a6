"""The reminder feature's rows, read and written: each repository's sweep state (period,
phase, cursor, next check), reminders sent, ``/remind`` settings, watched upstream items, and
the live installations whose repositories are swept."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.engine import Connection

from ..storage import (
    INSTALLATIONS,
    PR_SETTINGS,
    SENT,
    SWEEPS,
    UPSTREAM,
    Phase,
    UpstreamState,
    transaction,
    upsert,
    utcnow,
)
from .render import Reminder


@dataclass
class RepoState:
    repo: str
    installation_id: int
    period: str | None = None
    phase: Phase = Phase.DONE
    cursor: dict[str, Any] = field(default_factory=dict)
    next_check_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    posted: int = 0
    error: str | None = None
    digest_issue: int | None = None

    def due(self, now: datetime) -> bool:
        return self.next_check_at is None or now >= self.next_check_at


class Store:
    """The feature's rows: sweep states, reminders sent, snooze settings, upstream items."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def state(self, repo: str, installation_id: int) -> RepoState:
        with transaction(self.engine) as conn:
            row = conn.execute(select(SWEEPS).where(SWEEPS.c.repo == repo)).first()
        if row is None:
            return RepoState(repo, installation_id)
        values = dict(row._mapping)
        values.pop("updated_at")
        values["phase"] = Phase(values["phase"])
        values["cursor"] = dict(values["cursor"] or {})
        values["installation_id"] = installation_id
        return RepoState(**values)

    def save(self, state: RepoState, conn: Connection | None = None) -> None:
        if conn is None:
            with transaction(self.engine) as own:
                self.save(state, own)
            return
        values = {**state.__dict__, "phase": state.phase.value, "updated_at": utcnow()}
        changes = {k: v for k, v in values.items() if k not in ("repo", "digest_issue")}
        upsert(conn, SWEEPS, values, keys=["repo"], update=changes)

    def next_checks(self) -> dict[str, datetime | None]:
        """When each repository that has a sweep state is due next (None: now)."""
        with transaction(self.engine) as conn:
            rows = conn.execute(select(SWEEPS.c.repo, SWEEPS.c.next_check_at))
            return {str(repo): when for repo, when in rows}

    def digest_issue(self, repo: str) -> int | None:
        with transaction(self.engine) as conn:
            found = conn.execute(select(SWEEPS.c.digest_issue).where(SWEEPS.c.repo == repo))
            return found.scalar()

    def set_digest_issue(self, repo: str, installation_id: int, number: int) -> None:
        """Only this writes ``digest_issue`` (``save`` leaves it alone)."""
        values = {"repo": repo, "installation_id": installation_id, "phase": Phase.DONE.value,
                  "cursor": {}, "posted": 0, "digest_issue": number, "updated_at": utcnow()}
        with transaction(self.engine) as conn:
            upsert(conn, SWEEPS, values, keys=["repo"], update={"digest_issue": number})

    def record(self, state: RepoState, reminder: Reminder, comment_id: int,
               sent_at: datetime) -> None:
        """The reminder and the sweep's state (its journal entry cleared), in one
        transaction."""
        with transaction(self.engine) as conn:
            exists = conn.execute(select(SENT.c.id).where(
                SENT.c.repo == state.repo, SENT.c.number == reminder.number,
                SENT.c.period == reminder.period)).first()
            if exists is None:
                conn.execute(SENT.insert().values(
                    repo=state.repo, number=reminder.number, period=reminder.period,
                    sent_at=sent_at, kind=reminder.kind.value, comment_id=comment_id,
                    count=reminder.count))
            self.save(state, conn)

    def sent(self, repo: str, number: int | None = None) -> dict[int, list[dict[str, Any]]]:
        """Reminders sent in ``repo`` (one pull request's, with ``number``), oldest first."""
        query = select(SENT).where(SENT.c.repo == repo).order_by(SENT.c.sent_at, SENT.c.id)
        if number is not None:
            query = query.where(SENT.c.number == number)
        with transaction(self.engine) as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        out: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            out.setdefault(row["number"], []).append(row)
        return out

    def reminded_since(self, repo: str, since: datetime, after: int, period: str) -> list[int]:
        """Pull requests reminded at or after ``since`` but not yet in ``period``, numbered
        above ``after``."""
        this_period = select(SENT.c.number).where(SENT.c.repo == repo, SENT.c.period == period)
        query = (select(SENT.c.number).where(SENT.c.repo == repo, SENT.c.sent_at >= since,
                                             SENT.c.number > after,
                                             SENT.c.number.not_in(this_period))
                 .group_by(SENT.c.number).order_by(SENT.c.number))
        with transaction(self.engine) as conn:
            return [int(n) for n in conn.execute(query).scalars()]

    def settings(self, repo: str) -> dict[int, dict[str, Any]]:
        with transaction(self.engine) as conn:
            rows = conn.execute(select(PR_SETTINGS).where(PR_SETTINGS.c.repo == repo))
            return {int(r.number): dict(r._mapping) for r in rows}

    def upstream_due(self, pr_repo: str, since: datetime) -> list[dict[str, Any]]:
        """Open items of ``pr_repo`` not checked since ``since``."""
        query = select(UPSTREAM).where(
            UPSTREAM.c.pr_repo == pr_repo, UPSTREAM.c.state == UpstreamState.OPEN.value,
            (UPSTREAM.c.last_checked.is_(None)) | (UPSTREAM.c.last_checked < since),
        ).order_by(UPSTREAM.c.id)
        with transaction(self.engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def update_upstream(self, item_id: int, **values: Any) -> None:
        with transaction(self.engine) as conn:
            conn.execute(update(UPSTREAM).where(UPSTREAM.c.id == item_id).values(**values))

    def digest_items(self, tracking_repo: str) -> list[dict[str, Any]]:
        query = select(UPSTREAM).where(UPSTREAM.c.tracking_repo == tracking_repo
                                       ).order_by(UPSTREAM.c.created_at, UPSTREAM.c.id)
        with transaction(self.engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def has_upstream(self, pr_repo: str) -> bool:
        with transaction(self.engine) as conn:
            return conn.execute(select(UPSTREAM.c.id).where(
                UPSTREAM.c.pr_repo == pr_repo).limit(1)).first() is not None

    def installation_of(self, repo: str) -> int | None:
        """The installation that holds ``repo``, from the ``installations`` table."""
        with transaction(self.engine) as conn:
            rows = conn.execute(select(INSTALLATIONS.c.id, INSTALLATIONS.c.repositories).where(
                INSTALLATIONS.c.deleted.is_(False), INSTALLATIONS.c.suspended.is_(False)))
            for installation_id, repositories in rows:
                if repo.lower() in {r.lower() for r in repositories or []}:
                    return int(installation_id)
        return None



def installed_repos(engine: Engine) -> list[tuple[int, str]]:
    """(installation id, owner/name) of every repository of every live installation: a
    deleted or suspended installation has none."""
    with transaction(engine) as conn:
        rows = conn.execute(select(INSTALLATIONS.c.id, INSTALLATIONS.c.repositories).where(
            INSTALLATIONS.c.deleted.is_(False), INSTALLATIONS.c.suspended.is_(False),
        ).order_by(INSTALLATIONS.c.id))
        return [(int(i), name) for i, names in rows for name in sorted(names or [])]
