"""``/ok-to-test``: a maintainer lets an outside contributor's pull request run at the head
GitHub showed when the comment was written (``Request.written_head``), and at no other."""

from __future__ import annotations

from ...policy import TRUSTED_ASSOCIATIONS, Unbound, approval, record_ok
from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import OkToTestCommand
from .align import enqueue_align


def ok_to_test(services: Services, request: Request, command: OkToTestCommand) -> Outcome:
    if not (request.can_write or (request.is_author and request.trusted)):
        return refused(Refusal.NEEDS_WRITE)
    if request.pr.state != "open":
        return refused(Refusal.CLOSED)
    trust = request.trust
    inside = request.pr.author_association in TRUSTED_ASSOCIATIONS
    if inside or trust.outside_contributors == "run":
        return Outcome(True, Reaction.DONE, values={"queued": False})
    if trust.outside_contributors == "skip":
        return refused(Refusal.TRUST_SKIP)
    written = request.written_head
    current = request.pr.head.sha
    if isinstance(written, Unbound):
        return refused(Refusal.UNBOUND, why=written, head=current)
    new = record_ok(services.engine, request.repo_name, request.number, written, request.actor)
    if not new and approval(services.engine, request.repo, request.number, written,
                            carry_over=False).by is None:  # its giver lost write access
        new = record_ok(services.engine, request.repo_name, request.number, written,
                        request.actor, replace=True)
    if written != current and not trust.carry_over_pushes:  # pushed since the comment
        if new:  # the head's check run and waiting comment name the commit approved instead
            enqueue_align(services, request, f"/ok-to-test by {request.actor} of "
                          f"{written[:12]}", {})
        return Outcome(True, Reaction.DONE, "command_moved.md.j2",
                       {"approved": written, "head": current})
    if not new:
        return Outcome(True, Reaction.DONE, values={"queued": False})
    enqueue_align(services, request, f"/ok-to-test by {request.actor}", {})
    return Outcome(True, Reaction.QUEUED, values={"queued": True})
