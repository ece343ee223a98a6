"""``/remind snooze DURATION|on|off``: the author or a maintainer changes this pull request's
reminder settings (``pr_reminder_settings``, read by the weekly sweep)."""

from __future__ import annotations

from typing import Any

from ...storage import PR_SETTINGS, transaction, upsert
from ..context import Outcome, Reaction, Refusal, Request, Services, refused
from ..parser import RemindCommand


def remind(services: Services, request: Request, command: RemindCommand) -> Outcome:
    if not (request.is_author or request.can_write):
        return refused(Refusal.NEEDS_AUTHOR_OR_WRITE)
    now = services.clock()
    keys = {"repo": request.repo_name, "number": request.number}
    values: dict[str, Any] = {"updated_by": request.actor, "updated_at": now}
    if command.snooze is not None:  # "snooze"
        values["snoozed_until"] = now + command.snooze
    else:
        values.update(disabled=command.action == "off", snoozed_until=None)
    with transaction(services.engine) as conn:
        upsert(conn, PR_SETTINGS, {**keys, **values}, keys=list(keys), update=values)
    return Outcome(True, Reaction.DONE, values={"remind": command.action,
                                                "until": values.get("snoozed_until")})
