"""PyTorch's OpInfo database as a source of specs, next to the hand-written library.

``alignbot check --opinfo`` adds a spec per usable ``op_db`` entry (``opinfo.<name>[.<variant>]``,
and ``opinfo.<name>.errors`` for its error inputs) and per usable ``module_db`` entry
(``moduleinfo.nn.<Module>``). Only :mod:`checks.opinfo.adapter` and
:mod:`checks.opinfo.module_adapter` read PyTorch's private testing modules; importing this
package imports none of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec import Spec
from .adapter import OpInfoChanged


def opinfo_specs(patterns: Iterable[str] = ()) -> list[Spec]:
    """The OpInfo specs (all, or those matching one of ``patterns``), sorted by name."""
    from . import modules
    from . import specs as ops

    pats = [p for p in patterns if p]
    specs = sorted(ops.catalog().specs + modules.catalog().specs, key=lambda s: s.name)
    return [s for s in specs if s.matches(pats)] if pats else specs


__all__ = ["OpInfoChanged", "opinfo_specs"]
