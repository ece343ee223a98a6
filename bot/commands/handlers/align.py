"""``/align [OPS…] [--n N] [--seed S]``: queue a check of the pull request's head, with
overrides; at most one per comment or review, and rate-limited per person."""

from __future__ import annotations

from typing import Any

from ...jobs import align_job
from ...policy import Unbound, needs_ok
from .. import state
from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import AlignCommand, Name


def align(services: Services, request: Request, command: AlignCommand) -> Outcome:
    if request.pr.state != "open":
        return refused(Refusal.CLOSED)
    if not request.can_write:
        if not request.is_author:
            return refused(Refusal.NEEDS_WRITE)
        if not request.trusted:
            return refused(Refusal.UNTRUSTED)
    if any(row.command == Name.ALIGN.value and row.accepted
           for row in state.rows(services.engine, request)):
        return refused(Refusal.ONE_ALIGN)
    limit = services.align_limit
    extra: dict[str, Any] = {"ops": list(command.ops), "all_ops": not command.ops,
                             "requested_by": request.actor}
    if command.n is not None:
        extra["n"] = command.n
    if command.seed is not None:
        extra["seed"] = command.seed
    head = request.pr.head.sha
    if request.can_write and needs_ok(request.pr.author_association, request.trust):
        # a maintainer's request runs where the gate would wait: on the head it was written
        # on, never on one pushed since
        written = request.written_head
        if isinstance(written, Unbound):
            return refused(Refusal.UNBOUND, why=written, head=head)
        if written != head:
            return Outcome(False, None, "command_moved.md.j2",
                           {"approved": None, "head": head, "written": written})
        extra["approved_by"] = request.actor
    retry_at = state.use(services.engine, request, Name.ALIGN, limit, services.clock())
    if retry_at is not None:
        return refused(Refusal.RATE_LIMITED, limit=limit, retry_at=retry_at)
    enqueue_align(services, request, f"/align by {request.actor}", extra)
    return Outcome(True, Reaction.QUEUED, values={"queued": True})


def enqueue_align(services: Services, request: Request, trigger: str,
                  extra: dict[str, Any]) -> None:
    """Queue the pull request's ``align`` job (superseding one queued before) for its head
    as this job read it."""
    payload = {"installation_id": int(request.payload["installation_id"]),
               "repo": request.repo_name, "number": request.number,
               "head_sha": request.pr.head.sha, "trigger": trigger, **extra}
    services.queue.enqueue(align_job(request.repo_name, request.number, payload))
