"""One handler per slash-command, each ``(services, request, command) -> Outcome``
(``bot.commands.context.Handler``), looked up by the command's name."""

from __future__ import annotations

from ..context import Handler
from ..parser import Name
from .align import align
from .help import help_
from .ok_to_test import ok_to_test
from .remind import remind
from .repro import repro
from .track import track
from .upstream import upstream

HANDLERS: dict[Name, Handler] = {
    Name.ALIGN: align,
    Name.REPRO: repro,
    Name.UPSTREAM: upstream,
    Name.TRACK: track,
    Name.REMIND: remind,
    Name.OK_TO_TEST: ok_to_test,
    Name.HELP: help_,
}

__all__ = ["HANDLERS"]
