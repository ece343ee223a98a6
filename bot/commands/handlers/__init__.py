"""One handler per slash-command, each ``(services, request, command) -> Outcome`` for its own
command record (``alignbot.bot.commands.context.Handler``); ``handle`` picks it by the record's
type."""

from __future__ import annotations

from typing import assert_never

from ..context import Outcome, Request, Services
from ..parser import (
    AlignCommand,
    Command,
    HelpCommand,
    OkToTestCommand,
    RemindCommand,
    ReproCommand,
    TrackCommand,
    UpstreamCommand,
)
from .align import align
from .help import help_
from .ok_to_test import ok_to_test
from .remind import remind
from .repro import repro
from .track import track
from .upstream import upstream


def handle(services: Services, request: Request, command: Command) -> Outcome:
    """The outcome of ``command``'s handler; a record without a case fails mypy here."""
    match command:
        case AlignCommand():
            return align(services, request, command)
        case ReproCommand():
            return repro(services, request, command)
        case UpstreamCommand():
            return upstream(services, request, command)
        case TrackCommand():
            return track(services, request, command)
        case RemindCommand():
            return remind(services, request, command)
        case OkToTestCommand():
            return ok_to_test(services, request, command)
        case HelpCommand():
            return help_(services, request, command)
        case _:
            assert_never(command)


__all__ = ["handle"]
