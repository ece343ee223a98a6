"""Seconds per finding: minimization, repro verification and triage of each finding, timed one
finding at a time, with the oracles that need PyTorch alone in warm forks (the default) and in
fresh interpreters (``--cold``, the old path); ``--compare`` runs both on the same findings in
one run and says whether findings, verdicts and repro texts are identical.

    .venv/bin/python benchmarks/per_finding.py --compare                 # a planted candidate
    .venv/bin/python benchmarks/per_finding.py --compare --candidate torchax \\
        --python .venv-torchax/bin/python --ops elementwise.cos,pooling.avg_pool2d --n 2

``--phases`` also prints where each finding's seconds went: shrinking, the repro's
verification, the reference's and the candidate's runs of the minimized program, the triage
oracles, and the PyTorch-alone script.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from alignbot.checks import minimize as minimizing  # noqa: E402
from alignbot.checks import presets  # noqa: E402
from alignbot.checks.candidate import CandidateProcess  # noqa: E402
from alignbot.checks.engine import check  # noqa: E402
from alignbot.checks.findings import Finding  # noqa: E402
from alignbot.checks.minimize import MinimizeOptions, minimize_all  # noqa: E402
from alignbot.checks.spec import Spec  # noqa: E402
from alignbot.checks.spec_loading import SpecSource  # noqa: E402
from alignbot.checks.vocab import relative_interpreter  # noqa: E402

PLANTED = ROOT / "tests" / "fixtures"


def _specs(args: argparse.Namespace) -> list[Spec]:
    if args.candidate is None:  # the planted candidate and its specs
        source = SpecSource(library=False, files=(PLANTED / "planted_specs.py",
                                                  PLANTED / "module_bug_specs.py"))
    else:
        source = SpecSource(library=True)
    patterns = [p for p in args.ops.split(",") if p]
    return [spec for spec in source.load() if not patterns or spec.matches(patterns)]


PHASES = {  # phase: the name alignbot.checks.minimize calls it by
    "shrink": "reduce", "verify repro": "make", "reference run": "reference_observations",
    "oracles": "oracle_observations", "pytorch-alone": "reference_only",
    "reference-suspect script": "reference_alone",
}


class PhaseClock:
    """Seconds spent in each phase of ``minimize``, by wrapping the functions it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> PhaseClock:
        for phase, name in PHASES.items():
            owner = minimizing.repros if hasattr(minimizing.repros, name) and not hasattr(
                minimizing, name) else minimizing
            self._wrap(owner, name, phase)
        return self

    def _wrap(self, owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + (
                    time.perf_counter() - start)

        self._saved.append((owner, name, original))
        setattr(owner, name, timed_call)

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)


def timed(findings: list[Finding], specs: list[Spec], candidate: CandidateProcess,
          cold: bool, args: argparse.Namespace) -> tuple[list[float], list[Finding]]:
    """Each finding minimized on its own (a copy): its seconds, and the results."""
    os.environ["ALIGNBOT_FRESH_ORACLES"] = "1" if cold else "0"
    seconds, done = [], []
    phases: list[dict[str, float]] = []
    for finding in findings:
        mine = copy.deepcopy(finding)
        start = time.perf_counter()
        with PhaseClock() as clock:
            minimize_all([mine], specs, candidate, candidate.config,
                         MinimizeOptions(max_calls=args.shrink_calls, max_seconds=1e9),
                         timings=False)
        seconds.append(time.perf_counter() - start)
        phases.append(clock.seconds)
        done.append(mine)
    if args.phases:
        names = list(PHASES)
        print("  seconds per phase, one line per finding: " + ", ".join(names) + ", other")
        for took, spent in zip(seconds, phases, strict=True):
            other = took - sum(spent.values())
            print("   " + " ".join(f"{spent.get(n, 0.0):6.1f}" for n in names) +
                  f" {other:6.1f}")
        print("   " + " ".join(f"{statistics.median(p.get(n, 0.0) for p in phases):6.1f}"
                               for n in names) + "  (medians)")
    return seconds, done


def summary(label: str, seconds: list[float], findings: list[Finding]) -> list[Any]:
    print(f"{label}: {len(seconds)} findings, median {statistics.median(seconds):.1f} s, "
          f"mean {statistics.mean(seconds):.1f} s per finding (total {sum(seconds):.0f} s)")
    rows = [(f.fingerprint, f.op, f.extra.get("verdict"), f.extra.get("repro_verified"))
            for f in findings]
    for row, took in zip(rows, seconds, strict=True):
        print(f"  {row[0]}  {row[1]:<40} {row[2]!s:<18} verified={row[3]}  {took:.1f} s")
    return [(*row, f.extra.get("repro")) for row, f in zip(rows, findings, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidate", help="a preset (default: the planted candidate)")
    parser.add_argument("--python", default=sys.executable, help="the candidate's interpreter")
    parser.add_argument("--ops", default="softplus_scaled,tanh_backward,linear_no_bias",
                        help="specs, as check --ops (default: three planted ones)")
    parser.add_argument("--n", type=int, default=2, help="draws per spec")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shrink-calls", type=int, default=100)
    parser.add_argument("--phases", action="store_true", help="seconds per phase too")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--cold", action="store_true", help="fresh interpreters only")
    how.add_argument("--compare", action="store_true", help="warm, then cold, on the same "
                     "findings")
    args = parser.parse_args()
    if relative_interpreter(args.python):  # as `alignbot check` reads it
        args.python = os.path.abspath(args.python)
    if args.candidate is None:
        config = presets.candidate(None, (PLANTED / "planted_prelude.py").read_text() +
                                   (PLANTED / "module_bug_prelude.py").read_text(),
                                   python=args.python)
    else:
        config = presets.candidate(args.candidate, None, python=args.python)
    specs = _specs(args)
    with CandidateProcess(config) as candidate:
        findings = check(specs, candidate, seed=args.seed, n=args.n).findings
        print(f"{config.name}: {len(specs)} specs, {len(findings)} findings to minimize")
        if not findings:
            return 0
        modes = [False, True] if args.compare else [args.cold]
        results = []
        for cold in modes:
            seconds, done = timed(findings, specs, candidate, cold, args)
            results.append(summary("cold (fresh interpreters)" if cold else
                                   "warm (forked oracles)", seconds, done))
    if args.compare:
        same = results[0] == results[1]
        print(f"warm and cold: {'identical' if same else 'DIFFERENT'} findings, verdicts "
              "and repro texts")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
