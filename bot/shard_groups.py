"""Shard groups: a check split into shard jobs, their reports, and its one end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func, insert, select, update

from .queue import JobRecord, JobRequest, SqlJobQueue, lock_key, running_under
from .storage import JOBS, SHARD_GROUPS, GroupEnd, JobState, transaction, utcnow


@dataclass(frozen=True)
class Group:
    parent_id: int
    key: str
    head_sha: str
    jobs: list[int]  # shard K of N is jobs[K - 1]
    ended: GroupEnd | None
    ended_by: int | None
    created_at: datetime


class ShardGroups:
    """The ``shard_groups`` rows, and the shard jobs' reports in their ``result``.

    Invariants:

    - Shards are queued only by the job that splits the check, while it still runs under its
      worker, in one transaction with the group's row; on PostgreSQL that transaction first
      takes the advisory lock a superseding enqueue of the same kind and key takes, so a newer
      push either comes first (no shard is queued) or sees every shard (and supersedes it).
    - A shard stores its report while it still runs under its worker (fenced), with the
      group's row locked (``FOR UPDATE``; SQLite's single writer otherwise): of two shards
      that finish at once the later sees the earlier's report, so exactly one of them finds
      every report stored and ends the group as ``merged``.
    - ``ended`` is set once (a conditional update): merged, failed or cancelled, by one job.
    """

    def __init__(self, queue: SqlJobQueue) -> None:
        self.queue = queue
        self.engine: Engine = queue.engine

    def split(self, parent: JobRecord, worker: str | None, requests: Sequence[JobRequest]
              ) -> list[int] | None:
        """Queue ``requests`` (the shards, in order) as parts of ``parent``; None (and nothing
        queued) when ``parent`` no longer runs (under ``worker``, when given)."""
        with transaction(self.engine) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(lock_key(parent.kind,
                                                                        parent.key))))
            if conn.execute(select(JOBS.c.id).where(running_under(parent.id, worker))
                            .with_for_update()).first() is None:
                return None
            split = conn.execute(select(SHARD_GROUPS.c.jobs).where(
                SHARD_GROUPS.c.parent_id == parent.id)).scalar()
            if split is not None:  # split before its worker died: the same shards
                return list(split)
            ids = [self.queue.enqueue_in(conn, request) for request in requests]
            conn.execute(insert(SHARD_GROUPS).values(
                parent_id=parent.id, key=parent.key, head_sha=parent.payload["head_sha"],
                jobs=ids, created_at=utcnow()))
        return ids

    def get(self, parent_id: int) -> Group | None:
        with transaction(self.engine) as conn:
            row = conn.execute(select(SHARD_GROUPS).where(
                SHARD_GROUPS.c.parent_id == parent_id)).first()
        if row is None:
            return None
        return Group(row.parent_id, row.key, row.head_sha, list(row.jobs),
                     None if row.ended is None else GroupEnd(row.ended), row.ended_by,
                     row.created_at)

    def unended(self, key: str, before: int) -> list[Group]:
        """The groups of ``key`` split by a job before ``before`` that have not ended."""
        with transaction(self.engine) as conn:
            ids = conn.execute(select(SHARD_GROUPS.c.parent_id).where(
                SHARD_GROUPS.c.key == key, SHARD_GROUPS.c.parent_id < before,
                SHARD_GROUPS.c.ended.is_(None))).scalars().all()
        return [group for group in map(self.get, ids) if group is not None]

    def store(self, parent_id: int, job_id: int, worker: str | None, result: dict[str, Any]
              ) -> bool | None:
        """Store shard ``job_id``'s ``result`` (its report); True when every shard of the
        group has stored one now and this job ended it as merged: it merges and posts. None
        when the job no longer runs (under ``worker``): nothing is stored."""
        with transaction(self.engine) as conn:
            group = conn.execute(select(SHARD_GROUPS).where(
                SHARD_GROUPS.c.parent_id == parent_id).with_for_update()).first()
            if group is None or conn.execute(update(JOBS).where(
                    running_under(job_id, worker)).values(result=result)).rowcount != 1:
                return None
            stored = conn.execute(select(func.count()).select_from(JOBS).where(
                JOBS.c.id.in_(list(group.jobs)), JOBS.c.result.is_not(None),
                JOBS.c.state.in_([JobState.RUNNING, JobState.DONE]))).scalar()
            if stored != len(group.jobs):
                return False
            return self._end(conn, parent_id, GroupEnd.MERGED, job_id)

    def end(self, parent_id: int, how: GroupEnd, by: int) -> bool:
        """End the group ``how``, once; True when job ``by`` ended it (now, or before)."""
        with transaction(self.engine) as conn:
            return self._end(conn, parent_id, how, by)

    def results(self, group: Group) -> list[dict[str, Any] | None]:
        """The shards' stored results, shard 1 first."""
        with transaction(self.engine) as conn:
            rows = dict(conn.execute(select(JOBS.c.id, JOBS.c.result).where(
                JOBS.c.id.in_(group.jobs))).all())
        return [rows.get(job_id) for job_id in group.jobs]

    @staticmethod
    def _end(conn: Any, parent_id: int, how: GroupEnd, by: int) -> bool:
        ended = conn.execute(update(SHARD_GROUPS).where(
            SHARD_GROUPS.c.parent_id == parent_id, SHARD_GROUPS.c.ended.is_(None)).values(
            ended=how.value, ended_by=by, ended_at=utcnow())).rowcount
        if ended == 1:
            return True
        row = conn.execute(select(SHARD_GROUPS.c.ended, SHARD_GROUPS.c.ended_by).where(
            SHARD_GROUPS.c.parent_id == parent_id)).first()
        return row is not None and (row.ended, row.ended_by) == (how.value, by)
