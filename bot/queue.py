"""The durable job queue behind a small interface (SQL now, Celery later)."""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import (
    JSON,
    ColumnElement,
    Connection,
    Engine,
    Row,
    Update,
    bindparam,
    func,
    insert,
    select,
    update,
)

from alignbot.bot.storage import ACTIVE_STATES, JOBS, JobState, UtcDateTime, transaction, utcnow

__all__ = ["ACTIVE_STATES", "JOBS", "JobQueue", "JobRecord", "JobRequest", "JobState",
           "SqlJobQueue"]
# The queue's own bookkeeping of transient failures, kept in the payload column (no schema
# change) and never shown to handlers: {"failures": n, "first": ISO time of the first}.
RETRY_KEY = "_alignbot_retry"
DEFAULT_LEASE = 60.0  # seconds a running job stays its worker's without a heartbeat


@dataclass(frozen=True)
class JobRequest:
    """What a webhook handler asks for: run ``kind`` on ``payload``.

    ``key`` names what the job is about (e.g. ``owner/repo#12``); with ``supersede`` the new job
    replaces every queued or running job of the same kind and key (a newer push wins); with
    ``dedupe`` nothing is enqueued while a job of the same kind and key is queued or running
    (that job's id is returned), so such jobs of one key never run side by side. A superseding
    request also supersedes the jobs of the same key of the kinds in ``supersedes`` (the
    shard jobs a check was split into).
    """

    kind: str
    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    supersede: bool = False
    dedupe: bool = False
    supersedes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.supersede and self.dedupe:
            raise ValueError("a job request supersedes or dedupes, not both")


@dataclass(frozen=True)
class JobRecord:
    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    state: JobState
    attempts: int
    error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    worker: str | None
    delivery_id: str | None = None
    retries: int = 0  # transient failures requeued so far (``requeue(..., failure=True)``)
    first_failure_at: datetime | None = None  # when the first of them happened


class JobQueue(Protocol):
    """The queue the webhook service fills and workers drain."""

    def enqueue(self, request: JobRequest) -> int: ...

    def claim(
        self, worker_id: str, kinds: Collection[str] | None = None
    ) -> JobRecord | None: ...

    def complete(self, job_id: int, result: dict[str, Any] | None = None, *,
                 worker: str | None = None) -> bool: ...

    def fail(self, job_id: int, error: str, retry: bool = False, *,
             worker: str | None = None) -> JobState | None: ...

    def requeue(
        self, job_id: int, reason: str, available_at: datetime, *, failure: bool = True,
        worker: str | None = None,
    ) -> bool: ...

    def is_current(self, job_id: int) -> bool: ...

    def holds(self, job_id: int, worker: str) -> bool: ...

    def renew(self, job_id: int, worker: str) -> bool: ...

    def reclaim_expired(self) -> builtins.list[JobRecord]: ...

    def recover(self) -> int: ...

    def get(self, job_id: int) -> JobRecord | None: ...

    def list(
        self, kind: str | None = None, state: JobState | None = None
    ) -> builtins.list[JobRecord]: ...

    def latest(
        self, kind: str, key: str, state: JobState = JobState.DONE, limit: int = 50
    ) -> builtins.list[JobRecord]: ...


