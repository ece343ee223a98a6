"""PyTorch's OpInfo database as a source of specs, next to the hand-written library.

``alignbot check --opinfo`` adds a spec per usable ``op_db`` entry (``opinfo.<name>[.<variant>]``,
and ``opinfo.<name>.errors`` for its error inputs) and per usable ``module_db`` entry
(``moduleinfo.nn.<Module>``). Only :mod:`alignbot.checks.opinfo.adapter` and
:mod:`alignbot.checks.opinfo.module_adapter` read PyTorch's private testing modules; importing this
package imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec import Spec
from .adapter import OpInfoChanged

# Draws per OpInfo spec in a default run (``--opinfo-draws``): about a thousand OpInfo specs
# run next to the library, and at each entry's own count (room for every dtype and two more)
# a default run took far more than 4 minutes on two cores; with 5, each seed covers a few of
# an entry's dtypes and variants, and the App's seed (from the head commit) rotates them.
OPINFO_DRAWS = 5


def opinfo_specs(patterns: Iterable[str] = ()) -> list[Spec]:
    """The OpInfo specs (all, or those matching one of ``patterns``), sorted by name."""
    from . import modules
    from . import specs as ops

    pats = [p for p in patterns if p]
    specs = sorted(ops.catalog().specs + modules.catalog().specs, key=lambda s: s.name)
    return [s for s in specs if s.matches(pats)] if pats else specs


__all__ = ["OPINFO_DRAWS", "OpInfoChanged", "opinfo_specs"]
