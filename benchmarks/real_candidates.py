"""What a default `alignbot check` gives on two real candidates nobody here wrote (torchax and
OpenVINO's torch.compile backend): findings, ops, verified repros, seconds per finding."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Library specs where torchax 0.0.13 or OpenVINO 2026.4.1 diverge from PyTorch 2.13 at seed 0
# (docs/benchmarks.md lists what each finds); the same sample for both.
SAMPLE = (
    "convolution.conv2d_module", "convolution.conv_functional",
    "convolution.conv_transpose_functional", "pooling.avg_pool2d", "pooling.lp_pool",
    "pooling.max_pool", "normalization.batch_norm", "normalization.instance_norm",
    "elementwise.cos", "elementwise.sqrt", "elementwise.atanh", "reductions.selection",
    "recurrent.recurrent_cell", "losses.binary_cross_entropy", "training.train_steps",
)
INTERPRETERS = {"torchax": "ALIGNBOT_TORCHAX_PYTHON", "openvino": "ALIGNBOT_OPENVINO_PYTHON"}


def run_check(candidate: str, python: str, specs: list[str], args: argparse.Namespace,
              out: Path, minimize: bool) -> float:
    command = [str(Path(sys.executable).with_name("alignbot")), "check", "--candidate",
               candidate, "--python", python, "--ops", ",".join(specs), "--seed",
               str(args.seed), "--jobs", str(args.jobs), "--json", str(out), "--no-progress"]
    command += ["--n", str(args.n)] if args.n else []
    command += [] if minimize else ["--no-minimize"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"alignbot check failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def phase_seconds(finding: dict[str, Any]) -> dict[str, float]:
    """The seconds a finding's report gives per phase: any mapping of phase names to seconds
    under ``phases`` or ``timings``, and shrinking's own (``shrink.seconds``)."""
    phases: dict[str, float] = {}
    for key in ("phases", "timings"):
        given = finding.get(key)
        if isinstance(given, dict):
            phases.update({str(k): float(v) for k, v in given.items()
                           if isinstance(v, (int, float))})
    shrink = finding.get("shrink") or {}
    if isinstance(shrink.get("seconds"), (int, float)) and "shrink" not in phases:
        phases["shrink"] = float(shrink["seconds"])
    return phases


def figures(report: dict[str, Any], seconds: float, plain_seconds: float | None
            ) -> dict[str, Any]:
    findings = report["findings"]
    count = len(findings)
    per_finding = [sum(phase_seconds(f).values()) for f in findings]
    phases: dict[str, list[float]] = {}
    for f in findings:
        for name, value in phase_seconds(f).items():
            phases.setdefault(name, []).append(value)
    causes = report.get("causes")
    return {
        "findings": count,
        "causes": len(causes) if isinstance(causes, list) else None,
        "distinct_ops": len({f["op"] for f in findings}),
        "draws": sum(f.get("count", 1) for f in findings),
        "repros_verified": sum(f.get("repro_verified") is True for f in findings),
        "verdicts": dict(Counter(str(f.get("verdict")) for f in findings)),
        "kinds": dict(Counter(f["kind"] for f in findings)),
        "programs": report["programs_run"],
        "complete": report["complete"],
        "seconds": round(seconds, 1),
        "seconds_without_minimizing": None if plain_seconds is None else round(plain_seconds, 1),
        "seconds_per_finding": round(seconds / count, 1) if count else None,
        "minimizing_seconds_per_finding": (round((seconds - plain_seconds) / count, 1)
                                           if count and plain_seconds is not None else None),
        "median_recorded_seconds_per_finding": (round(statistics.median(per_finding), 1)
                                                if per_finding else None),
        "median_phase_seconds": {name: round(statistics.median(values), 1)
                                 for name, values in sorted(phases.items())},
    }


def show(name: str, result: dict[str, Any]) -> None:
    def value(key: str) -> str:
        return "-" if result[key] is None else str(result[key])

    print(f"\n== {name}: {result['programs']} programs, "
          f"{'complete' if result['complete'] else 'INCOMPLETE'}")
    print(f"findings {result['findings']} ({result['draws']} draws), root causes "
          f"{value('causes')}, distinct ops {result['distinct_ops']}, repros verified "
          f"{result['repros_verified']}")
    print(f"seconds {result['seconds']} ({value('seconds_without_minimizing')} without "
          f"minimizing); per finding {value('seconds_per_finding')} "
          f"(minimizing alone {value('minimizing_seconds_per_finding')}); median recorded "
          f"per finding {value('median_recorded_seconds_per_finding')}")
    print("median phase seconds: " + (", ".join(
        f"{k} {v}" for k, v in result["median_phase_seconds"].items()) or "none recorded"))
    print(f"kinds: {result['kinds']}\nverdicts: {result['verdicts']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidate", choices=sorted(INTERPRETERS), action="append",
                        help="check only this one (repeatable; default both)")
    for name, variable in INTERPRETERS.items():
        parser.add_argument(f"--{name}-python", metavar="PATH",
                            default=os.environ.get(variable,
                                                   str(ROOT / f".venv-{name}/bin/python")),
                            help=f"its interpreter (default ${variable} or .venv-{name})")
    parser.add_argument("--specs", type=int, default=len(SAMPLE), metavar="K",
                        help=f"the first K specs of the sample (default all {len(SAMPLE)})")
    parser.add_argument("--n", type=int, help="draws per spec (default: each spec's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the --no-minimize run that splits off minimizing's time")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep each candidate's JSON report there (NAME.json)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    specs = list(SAMPLE[:args.specs])
    results: dict[str, Any] = {"specs": specs, "seed": args.seed, "n": args.n,
                               "jobs": args.jobs, "candidates": {}}
    for name in args.candidate or sorted(INTERPRETERS):
        python = getattr(args, f"{name}_python")
        if not Path(python).exists():
            print(f"no {name} interpreter at {python} (make candidates builds it)",
                  file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.keep or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            plain = None
            if not args.no_baseline:
                plain = run_check(name, python, specs, args, folder / f"{name}.plain.json",
                                  minimize=False)
            seconds = run_check(name, python, specs, args, folder / f"{name}.json",
                                minimize=True)
            report = json.loads((folder / f"{name}.json").read_text())
        result = figures(report, seconds, plain)
        results["candidates"][name] = result
        show(name, result)
    print(f"\n{len(specs)} specs, seed {args.seed}, --n {args.n or 'default'}, "
          f"--jobs {args.jobs}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
