"""How many of the library's choice-point alternatives its specs draw at their default ``n``,
with the first draws steered to cover them (checks/explore.py) and with free draws only.

Draws every library spec on the reference alone (no candidate) both ways and prints, per way,
the alternatives seen and drawn, the specs that left some undrawn, and the seconds it took;
``--specs`` narrows to names matching a glob, ``--n`` overrides each spec's own count,
``--list`` names the undrawn alternatives, ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from alignbot.checks.engine import draw_programs
from alignbot.checks.explore import Exploration
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import library_specs


def sweep(specs: list[Spec], n: int | None, steer: bool) -> dict[str, Any]:
    """Draw every spec; a spec whose drawing fails is counted and named, not drawn again."""
    start = time.perf_counter()
    runs: list[Exploration] = []
    failed: dict[str, str] = {}
    for spec in specs:
        try:
            runs.append(draw_programs(spec, n or spec.n, 0, lambda p, r: None, steer))
        except Exception as exc:
            failed[spec.name] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return {"seen": sum(r.seen for r in runs), "drawn": sum(r.drawn for r in runs),
            "specs_missing": sum(bool(r.missed) for r in runs),
            "missed": {r.spec: r.missed for r in runs if r.missed}, "failed": failed,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--specs", nargs="*", default=None, help="spec name globs")
    parser.add_argument("--n", type=int, default=None, help="draws per spec (default: its own)")
    parser.add_argument("--list", action="store_true", help="name the undrawn alternatives")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    specs = [s for s in library_specs() if args.specs is None or s.matches(args.specs)]
    figures: dict[str, Any] = {"specs": len(specs)}
    for way, steer in (("free", False), ("steered", True)):
        result = figures[way] = sweep(specs, args.n, steer)
        print(f"{way:8} {result['drawn']}/{result['seen']} alternatives drawn; "
              f"{result['specs_missing']}/{len(specs)} specs left some undrawn, "
              f"{len(result['failed'])} failed to draw ({result['seconds']} s)")
        for spec, reason in result["failed"].items():
            print(f"    FAILED {spec}: {reason}")
        if args.list:
            for spec, missed in result["missed"].items():
                print(f"    {spec}: {', '.join(missed)}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
