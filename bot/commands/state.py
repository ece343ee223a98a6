"""What the slash-commands keep in the database: each handled line and its answer
(``command_replies``, keyed by source, comment or review id and line hash), the rate-limited
uses (``command_uses``), the upstream watch that ``/track`` and ``/upstream … file`` add to,
the per-pull-request reminder settings, and the latest ``align`` report the findings come from.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Engine, Row, Select, delete, func, select

from ..engine_report import stored_findings
from ..jobs import ALIGN, ALIGN_SHARD
from ..queue import JobQueue
from ..storage import PR_SETTINGS, REPLIES, UPSTREAM, USES, insert_ignore, transaction, utcnow
from .context import CountedUse, RateLimit, Request
from .parser import Name


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:32]


def ignored_hash(count: int) -> str:
    """The ``command_replies`` key of the note that ``count`` lines past the cap were
    ignored."""
    return line_hash(f"\0ignored {count}")


def handled(engine: Engine, request: Request, digest: str) -> Row[Any] | None:
    """The ``command_replies`` row of one line of this comment or review, or None."""
    with transaction(engine) as conn:
        return conn.execute(select(REPLIES).where(
            REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id,
            REPLIES.c.line_hash == digest)).first()


def rows(engine: Engine, request: Request) -> list[Row[Any]]:
    """Every line handled for this comment or review, in the order it was decided."""
    with transaction(engine) as conn:
        return list(conn.execute(select(REPLIES).where(
            REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id)
            .order_by(REPLIES.c.created_at, REPLIES.c.line_hash)).all())


def record(engine: Engine, request: Request, digest: str, command: str, accepted: bool,
           reaction: str | None, body: str | None) -> None:
    """Record how one line was decided, with its rendered answer (delivered later)."""
    values = {
        "source": request.source, "source_id": request.source_id, "line_hash": digest,
        "repo": request.repo_name, "number": request.number, "actor": request.actor,
        "command": command, "accepted": accepted,
        "reaction": reaction if request.source == "comment" else None,
        "reacted": False, "reply_body": body, "reply_id": None, "created_at": utcnow()}
    with transaction(engine) as conn:
        conn.execute(REPLIES.insert().values(**values))


def use(engine: Engine, request: Request, name: Name | CountedUse, limit: RateLimit,
        now: datetime) -> datetime | None:
    """Count one use; if the limit is reached, count nothing and return when to retry."""
    who = (USES.c.repo == request.repo_name, USES.c.number == request.number,
           USES.c.login == request.actor.lower(), USES.c.command == name.value)
    with transaction(engine) as conn:
        conn.execute(delete(USES).where(USES.c.used_at < now - max(limit.window,
                                                                   timedelta(days=1))))
        recent = conn.execute(select(func.count(), func.min(USES.c.used_at)).where(
            *who, USES.c.used_at > now - limit.window)).one()
        if recent[0] >= limit.count:
            return cast(datetime, recent[1]) + limit.window
        conn.execute(USES.insert().values(
            repo=request.repo_name, number=request.number, login=request.actor.lower(),
            command=name.value, used_at=now))
    return None


def latest_report(queue: JobQueue, repo: str, number: int
                  ) -> tuple[str, list[dict[str, Any]]] | None:
    """The head sha and findings of the latest completed ``align`` job with a report (or
    ``align-shard`` job: the one that merged a sharded check's reports)."""
    key = f"{repo}#{number}"
    jobs = sorted([*queue.latest(ALIGN, key), *queue.latest(ALIGN_SHARD, key)],
                  key=lambda job: job.id, reverse=True)
    for job in jobs:
        report = (job.result or {}).get("report")
        findings = stored_findings(report) if isinstance(report, dict) else None
        if findings is not None:
            return str(job.payload.get("head_sha", "")), findings
    return None


def register_upstream(engine: Engine, *, url: str, repo: str, number: int, kind: str,
                      registered_by: str, pr_repo: str, pr_number: int | None,
                      tracking_repo: str | None = None) -> bool:
    """Add an issue or pull request to the weekly upstream watch of ``pr_repo``
    (``upstream_items``, see ``bot/reminders/``); False, changing nothing, when ``pr_repo``
    already watches ``url``. Another repository's watch of the same item is its own row."""
    values = {"url": url, "repo": repo, "number": number, "kind": kind,
              "registered_by": registered_by, "pr_repo": pr_repo, "pr_number": pr_number,
              "tracking_repo": tracking_repo, "created_at": utcnow()}
    with transaction(engine) as conn:
        if conn.execute(_watching(url, pr_repo)).first() is not None:
            return False
        return insert_ignore(conn, UPSTREAM, values, keys=["url", "pr_repo"])


def upstream_item(engine: Engine, url: str, pr_repo: str) -> Row[Any] | None:
    """The ``upstream_items`` row with which ``pr_repo`` watches ``url``, or None."""
    with transaction(engine) as conn:
        return conn.execute(_watching(url, pr_repo)).first()


def _watching(url: str, pr_repo: str) -> Select[Any]:
    """GitHub's names ignore case: so do a URL and a repository here."""
    return select(UPSTREAM).where(func.lower(UPSTREAM.c.url) == url.lower(),
                                  func.lower(UPSTREAM.c.pr_repo) == pr_repo.lower())


def reminder_settings(engine: Engine, repo: str, number: int) -> Row[Any] | None:
    """The ``pr_reminder_settings`` row of a pull request, or None (the defaults apply)."""
    with transaction(engine) as conn:
        return conn.execute(select(PR_SETTINGS).where(PR_SETTINGS.c.repo == repo,
                                                      PR_SETTINGS.c.number == number)).first()
