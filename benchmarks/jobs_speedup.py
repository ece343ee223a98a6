"""Wall time of one `alignbot check` with `--jobs 1` and with `--jobs N`, and whether the
reports are byte-identical."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def command(args: argparse.Namespace, jobs: int, out: Path) -> list[str]:
    who = (["--prelude", (FIXTURES / "planted_prelude.py").read_text(), "--spec-file",
            str(FIXTURES / "planted_specs.py"), "--timeout", "3"] if args.planted
           else ["--candidate", args.candidate])
    extra = [] if args.minimize or args.planted else ["--no-minimize"]
    ops = ["--ops", args.ops] if args.ops else []
    n = ["--n", str(args.n)] if args.n else []
    return [sys.executable, "-m", "alignbot.checks.cli", "check", *who, *ops, *n, "--seed",
            str(args.seed), "--jobs", str(jobs), "--json", str(out), "--no-timings",
            "--no-progress", *extra]


def run(args: argparse.Namespace, jobs: int, out: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command(args, jobs, out), cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"alignbot check --jobs {jobs} failed ({done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2, help="compared with --jobs 1")
    parser.add_argument("--candidate", default="torch", help="preset (default: torch)")
    parser.add_argument("--planted", action="store_true",
                        help="the planted-bug candidate and specs of tests/fixtures, minimized")
    parser.add_argument("--minimize", action="store_true", help="minimize findings too")
    parser.add_argument("--ops", default="", help="spec globs (default: every spec)")
    parser.add_argument("--n", type=int, default=10, help="draws per spec (0: each spec's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, alternating")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    times: dict[int, list[float]] = {1: [], args.jobs: []}
    with tempfile.TemporaryDirectory() as folder:
        reports = {jobs: Path(folder) / f"jobs{jobs}.json" for jobs in times}
        for _ in range(args.repeat):
            for jobs in times:
                times[jobs].append(run(args, jobs, reports[jobs]))
        identical = reports[1].read_bytes() == reports[args.jobs].read_bytes()
        report = json.loads(reports[1].read_text())
    median = {jobs: statistics.median(seconds) for jobs, seconds in times.items()}
    figures = {"cores": len(os.sched_getaffinity(0)), "jobs": args.jobs,
               "specs": report["specs_run"], "programs": report["programs_run"],
               "findings": len(report["findings"]), "seconds": times,
               "median_seconds": median, "ratio": median[1] / median[args.jobs],
               "identical_reports": identical}
    print(f"{figures['specs']} specs, {figures['programs']} programs, "
          f"{figures['findings']} findings, {figures['cores']} usable cores")
    for jobs, seconds in times.items():
        print(f"--jobs {jobs}: median {median[jobs]:.1f} s "
              f"({', '.join(f'{s:.1f}' for s in seconds)})")
    print(f"ratio (--jobs 1 time / --jobs {args.jobs} time): {figures['ratio']:.2f}x; "
          f"reports {'byte-identical' if identical else 'DIFFER'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
