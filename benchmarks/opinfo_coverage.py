"""How much of PyTorch's OpInfo database the specs cover: entries, op names, OpInfo specs made
and skipped (and why), and the op names covered by the library's specs, the OpInfo specs and
both together; then the module classes of the ModuleInfo database that a ModuleInfo spec
exercises (a usable sample in some mode, for the first dtype and seed 0), and each class left
out with its reason.

An op name (``nn.functional.relu``) counts as covered by the library when one of a library
spec's declared ``ops`` is ``torch.<name>``, ``torch.Tensor.<name>`` or the entry's own
target; by the OpInfo specs when a spec was made for one of its entries. ``--draw N`` also
draws N programs from every OpInfo spec on the reference alone (no candidate) and counts the
specs that drew a call, those whose draws held no usable sample, and those whose drawing
failed, with the top reasons, and the (entry, dtype) pairs exercised: a drawn call whose
inputs had that dtype (every pair a spec can draw is "drawable": each dtype the entry declares
for the CPU that the Program format carries). ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from alignbot.checks.engine import draw_programs
from alignbot.checks.opinfo import adapter, modules
from alignbot.checks.opinfo.specs import catalog, entry_dtypes, render_not_carried, why_not_carried
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import library_specs


def library_names(names: frozenset[str], targets: dict[str, set[str]]) -> set[str]:
    ops = {op for spec in library_specs() for op in spec.ops}
    return {name for name in names
            if {f"torch.{name}", f"torch.Tensor.{name}", *targets.get(name, ())} & ops}


def sweep(specs: list[Spec], n: int) -> dict[str, Any]:
    """Draw ``n`` programs per spec on the reference alone."""
    drew, empty, failed = list[str](), list[str](), Counter[str]()
    examples: dict[str, str] = {}
    failures: list[str] = []
    pairs: dict[str, list[str]] = {}  # spec -> the input dtypes of its drawn calls
    for spec in specs:
        calls: list[int] = []
        dtypes: set[str] = set()

        def visit(program: dict[str, Any], ref: Any, calls: list[int] = calls,
                  dtypes: set[str] = dtypes) -> None:
            calls.append(sum(node["op"] != "input" for node in program["nodes"]))
            if calls[-1]:
                dtypes.update(node["dtype"] for node in program["nodes"]
                              if node["op"] == "input")

        try:
            draw_programs(spec, n, 0, visit)
        except Exception as exc:
            reason = type(exc).__name__ + ": " + str(exc).split(" (", 1)[0][-80:]
            failed[type(exc).__name__] += 1
            examples.setdefault(type(exc).__name__, f"{spec.name}: {reason}")
            failures.append(f"{spec.name}: {reason}")
            continue
        if any(calls):
            drew.append(spec.name)
            pairs[spec.name] = sorted(dtypes)
        else:
            empty.append(spec.name)
    return {"drew_a_call": len(drew), "drew_specs": drew, "no_usable_sample": len(empty),
            "empty_specs": empty, "failed": dict(failed), "failed_examples": examples,
            "failures": failures, "dtypes_drawn": pairs}


def module_coverage() -> dict[str, Any]:
    """Print and return how many ModuleInfo module classes a spec exercises."""
    start = time.perf_counter()
    covered = modules.coverage()
    seconds = time.perf_counter() - start
    share = 100 * len(covered.exercised) / covered.total
    print(f"module_db: {covered.total} module classes, {len(covered.exercised)} exercised by "
          f"a ModuleInfo spec ({share:.1f}%; judged in {seconds:.1f} s); left out:")
    for name, reason in covered.left_out.items():
        print(f"  {name}: {reason}")
    return {"module_classes": covered.total, "module_classes_exercised": len(covered.exercised),
            "module_classes_left_out": covered.left_out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draw", type=int, default=0, metavar="N",
                        help="draw N programs from every OpInfo spec on the reference")
    parser.add_argument("--ops", default="", metavar="GLOB,…",
                        help="only OpInfo specs matching these globs (for --draw)")
    parser.add_argument("--json", type=Path, metavar="FILE")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    data = adapter.database()
    made = catalog()
    load_s = time.perf_counter() - start
    targets: dict[str, set[str]] = {}
    for entry in data.entries:
        targets.setdefault(entry.name, set()).add(entry.target)
    spec_entries = {spec.name for spec in made.specs}
    opinfo = {e.name for e in data.entries if f"opinfo.{e.key}" in spec_entries}
    library = library_names(data.names, targets)
    figures: dict[str, Any] = {
        "entries": data.total, "op_names": len(data.names), "load_seconds": round(load_s, 1),
        "entries_with_a_spec": sum(1 for s in made.specs if not s.name.endswith(".errors")),
        "error_specs": sum(1 for s in made.specs if s.name.endswith(".errors")),
        "entries_skipped": dict(made.skipped.most_common()),
        "dtypes_left_out": dict(made.dtypes_left_out.most_common()),
        "dtypes_left_out_why": {d: why_not_carried(d) for d in made.dtypes_left_out},
        "names_library": len(library), "names_opinfo": len(opinfo),
        "names_either": len(library | opinfo),
        "entry_dtype_pairs_drawable": sum(len(entry_dtypes(e)) for e in data.entries
                                          if f"opinfo.{e.key}" in spec_entries),
    }
    names = len(data.names)
    print(f"op_db: {data.total} entries, {names} distinct op names (loaded in {load_s:.1f} s)")
    print(f"OpInfo specs: {figures['entries_with_a_spec']} entries with a spec, "
          f"{figures['error_specs']} error-input specs; "
          f"{sum(made.skipped.values())} entries skipped:")
    for reason, count in made.skipped.most_common():
        print(f"  {count:4d}  {reason}")
    print(render_not_carried(made.dtypes_left_out), end="")
    print(f"(entry, dtype) pairs drawable: {figures['entry_dtype_pairs_drawable']}")
    for label, key in (("library specs", "names_library"), ("OpInfo specs", "names_opinfo"),
                       ("either", "names_either")):
        print(f"op names covered by {label}: {figures[key]} of {names} "
              f"({100 * figures[key] / names:.1f}%)")
    figures.update(module_coverage())
    if args.draw:
        pats = [p for p in args.ops.split(",") if p]
        chosen = [s for s in made.specs if not pats or s.matches(pats)]
        start = time.perf_counter()
        figures["draw"] = sweep(chosen, args.draw)
        figures["draw"]["seconds"] = round(time.perf_counter() - start, 1)
        swept = figures["draw"]
        print(f"drawing {args.draw} programs from each of {len(chosen)} specs on the reference "
              f"({swept['seconds']} s): {swept['drew_a_call']} drew a call, "
              f"{swept['no_usable_sample']} had no usable sample, "
              f"{sum(swept['failed'].values())} failed")
        entry_of = {f"opinfo.{e.key}{end}": e.name for e in data.entries
                    for end in ("", ".errors")}
        drawn = {entry_of[name] for name in swept["drew_specs"]}
        swept["names_drawn"] = len(drawn)
        print(f"op names whose OpInfo specs drew a call: {len(drawn)} of {names} "
              f"({100 * len(drawn) / names:.1f}%); with the library's: "
              f"{len(drawn | library)} ({100 * len(drawn | library) / names:.1f}%)")
        declared = {f"opinfo.{e.key}": set(entry_dtypes(e)) for e in data.entries}
        chosen_pairs = sum(len(declared[s.name]) for s in chosen if s.name in declared)
        exercised = sum(len(declared[name] & set(dtypes))
                        for name, dtypes in swept["dtypes_drawn"].items() if name in declared)
        swept["entry_dtype_pairs_exercised"] = exercised
        print(f"(entry, dtype) pairs exercised by these draws: {exercised} of {chosen_pairs} "
              f"drawable ({100 * exercised / max(chosen_pairs, 1):.1f}%)")
        for kind, example in swept["failed_examples"].items():
            print(f"  {swept['failed'][kind]:4d}  {example}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
