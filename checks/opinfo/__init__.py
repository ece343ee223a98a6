"""PyTorch's OpInfo database as a source of specs, next to the hand-written library.

``alignbot check --opinfo`` adds a spec per usable ``op_db`` entry (``opinfo.<name>[.<variant>]``,
and ``opinfo.<name>.errors`` for its error inputs). Only :mod:`checks.opinfo.adapter` reads
PyTorch's private testing module; importing this package imports none of it.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec import Spec
from .adapter import OpInfoChanged


def opinfo_specs(patterns: Iterable[str] = ()) -> list[Spec]:
    """The OpInfo specs (all, or those matching one of ``patterns``), sorted by name."""
    from .specs import catalog

    pats = [p for p in patterns if p]
    specs = sorted(catalog().specs, key=lambda s: s.name)
    return [s for s in specs if s.matches(pats)] if pats else specs


__all__ = ["OpInfoChanged", "opinfo_specs"]
