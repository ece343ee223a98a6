"""What ``alignbot specs`` lists: each spec's name, ops, source and the dtypes it draws."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from .engine import Observations, Program, draw_programs
from .runtime.dtypes import TABLE
from .spec import Spec

DTYPE_ORDER = tuple(row.name for row in TABLE)


@dataclass(frozen=True)
class CatalogEntry:
    """One spec as listed. ``dtypes`` are those its input tensors had in the programs it
    drew for ``seed`` (what ``alignbot check --seed SEED`` draws from it)."""

    name: str
    ops: tuple[str, ...]
    source: str
    dtypes: tuple[str, ...]
    draws: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ops": list(self.ops), "source": self.source,
                "dtypes": list(self.dtypes), "draws": self.draws}


def _dtype_key(name: str) -> tuple[int, str]:
    return (DTYPE_ORDER.index(name) if name in DTYPE_ORDER else len(DTYPE_ORDER), name)


def entry(spec: Spec, seed: int = 0, n: int | None = None) -> CatalogEntry:
    """Draw the spec's programs on the reference (no candidate) and list what it uses."""
    dtypes: set[str] = set()

    def visit(program: Program, ref: Observations) -> None:
        dtypes.update(node["dtype"] for node in program["nodes"] if node["op"] == "input")

    draws = n or spec.n
    with warnings.catch_warnings():  # torch's UserWarnings say nothing about the listing
        warnings.simplefilter("ignore")
        draw_programs(spec, draws, seed, visit)
    return CatalogEntry(spec.name, spec.ops, spec.source, tuple(sorted(dtypes, key=_dtype_key)),
                 draws)


def render(entries: list[CatalogEntry]) -> str:
    """A table for a terminal, one spec a line, and a count."""
    rows = [("NAME", "SOURCE", "DTYPES", "OPS")] + [
        (e.name, e.source, ",".join(e.dtypes) or "-", ", ".join(e.ops) or "-")
        for e in entries]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)),
                        row[3]]).rstrip() for row in rows]
    count = len(entries)
    return "\n".join(lines) + f"\n{count} spec{'s' if count != 1 else ''}\n"