class SqlJobQueue:
    """The job queue in the ``jobs`` table, on SQLite or PostgreSQL.

    Invariants:

    - A job is claimed by one worker only. A claim is a single ``UPDATE … WHERE id = (SELECT …
      LIMIT 1 FOR UPDATE SKIP LOCKED) AND state = 'queued' RETURNING …``: on PostgreSQL
      concurrent claimers skip each other's locked row, and on SQLite (which ignores ``FOR
      UPDATE``) the statement runs under the database's single write lock.
    - Superseding and de-duplicating happen in the enqueueing transaction; on PostgreSQL that
      transaction first takes an advisory lock on (kind, key), so two concurrent enqueues of
      the same key cannot both stay current (on SQLite the database's single writer, and in
      one process ``transaction``'s turns, keep them apart).
    - Only a ``running`` job can be completed or failed: a result that arrives after the job was
      superseded is dropped.
    - A running job is leased to the worker that claimed it (``worker``): its ``updated_at`` is
      the heartbeat, set by the claim and by every ``renew``, and the lease expires ``lease``
      seconds after it. Any process may put a job whose lease expired back in the queue
      (``reclaim_expired``): its worker died or stalled. ``complete``, ``fail`` and
      ``requeue`` given the ``worker`` change the job only while that worker still holds
      it, so a worker that lost its job records nothing over the new holder's run. Every
      process sharing the database must use the same ``lease``.
    - ``attempts`` counts claims, so a job that kills its process is failed by
      ``reclaim_expired`` (or ``recover``) after ``max_attempts`` instead of being retried
      forever. ``requeue`` (a transient failure or a
      rate limit, retried later by the worker's own policy) gives its claim back, so such
      retries never use up the attempts that guard against crashes.
    """

    def __init__(
        self, engine: Engine, *, max_attempts: int = 3, retry_delay: float = 0.0,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if lease <= 0:
            raise ValueError("a job lease lasts more than 0 seconds")
        self.engine = engine
        self.max_attempts = max_attempts
        self.lease = lease  # seconds a running job stays its worker's without a heartbeat
        self.retry_delay = retry_delay  # seconds before a retry, doubled per attempt

    def enqueue(self, request: JobRequest) -> int:
        with transaction(self.engine) as conn:
            return self.enqueue_in(conn, request)

    def enqueue_in(
        self, conn: Connection, request: JobRequest, *, delivery_id: str | None = None
    ) -> int:
        """Enqueue within the caller's transaction (a webhook delivery records itself with it)."""
        now = utcnow()
        if (request.supersede or request.dedupe) and conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(lock_key(request.kind, request.key))))
        if request.supersede:
            conn.execute(_SUPERSEDE, {"b_kinds": [request.kind, *request.supersedes],
                                      "b_key": request.key, "b_now": now})
        if request.dedupe:
            active = conn.execute(_ACTIVE, {"b_kind": request.kind, "b_key": request.key}
                                  ).scalar()
            if active is not None:
                return int(active)
        result = conn.execute(
            _INSERT,
            {
                "kind": request.kind,
                "key": request.key,
                "payload": request.payload,
                "state": JobState.QUEUED.value,
                "attempts": 0,
                "delivery_id": delivery_id,
                "created_at": now,
                "updated_at": now,
                "available_at": now,
            },
        )
        assert result.inserted_primary_key is not None
        return int(result.inserted_primary_key[0])

    def claim(
        self, worker_id: str, kinds: Collection[str] | None = None
    ) -> JobRecord | None:
        """The oldest queued job that is due (of one of ``kinds``, when given), now running
        under ``worker_id``; None when there is none."""
        statement = _CLAIM if kinds is None else _claim_statement(kinds)
        with transaction(self.engine) as conn:
            row = conn.execute(statement, {"b_now": utcnow(), "b_worker": worker_id}).first()
        return None if row is None else _record(row)

    def complete(self, job_id: int, result: dict[str, Any] | None = None, *,
                 worker: str | None = None) -> bool:
        """Mark a running job done; False (and nothing changes) if it is no longer running
        (under ``worker``, when given)."""
        statement = _COMPLETE if worker is None else _COMPLETE.where(
            JOBS.c.worker == bindparam("b_worker"))
        with transaction(self.engine) as conn:
            updated = conn.execute(
                statement, {"b_id": job_id, "b_result": result, "b_now": utcnow(),
                            "b_worker": worker}
            )
        return updated.rowcount == 1

    def fail(self, job_id: int, error: str, retry: bool = False, *,
             worker: str | None = None) -> JobState | None:
        """Record a failure: back to queued when ``retry`` and attempts remain, else failed.

        Returns the new state, or None if the job was not running (under ``worker``, when
        given: e.g. superseded meanwhile, or reclaimed from a stalled worker).
        """
        with transaction(self.engine) as conn:
            attempts = conn.execute(
                select(JOBS.c.attempts)
                .where(running_under(job_id, worker))
                .with_for_update()
            ).scalar()
            if attempts is None:
                return None
            now = utcnow()
            values: dict[str, Any] = {"error": error, "updated_at": now}
            if retry and attempts < self.max_attempts:
                delay = self.retry_delay * 2 ** max(attempts - 1, 0)
                values.update(
                    state=JobState.QUEUED,
                    available_at=now + timedelta(seconds=delay),
                    started_at=None,
                    worker=None,
                )
            else:
                values["state"] = JobState.FAILED
            conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(**values))
        return JobState(values["state"])

    def requeue(
        self, job_id: int, reason: str, available_at: datetime, *, failure: bool = True,
        worker: str | None = None,
    ) -> bool:
        """Put a running job back in the queue, not to be claimed before ``available_at``,
        without spending an attempt (its claim is given back). ``reason`` is kept in ``error``.

        With ``failure`` it counts as one more transient failure: ``retries`` grows by one and
        the first one's time is kept (``first_failure_at``); a rate limit passes
        ``failure=False`` and changes neither. False if the job was no longer running (under
        ``worker``, when given).
        """
        with transaction(self.engine) as conn:
            row = conn.execute(
                select(JOBS.c.attempts, JOBS.c.payload)
                .where(running_under(job_id, worker))
                .with_for_update()
            ).first()
            if row is None:
                return False
            now = utcnow()
            values: dict[str, Any] = {
                "state": JobState.QUEUED, "available_at": available_at, "started_at": None,
                "worker": None, "error": reason, "updated_at": now,
                "attempts": max(row.attempts - 1, 0),
            }
            if failure:
                payload = dict(row.payload or {})
                seen = payload.get(RETRY_KEY) or {}
                payload[RETRY_KEY] = {"failures": int(seen.get("failures", 0)) + 1,
                                      "first": seen.get("first") or now.isoformat()}
                values["payload"] = payload
            conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(**values))
        return True

    def is_current(self, job_id: int) -> bool:
        """True while the job is queued or running (False once superseded, finished or gone)."""
        with transaction(self.engine) as conn:
            state = conn.execute(_STATE, {"b_id": job_id}).scalar()
        return state in ACTIVE_STATES

    def holds(self, job_id: int, worker: str) -> bool:
        """True while the job is running under ``worker`` (its lease not yet taken from it)."""
        with transaction(self.engine) as conn:
            found = conn.execute(select(JOBS.c.id).where(running_under(job_id, worker))
                                 ).first()
        return found is not None

    def renew(self, job_id: int, worker: str) -> bool:
        """The heartbeat of a running job: extend ``worker``'s lease on it by ``lease``
        seconds from now. False when the worker no longer holds it (superseded, or reclaimed
        after its lease expired): the worker should stop the job and write nothing more."""
        with transaction(self.engine) as conn:
            renewed = conn.execute(update(JOBS).where(running_under(job_id, worker))
                                   .values(updated_at=utcnow()))
        return renewed.rowcount == 1

    def reclaim_expired(self) -> builtins.list[JobRecord]:
        """Put running jobs whose lease expired (no heartbeat for ``lease`` seconds: their
        worker died or stalled) back in the queue, each claim counted in ``attempts``: a job
        that has used up ``max_attempts`` fails instead. Any process may call it at any time;
        returns the jobs it reclaimed as they are now (``queued``, or ``failed``)."""
        now = utcnow()
        expired = (JOBS.c.state == JobState.RUNNING) & (
            JOBS.c.updated_at < now - timedelta(seconds=self.lease))
        with transaction(self.engine) as conn:
            failed = conn.execute(
                update(JOBS)
                .where(expired, JOBS.c.attempts >= self.max_attempts)
                .values(state=JobState.FAILED, updated_at=now,
                        error=f"gave up after {self.max_attempts} tries: each time its "
                              f"worker stopped answering (no heartbeat for {self.lease:g} s)")
                .returning(*JOBS.c)
            ).all()
            requeued = conn.execute(
                update(JOBS)
                .where(expired)
                .values(state=JobState.QUEUED, started_at=None, worker=None, updated_at=now,
                        available_at=now,
                        error=f"reclaimed: no heartbeat from its worker for {self.lease:g} s")
                .returning(*JOBS.c)
            ).all()
        return [_record(row) for row in [*failed, *requeued]]

    def recover(
        self, stale_after: float | None = None, kinds: Collection[str] | None = None
    ) -> int:
        """Put jobs left ``running`` by a dead process back in the queue; returns how many were
        recovered (requeued, or failed when their attempts are used up).

        Call it at start-up of a process that is alone on the database (``reclaim_expired``
        is the one for several workers). With ``stale_after`` (seconds) only jobs started
        longer ago than that are touched: use it when other live processes share the
        database. With ``kinds`` only jobs of those kinds are.
        """
        now = utcnow()
        stranded = JOBS.c.state == JobState.RUNNING
        if stale_after is not None:
            stranded &= JOBS.c.started_at < now - timedelta(seconds=stale_after)
        if kinds is not None:
            stranded &= JOBS.c.kind.in_(list(kinds))
        with transaction(self.engine) as conn:
            failed = conn.execute(
                update(JOBS)
                .where(stranded, JOBS.c.attempts >= self.max_attempts)
                .values(
                    state=JobState.FAILED,
                    error="interrupted: the process running it stopped "
                    f"{self.max_attempts} times",
                    updated_at=now,
                )
            ).rowcount
            requeued = conn.execute(
                update(JOBS)
                .where(stranded)
                .values(state=JobState.QUEUED, started_at=None, worker=None, updated_at=now)
            ).rowcount
        return int(failed) + int(requeued)

    def get(self, job_id: int) -> JobRecord | None:
        with transaction(self.engine) as conn:
            row = conn.execute(select(JOBS).where(JOBS.c.id == job_id)).first()
        return None if row is None else _record(row)

    def list(
        self, kind: str | None = None, state: JobState | None = None
    ) -> builtins.list[JobRecord]:
        """Jobs in the order they were enqueued, optionally of one kind and/or state."""
        query = select(JOBS).order_by(JOBS.c.id)
        if kind is not None:
            query = query.where(JOBS.c.kind == kind)
        if state is not None:
            query = query.where(JOBS.c.state == JobState(state))
        with transaction(self.engine) as conn:
            return [_record(row) for row in conn.execute(query)]

    def latest(
        self, kind: str, key: str, state: JobState = JobState.DONE, limit: int = 50
    ) -> builtins.list[JobRecord]:
        """The last ``limit`` jobs of ``kind`` about ``key`` in ``state``, newest first."""
        query = (
            select(JOBS)
            .where(JOBS.c.kind == kind, JOBS.c.key == key, JOBS.c.state == JobState(state))
            .order_by(JOBS.c.id.desc())
            .limit(limit)
        )
        with transaction(self.engine) as conn:
            return [_record(row) for row in conn.execute(query)]


