"""The ``command`` job: decide each new command line of a comment or review once, then deliver
the reactions and the comment's one reply.

*Decide*: parse the line, run its handler (``handlers.handle``: permissions, state changes
such as queueing an ``align`` job, at most one per comment), and record the outcome with its
rendered answer in ``command_replies``, keyed by (source, comment or review id, line hash).
*Deliver*: add the reactions and post ONE reply per comment or review that holds every line's
answer, found again by its author and the marker at its start (``reply_marker``), so that a
redelivered webhook, an edit or a re-run job never acts or answers twice. Someone without
write access gets at most ``reply_limit`` replies per pull request within its window; past it,
a reaction only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from github import GithubException
from sqlalchemy import Engine, update

from alignbot.checks.api import Trusted, environment

from ..github import GitHubApp, transient_failures
from ..output import COMMENT_LIMIT, fit
from ..queue import JobQueue, JobRecord
from ..storage import REPLIES, transaction, utcnow
from . import state
from .context import CountedUse, Outcome, RateLimit, Reaction, Request, render, reply_marker
from .handlers import handle
from .parser import MAX_COMMANDS, Malformed, parse_line
from .state import ignored_hash, line_hash

log = logging.getLogger(__name__)


@dataclass
class CommandJob:
    """Runs one ``command`` job (see the module docstring for why nothing is done twice);
    the handlers use its ``queue``, ``engine``, ``align_limit`` and ``clock``
    (``context.Services``)."""

    app: GitHubApp
    queue: JobQueue
    engine: Engine
    align_limit: RateLimit = field(default_factory=RateLimit)
    clock: Callable[[], datetime] = utcnow
    # replies per person without write access, per pull request: beyond it, a reaction only
    reply_limit: RateLimit = field(default_factory=lambda: RateLimit(5, timedelta(hours=1)))

    def __call__(self, job: JobRecord) -> dict[str, Any] | None:
        with transient_failures(self.app, job.payload["installation_id"]):
            return self._run(job)

    def _run(self, job: JobRecord) -> dict[str, Any]:
        request = Request(self.app, self.engine, job.payload)
        lines = list(job.payload["commands"])[:MAX_COMMANDS]
        ignored = int(job.payload.get("ignored") or 0)
        for line in lines:
            if state.handled(self.engine, request, line_hash(line)) is None:
                self._decide(request, line)
        if ignored and state.handled(self.engine, request, ignored_hash(ignored)) is None:
            self._note_ignored(request, ignored)
        reply_id = self._deliver(request)
        handled = []
        for line in lines:
            row = state.handled(self.engine, request, line_hash(line))
            assert row is not None
            handled.append({"line": line, "command": row.command, "accepted": row.accepted,
                            "reply_id": row.reply_id})
        return {"commands": handled, "ignored": ignored, "reply_id": reply_id}

    # -- decide -------------------------------------------------------------------------

    def _decide(self, request: Request, line: str) -> None:
        parsed = parse_line(line)
        if isinstance(parsed, Malformed):
            outcome = Outcome(False, template="command_rejected.md.j2",
                              values={"reason": parsed.problem, "problem": parsed})
        else:
            outcome = handle(self, request, parsed)
        name = parsed.name
        if outcome.template is None and request.source == "review":
            outcome.template = "command_ack.md.j2"  # GitHub has no reactions on reviews
        body = None
        if outcome.template is not None:
            body = render(outcome.template, **outcome.values, line=line, marker="",
                          name=name.value if name else None).strip()
        reaction = outcome.reaction
        if body is not None and not self._may_reply(request):
            body, reaction = None, reaction or Reaction.NOT_ANSWERED
        state.record(self.engine, request, line_hash(line), name.value if name else "",
                     outcome.accepted, reaction, body)
        log.info("%s#%d: %s by %s: %s", request.repo_name, request.number, line,
                 request.actor, "accepted" if outcome.accepted else "refused")

    def _note_ignored(self, request: Request, count: int) -> None:
        body = render("command_ignored.md.j2", count=count, limit=MAX_COMMANDS).strip()
        state.record(self.engine, request, ignored_hash(count), "", False, None,
                     body if self._may_reply(request) else None)

    def _may_reply(self, request: Request) -> bool:
        """Whether this comment may get a reply: it already has one coming, the commenter
        has write access, or the commenter's reply budget on this pull request is not spent
        (counting one reply)."""
        coming = any(row.reply_body for row in state.rows(self.engine, request))
        if coming or request.can_write:
            return True
        return state.use(self.engine, request, CountedUse.REPLY, self.reply_limit,
                         self.clock()) is None

    # -- deliver ------------------------------------------------------------------------

    def _deliver(self, request: Request) -> int | None:
        """Post what this comment's rows still owe GitHub: their reactions (each kind once)
        and the one reply that holds every line's answer; returns the reply's id."""
        rows = state.rows(self.engine, request)
        keys = (REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id)
        given = {row.reaction for row in rows if row.reaction and row.reacted}
        for row in rows:
            if not row.reaction or row.reacted:
                continue
            if row.reaction not in given:
                try:
                    request.pr.get_issue_comment(row.source_id).create_reaction(row.reaction)
                except GithubException as exc:
                    if exc.status != 404:  # a deleted comment takes no reaction: nothing owed
                        raise
                given.add(row.reaction)
            with transaction(self.engine) as conn:
                conn.execute(update(REPLIES).where(
                    *keys, REPLIES.c.line_hash == row.line_hash).values(reacted=True))
        answered = [row for row in rows if row.reply_body]
        if not answered:
            return None
        if all(row.reply_id is not None for row in answered):
            return int(answered[0].reply_id)
        marker = reply_marker(request.source, request.source_id)
        body = fit(environment().get_template("command_reply.md.j2").render(
            # each part was rendered by a strict template when the line was decided
            marker=marker, parts=[Trusted(row.reply_body) for row in answered]),
            COMMENT_LIMIT, None)
        reply = request.find_reply()
        if reply is None:
            reply_id = int(request.pr.create_issue_comment(body).id)
        else:
            if reply.body != body:  # an edit added lines: the one reply answers them too
                reply.edit(body)
            reply_id = int(reply.id)
        with transaction(self.engine) as conn:
            conn.execute(update(REPLIES).where(*keys, REPLIES.c.reply_body.is_not(None))
                         .values(reply_id=reply_id))
        return reply_id
