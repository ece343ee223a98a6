"""Measure minimisation (shrink → slice → simplify) per finding on the planted bugs.

Two views, both on tests/fixtures' planted-bug candidate:

* **as check runs it**: ``alignbot check`` keeps, per fingerprint, the smallest failing draw
  and minimises that: oracle calls and seconds per finding.
* **from every failing draw**: each draw that fails is minimised on its own, which shows how
  the shrinker copes with larger starting programs (the shapes drawn for ``cos_any_shape``
  go up to 4 x 5 x 5 x 5).

Prints a table and the medians; ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from alignbot.checks import CandidateConfig, CandidateProcess
from alignbot.checks.engine import check, draw_programs, evaluate, input_elements
from alignbot.checks.findings import Finding
from alignbot.checks.minimize import reduce
from alignbot.checks.oracle import ShrinkBudget
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
TARGET_SECONDS, TARGET_CALLS = 20.0, 300


def minimise(finding: Finding, spec: Spec, candidate: CandidateProcess,
             calls: int, seconds: float) -> dict[str, Any]:
    budget = ShrinkBudget(calls, seconds)
    start = time.perf_counter()
    _, current, program = reduce(finding, spec, candidate, budget)
    return {"spec": spec.name, "kind": finding.kind.value, "op": finding.op,
            "calls": budget.calls, "seconds": round(time.perf_counter() - start, 3),
            "elements_before": input_elements(finding.program),
            "elements_after": input_elements(program),
            "same_fingerprint": current.fingerprint == finding.fingerprint}


def failing_draws(spec: Spec, candidate: CandidateProcess, n: int, seed: int
                  ) -> list[Finding]:
    found: list[Finding] = []

    def visit(program: dict[str, Any], ref: Any) -> None:
        found.extend(evaluate(spec, program, ref, candidate)[:1])

    draw_programs(spec, n, seed, visit)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--calls", type=int, default=TARGET_CALLS)
    parser.add_argument("--seconds", type=float, default=TARGET_SECONDS)
    parser.add_argument("--per-spec", type=int, default=3,
                        help="failing draws minimised per spec in the second view")
    parser.add_argument("--skip-hang", action="store_true",
                        help="leave out the hanging op (each of its calls waits --timeout)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    specs = load_file(FIXTURES / "planted_specs.py") + load_file(FIXTURES / "shrink_specs.py")
    if args.skip_hang:
        specs = [s for s in specs if not s.name.endswith("selu_hang")]
    prelude = (FIXTURES / "planted_prelude.py").read_text() + "\n" + (
        FIXTURES / "shrink_prelude.py").read_text()
    by_name = {s.name: s for s in specs}
    config = CandidateConfig("planted", prelude, timeout=3.0)
    as_check, every = [], []
    with CandidateProcess(config) as candidate:
        result = check(specs, candidate, seed=args.seed)
        for finding in result.findings:
            as_check.append(minimise(finding, by_name[finding.spec], candidate, args.calls,
                                     args.seconds))
        for spec in specs:
            for finding in failing_draws(spec, candidate, spec.n, args.seed)[:args.per_spec]:
                every.append(minimise(finding, spec, candidate, args.calls, args.seconds))

    figures = {"as_check": as_check, "every_draw": every}
    for name, rows in list(figures.items()):
        print(f"\n{name.replace('_', ' ')}: {len(rows)} minimisations")
        print(f"  {'spec':34} {'kind':18} {'calls':>5} {'seconds':>8} {'elements':>10}")
        for row in rows:
            print(f"  {row['spec'][-34:]:34} {row['kind']:18} {row['calls']:5d} "
                  f"{row['seconds']:8.2f} {row['elements_before']:4d} -> "
                  f"{row['elements_after']:<4d}{'' if row['same_fingerprint'] else ' CHANGED'}")
        calls = statistics.median(r["calls"] for r in rows)
        seconds = statistics.median(r["seconds"] for r in rows)
        print(f"  median: {calls:g} oracle calls, {seconds:.2f} s per finding (targets: under "
              f"{TARGET_CALLS} calls and {TARGET_SECONDS:g} s); max {max(r['calls'] for r in rows)}"
              f" calls, {max(r['seconds'] for r in rows):.2f} s")
        figures[f"{name}_median"] = {"calls": calls, "seconds": seconds}  # type: ignore[assignment]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