# The statements run for every delivery and job are built once: building and cache-keying
# SQLAlchemy statements costs more CPU than SQLite takes to run them.
_NOW = bindparam("b_now", type_=UtcDateTime())
_SUPERSEDE = (
    update(JOBS)
    .where(
        JOBS.c.kind.in_(bindparam("b_kinds", expanding=True)),
        JOBS.c.key == bindparam("b_key"),
        JOBS.c.state.in_([state.value for state in ACTIVE_STATES]),
    )
    .values(state=JobState.SUPERSEDED.value, updated_at=_NOW)
)
_ACTIVE = (
    select(JOBS.c.id)
    .where(
        JOBS.c.kind == bindparam("b_kind"),
        JOBS.c.key == bindparam("b_key"),
        JOBS.c.state.in_([state.value for state in ACTIVE_STATES]),
    )
    .order_by(JOBS.c.id)
    .limit(1)
)
_INSERT = insert(JOBS)
_CANDIDATE = JOBS.alias("candidate")  # an alias, so the subquery is not correlated


def _claim_statement(kinds: Collection[str] | None = None) -> Update:
    candidate = select(_CANDIDATE.c.id).where(
        _CANDIDATE.c.state == JobState.QUEUED.value, _CANDIDATE.c.available_at <= _NOW)
    if kinds is not None:
        candidate = candidate.where(_CANDIDATE.c.kind.in_(list(kinds)))
    return (
        update(JOBS)
        .where(
            JOBS.c.id
            == candidate.order_by(_CANDIDATE.c.id)
            .limit(1)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite has its single writer
            .scalar_subquery(),
            JOBS.c.state == JobState.QUEUED.value,
        )
        .values(
            state=JobState.RUNNING.value,
            attempts=JOBS.c.attempts + 1,
            started_at=_NOW,
            updated_at=_NOW,
            worker=bindparam("b_worker"),
        )
        .returning(*JOBS.c)
    )


