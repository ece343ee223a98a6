"""Specs: functions that draw a program against a ``torch`` proxy, and the registry of them.

Loading them (the library, spec files, PyTorch's OpInfo database) is ``spec_loading.py``;
this module imports nothing of the engine, so the specs OpInfo makes can name ``Spec``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

SpecFn = Callable[[Any], Any]


@dataclass(frozen=True)
class Spec:
    """One spec. ``raises`` declares that every draw is an invalid input the reference must
    reject; ``ops`` names the PyTorch APIs it exercises (used by ``--ops`` and the bot)."""

    name: str
    fn: SpecFn = field(compare=False)
    n: int = 20
    rtol: float | None = None
    atol: float | None = None
    backward: bool = True
    raises: bool = False
    ops: tuple[str, ...] = ()
    source: str = "DSL"  # what the spec is written in: the DSL of alignbot.checks.dsl (autotest)

    def matches(self, patterns: Iterable[str]) -> bool:
        names = {self.name, self.name.rsplit(".", 1)[-1], *self.ops}
        names |= {op.rsplit(".", 1)[-1] for op in self.ops}
        return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)


_REGISTRY: dict[str, Spec] = {}


def autotest(n: int = 20, rtol: float | None = None, atol: float | None = None,
             backward: bool = True, raises: bool = False, ops: Iterable[str] = (),
             name: str | None = None) -> Callable[[SpecFn], SpecFn]:
    """Register ``fn(torch)`` as a spec drawn ``n`` times; tolerances override the dtype table."""
    if (rtol is None) != (atol is None):
        raise ValueError("autotest: give both rtol and atol, or neither")

    def register(fn: SpecFn) -> SpecFn:
        family = fn.__module__.rsplit(".", 1)[-1]
        spec = Spec(name=name or f"{family}.{fn.__name__}", fn=fn, n=n, rtol=rtol, atol=atol,
                    backward=backward, raises=raises, ops=tuple(ops))
        _REGISTRY[spec.name] = spec
        fn.spec = spec  # type: ignore[attr-defined]
        return fn

    return register


def all_specs() -> list[Spec]:
    """Every registered spec, by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]
