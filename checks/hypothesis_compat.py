"""The Hypothesis internals the engine relies on beyond its public API, in one place.

Every import of ``hypothesis.internal`` is here (``tests/test_hypothesis_compat.py`` fails
on one anywhere else in checks/): the conjecture engine that :mod:`alignbot.checks.shrink` drives,
and :func:`conjecture_data`, the handle under ``st.data()`` whose primitive draws
(``forced=`` included) :mod:`alignbot.checks.dsl` makes.

Draws must depend on the seed and the spec alone. Hypothesis mixes number literals taken
from every "local" module loaded in the process into some draws; which modules count as
local depends on how alignbot is installed (editable or from a wheel) and on what else the
process imported, so one seed would draw different programs in pytest, the CLI and the App,
and after any edit of an unrelated literal. :func:`seed_only_draws` switches that pool off
while the engine draws (Hypothesis' own fixed pool of edge values stays). The version range in
pyproject.toml is the one this was checked against; tests/test_hypothesis_compat.py fails
loudly when the internals move.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis.internal.conjecture import providers
from hypothesis.internal.conjecture.data import ConjectureData, ConjectureResult, Status
from hypothesis.internal.conjecture.engine import ConjectureRunner, RunIsComplete
from hypothesis.internal.conjecture.shrinker import sort_key
from hypothesis.internal.escalation import InterestingOrigin

__all__ = ["ConjectureData", "ConjectureResult", "ConjectureRunner", "InterestingOrigin",
           "RunIsComplete", "Status", "conjecture_data", "seed_only_draws", "sort_key"]

_depth = 0


@contextmanager
def seed_only_draws() -> Iterator[None]:
    """No constants from the loaded modules in the draws made inside (re-entrant)."""
    global _depth
    original = providers._get_local_constants
    if _depth == 0:
        empty = providers.Constants()
        providers._get_local_constants = _constant(empty)
        providers.CONSTANTS_CACHE.cache.clear()  # it may hold another run's local pool
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            providers._get_local_constants = original
            providers.CONSTANTS_CACHE.cache.clear()


def _constant(value: Any) -> Any:
    def get() -> Any:
        return value

    return get


def conjecture_data(data: Any) -> Any:
    """The ConjectureData under ``st.data()``'s object (or ``data`` itself, already one):
    primitive draws straight from it cost less than a strategy per draw."""
    return getattr(data, "conjecture_data", data)
