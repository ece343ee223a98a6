"""A pull request's check time with its merge base's report cached, and without (on Paddle,
whose torch-compat mode has many pre-existing divergences).

The App's check of a pull request runs the engine twice when the baseline is not cached: the
merge base as drawn (``--no-minimize``), then the head against it (``--baseline``: only new
findings are minimized, the base's undrawn findings replayed). With the baseline cached it
runs the head alone. This times the same two engine commands (outside the sandbox) on a
head that plants one bug over Paddle (``PLANTED``), and prints both totals.

    ALIGNBOT_PADDLE_PYTHON=… .venv/bin/python benchmarks/baseline_cache.py
    … baseline_cache.py --ops 'activations.*,elementwise.*' --n 4 --json figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "import paddle\npaddle.enable_compat()\nimport torch\n"
# the pull request: one module's forward off by 0.1 %
PLANTED = BASE + ("_forward = torch.nn.Softplus.forward\n"
                  "torch.nn.Softplus.forward = lambda self, input: _forward(self, input) * 1.001\n")


def run(python: str, prelude: str, args: argparse.Namespace, out: Path, *extra: str
        ) -> tuple[float, dict[str, Any]]:
    """Seconds one ``alignbot check`` took, and its report."""
    alignbot = Path(sys.executable).with_name("alignbot")
    command = [str(alignbot), "check", "--prelude", prelude, "--python", python,
               "--ops", args.ops, "--n", str(args.n), "--seed", str(args.seed),
               "--jobs", str(args.jobs), "--json", str(out), "--no-progress", "--no-timings",
               *extra]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"alignbot check failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(out.read_text())


def measure(python: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="alignbot-bench-") as tmp:
        base_json, head_json = Path(tmp) / "base.json", Path(tmp) / "head.json"
        base_s, base = run(python, BASE, args, base_json, "--no-minimize")
        head_s, head = run(python, PLANTED, args, head_json, "--baseline", str(base_json))
    new = [f for f in head["findings"] if f.get("baseline") == "new"]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"), "ops": args.ops, "n": args.n,
        "seed": args.seed, "jobs": args.jobs, "specs": head["specs_run"],
        "programs": head["programs_run"], "base_findings": len(base["findings"]),
        "pre_existing": len(head["findings"]) - len(new), "new": len(new),
        "rechecked": len(head.get("rechecked", [])),
        "base_seconds": round(base_s, 1), "head_seconds": round(head_s, 1),
        "without_cache_seconds": round(base_s + head_s, 1),
        "with_cache_seconds": round(head_s, 1),
        "speedup": round((base_s + head_s) / head_s, 2) if head_s else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="activations.*,elementwise.*",
                        help="spec globs (default: the activations and elementwise families)")
    parser.add_argument("--n", type=int, default=4, help="draws per spec (default 4)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="engine workers (default 2)")
    parser.add_argument("--python", default=os.environ.get("ALIGNBOT_PADDLE_PYTHON", ""),
                        help="Paddle's interpreter (default: $ALIGNBOT_PADDLE_PYTHON)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures here")
    args = parser.parse_args(argv)
    if not args.python or not os.path.exists(args.python):
        print("baseline_cache: set ALIGNBOT_PADDLE_PYTHON or --python", file=sys.stderr)
        return 2
    figures = measure(args.python, args)
    print(f"{figures['specs']} specs, {figures['programs']} programs; base: "
          f"{figures['base_findings']} findings; head: {figures['pre_existing']} pre-existing, "
          f"{figures['new']} new, {figures['rechecked']} replayed")
    print(f"without a cached baseline: {figures['without_cache_seconds']} s "
          f"(base {figures['base_seconds']} s + head {figures['head_seconds']} s)")
    print(f"with the baseline cached:  {figures['with_cache_seconds']} s "
          f"({figures['speedup']}x faster)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
