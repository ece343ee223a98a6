"""``/help`` (and a bare ``/alignbot``): the commands, as this repository is configured."""

from __future__ import annotations

from ..context import Outcome, Reaction, Request, Services
from ..parser import HelpCommand


def help_(services: Services, request: Request, command: HelpCommand) -> Outcome:
    config = request.config
    return Outcome(True, Reaction.DONE, "command_help.md.j2", {
        "configured": config is not None,
        "tracking_repo": config.upstream.tracking_repo if config else None,
        "outside_contributors": request.trust.outside_contributors,
        "reminders": bool(config and config.reminders.enabled),
        "limit": services.align_limit})
