"""What a default ``alignbot check`` costs and covers: the wall-clock time of one run with no
option but the candidate (built-in library and OpInfo/ModuleInfo specs, at most
``OPINFO_DRAWS`` draws per OpInfo spec, ``--jobs`` the usable cores), and the share of (op,
dtype, variant) cells its programs exercise.

The cells are counted from the same programs drawn again on the reference alone (the draws
depend on the seed and the specs only). A cell is an op called by a drawn program, the dtype of
its first tensor argument, and a variant: whether a tensor argument is a view that is not
contiguous (made by ``transpose``, a strided index, ``expand``, …) and whether one of the
program's inputs crosses a kernel tile (17 elements or more). The cells possible for an op are
its dtypes (those its OpInfo entries declare for the CPU that a program carries, or else those
the library draws for it) times the four variants.

    python benchmarks/default_run.py [--candidate torch] [--seed 0] [--json FILE] [--no-run]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

from alignbot.checks.engine import draw_programs
from alignbot.checks.spec_loading import SpecSource

VIEWS = frozenset({"transpose", "t", "mT", "permute", "expand", "expand_as", "__getitem__",
                   "narrow", "as_strided", "movedim", "swapaxes", "diagonal", "unfold"})
TILE = 17
VARIANTS = tuple((layout, size) for layout in ("contiguous", "non-contiguous")
                 for size in ("small", "tile-crossing"))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(candidate: str, seed: int, ops: str) -> tuple[float, float, dict[str, Any]]:
    """One default ``alignbot check``: its wall-clock seconds, the CPU seconds of all its
    processes (what a loaded machine does not inflate) and its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cpu = _children_cpu()
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "alignbot.checks.cli", "check", "--candidate",
                               candidate, "--seed", str(seed), "--no-progress", "--json",
                               str(report), *(["--ops", ops] if ops else [])],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
        cpu = _children_cpu() - cpu
        if proc.returncode not in (0, 1):
            raise SystemExit(f"alignbot check exited {proc.returncode}: {proc.stderr[-2000:]}")
        return seconds, cpu, json.loads(report.read_text())


def _cells_of(program: dict[str, Any]) -> set[tuple[str, str, tuple[str, str]]]:
    nodes = {node["id"]: node for node in program["nodes"]}
    dtypes: dict[str, str] = {i: n["dtype"] for i, n in nodes.items() if n["op"] == "input"}
    views = {i for i, n in nodes.items()
             if n["op"] != "input" and n.get("target", "").rsplit(".", 1)[-1] in VIEWS}
    large = any(_numel(n["shape"]) >= TILE for n in nodes.values() if n["op"] == "input")
    cells = set()
    for node in program["nodes"]:
        if node["op"] == "input" or "target" not in node:
            continue
        refs = _refs([node.get("args", []), node.get("kwargs", {})])
        for ref in refs:  # a computed argument takes its first input's dtype
            dtypes.setdefault(ref, next((dtypes[r] for r in refs if r in dtypes), "?"))
        dtypes.setdefault(node["id"], dtypes.get(refs[0], "?") if refs else "?")
        if not refs:
            continue
        layout = "non-contiguous" if any(r in views for r in refs) else "contiguous"
        cells.add((node["target"], dtypes[refs[0]],
                   (layout, "tile-crossing" if large else "small")))
    return cells


def _numel(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        if set(value) == {"ref"}:
            return [value["ref"]]
        return [r for v in value.values() for r in _refs(v)]
    if isinstance(value, list):
        return [r for v in value for r in _refs(v)]
    return []


def declared_dtypes() -> dict[str, set[str]]:
    """Each OpInfo target's CPU dtypes that a program carries."""
    from alignbot.checks.opinfo import adapter
    from alignbot.checks.opinfo.specs import entry_dtypes

    declared: dict[str, set[str]] = defaultdict(set)
    for entry in adapter.database().entries:
        declared[entry.target].update(entry_dtypes(entry))
    return declared


def coverage(seed: int, ops: str) -> dict[str, Any]:
    """Draw every default spec's programs on the reference and count the cells."""
    from alignbot.checks.cli import could_match_opinfo
    from alignbot.checks.opinfo import OPINFO_DRAWS

    seen: set[tuple[str, str, tuple[str, str]]] = set()
    patterns = [p for p in ops.split(",") if p]
    opinfo = could_match_opinfo(patterns)  # as the check itself: the database read only then
    source = SpecSource(library=True, opinfo=opinfo,
                        opinfo_draws=None if patterns else OPINFO_DRAWS)
    for spec in source.load():
        if patterns and not spec.matches(patterns):
            continue
        def visit(program: dict[str, Any], ref: Any) -> None:
            seen.update(_cells_of(program))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                draw_programs(spec, spec.n, seed, visit)
            except Exception as exc:  # a spec that fails to draw exercises nothing more
                print(f"  {spec.name}: {type(exc).__name__}", file=sys.stderr)
    declared = declared_dtypes() if opinfo else {}
    drawn: dict[str, set[str]] = defaultdict(set)
    seen = {cell for cell in seen if cell[1] != "?"}  # a value no input's dtype reaches
    for op, dtype, _ in seen:
        drawn[op].add(dtype)
    possible = {(op, dtype, variant) for op in drawn
                for dtype in (declared.get(op) or drawn[op]) for variant in VARIANTS}
    hit = seen & possible
    by_variant = {" ".join(v): sum(1 for c in hit if c[2] == v) for v in VARIANTS}
    return {"ops": len(drawn), "cells_possible": len(possible), "cells_exercised": len(hit),
            "share": round(len(hit) / len(possible), 4) if possible else 0.0,
            "exercised_by_variant": by_variant}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", default="torch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-run", action="store_true", help="count the cells only")
    parser.add_argument("--ops", default="", help="only these specs (to try the script out)")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if not args.no_run:
        seconds, cpu, report = timed_run(args.candidate, args.seed, args.ops)
        figures.update(seconds=round(seconds, 1), cpu_seconds=round(cpu, 1),
                       specs=report["specs_run"], programs=report["programs_run"],
                       findings=len(report["findings"]))
        print(f"default run: {seconds:.1f} s ({cpu:.0f} CPU s), {report['specs_run']} specs, "
              f"{report['programs_run']} programs, {len(report['findings'])} findings")
    figures.update(coverage(args.seed, args.ops))
    print(f"cells: {figures['cells_exercised']} of {figures['cells_possible']} "
          f"({100 * figures['share']:.1f}%) over {figures['ops']} ops; by variant: "
          + ", ".join(f"{k} {v}" for k, v in figures["exercised_by_variant"].items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
