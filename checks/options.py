"""The ranges of the engine's numeric options, checked in one place for the command line and
the pytest plugin: a value out of range is one line naming the option, the value and what
it takes."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


class OptionError(ValueError):
    """A numeric option out of its range, said in one line."""


@dataclass(frozen=True)
class NumberRange:
    """What a numeric option takes: a finite number at least (or, ``above``, more than)
    ``least``, a whole one where ``whole``."""

    least: float
    what: str
    whole: bool = False
    above: bool = False

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or (self.whole and value != int(value)):
            return False
        return value > self.least if self.above else value >= self.least


RANGES: dict[str, NumberRange] = {
    "timeout": NumberRange(0, "a number of seconds above 0", above=True),
    "draws": NumberRange(1, "a whole number of draws, 1 or more", whole=True),
    "jobs": NumberRange(1, "a whole number of worker processes, 1 or more", whole=True),
    "opinfo_draws": NumberRange(0, "a whole number of draws, 0 or more", whole=True),
    "shrink_calls": NumberRange(1, "a whole number of oracle calls, 1 or more", whole=True),
    "shrink_seconds": NumberRange(0, "a number of seconds above 0", above=True),
    "rtol": NumberRange(0, "a tolerance of 0 or more"),
    "atol": NumberRange(0, "a tolerance of 0 or more"),
}


def check_numbers(values: Mapping[str, float | None], flags: Mapping[str, str]) -> None:
    """Raise :class:`OptionError` for the first value (by its key in :data:`RANGES`) out of
    its range, naming it as ``flags`` spells it; None is an option not given."""
    for key, value in values.items():
        allowed = RANGES[key]
        if value is not None and not allowed.admits(value):
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise OptionError(f"{flags[key]} {shown}: expected {allowed.what}")
