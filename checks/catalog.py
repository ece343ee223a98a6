"""What ``alignbot specs`` lists: each spec's name, ops, source and the dtypes it draws."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
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


# The DTYPES column's width: a longer list continues under it on the next lines, so that each
# row is written as soon as its spec is drawn (the widths cannot wait for the last one).
DTYPES_WIDTH = 24
HEADER = ("NAME", "SOURCE", "DTYPES", "OPS")


class Table:
    """The listing for a terminal, written a row at a time: NAME and SOURCE are as wide as the
    widest of all the specs (known before any is drawn), DTYPES wraps at its width."""

    def __init__(self, rows: Iterable[Spec | CatalogEntry], write: Callable[[str], object]
                 ) -> None:
        rows = list(rows)
        self.widths = (max([len(HEADER[0]), *(len(r.name) for r in rows)]),
                       max([len(HEADER[1]), *(len(r.source) for r in rows)]), DTYPES_WIDTH)
        self.write, self.count = write, 0
        self._line(HEADER)

    def _line(self, cells: tuple[str, str, str, str]) -> None:
        padded = [cell.ljust(width) for cell, width in zip(cells, self.widths, strict=False)]
        self.write("  ".join([*padded, cells[3]]).rstrip() + "\n")

    def row(self, e: CatalogEntry) -> None:
        chunks = _wrap(list(e.dtypes), DTYPES_WIDTH) or ["-"]
        self._line((e.name, e.source, chunks[0], ", ".join(e.ops) or "-"))
        for more in chunks[1:]:
            self._line(("", "", more, ""))
        self.count += 1

    def end(self) -> None:
        self.write(f"{self.count} spec{'s' if self.count != 1 else ''}\n")


def _wrap(names: list[str], width: int) -> list[str]:
    """``names`` joined by commas into lines of at most ``width`` (a longer name alone)."""
    lines: list[str] = []
    for name in names:
        if lines and len(lines[-1]) + 1 + len(name) <= width:
            lines[-1] += "," + name
        else:
            lines.append(name)
    return lines


def render(entries: list[CatalogEntry]) -> str:
    """The whole table as one text (what :class:`Table` writes row by row)."""
    parts: list[str] = []
    table = Table(entries, parts.append)
    for e in entries:
        table.row(e)
    table.end()
    return "".join(parts)
