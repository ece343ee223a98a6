"""``/repro FINGERPRINT``: reply with the finding's standalone repro script."""

from __future__ import annotations

from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import ReproCommand
from .findings import finding


def repro(services: Services, request: Request, command: ReproCommand) -> Outcome:
    found = finding(services, request, command.fingerprint)
    if isinstance(found, Outcome):
        return found
    head_sha, checked = found
    if not checked.get("repro"):
        return refused(Refusal.NO_REPRO, fingerprint=command.fingerprint)
    return Outcome(True, Reaction.DONE, "command_repro.md.j2",
                   {"finding": checked, "head_sha": head_sha})