_CLAIM = _claim_statement()
_COMPLETE = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("b_id"), JOBS.c.state == JobState.RUNNING.value)
    .values(
        state=JobState.DONE.value,
        result=bindparam("b_result", type_=JSON()),
        error=None,
        updated_at=_NOW,
    )
)
_STATE = select(JOBS.c.state).where(JOBS.c.id == bindparam("b_id"))


def running_under(job_id: int, worker: str | None) -> ColumnElement[bool]:
    """The job, while running (under ``worker``, when given)."""
    condition = (JOBS.c.id == job_id) & (JOBS.c.state == JobState.RUNNING)
    return condition if worker is None else condition & (JOBS.c.worker == worker)


def _record(row: Row[Any]) -> JobRecord:
    values = row._mapping
    payload = dict(values["payload"] or {})
    retry = payload.pop(RETRY_KEY, None) or {}
    first = retry.get("first")
    return JobRecord(
        id=values["id"],
        kind=values["kind"],
        key=values["key"],
        payload=payload,
        state=JobState(values["state"]),
        attempts=values["attempts"],
        error=values["error"],
        result=values["result"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        started_at=values["started_at"],
        worker=values["worker"],
        delivery_id=values["delivery_id"],
        retries=int(retry.get("failures", 0)),
        first_failure_at=datetime.fromisoformat(first) if first else None,
    )


def lock_key(kind: str, key: str) -> int:
    """A stable signed 64-bit id for PostgreSQL's advisory lock on (kind, key)."""
    digest = hashlib.blake2b(f"{kind}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
