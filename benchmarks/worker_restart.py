"""Seconds to restart a candidate's worker after a crash: a fresh interpreter (the old path,
``ALIGNBOT_FRESH_WORKERS=1``) against a fork of the zygote that imported torch already
(checks/zygote.py), measured in one run on the same prelude, and a whole crash-heavy check
(the planted candidate's crashing ops) timed both ways.

    .venv/bin/python benchmarks/worker_restart.py               # about 1 minute
    .venv/bin/python benchmarks/worker_restart.py --restarts 3 --no-check
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from alignbot.checks.candidate import CandidateConfig, CandidateProcess  # noqa: E402

CRASHING = ("import ctypes, torch\n"
            "torch.nn.functional.relu = lambda x: ctypes.string_at(0)\n")
PROGRAM = {
    "version": 1, "spec": "t.relu", "seed": 0, "choices": [],
    "nodes": [{"id": "v0", "op": "input", "dtype": "float32", "shape": [2, 3],
               "recipe": {"kind": "uniform", "low": -1.0, "high": 1.0, "seed": 5},
               "requires_grad": False},
              {"id": "v1", "op": "call", "target": "torch.nn.functional.relu",
               "args": [{"ref": "v0"}], "kwargs": {}}],
}


def restarts(fresh: bool, count: int) -> list[float]:
    """Seconds from a crash to the next worker's answer, ``count`` times."""
    os.environ["ALIGNBOT_FRESH_WORKERS"] = "1" if fresh else ""
    seconds = []
    with CandidateProcess(CandidateConfig("crashing", CRASHING)) as candidate:
        for _ in range(count):
            assert candidate.run(PROGRAM).died == "crash"  # type: ignore[arg-type]
            started = time.monotonic()
            candidate.start()
            seconds.append(time.monotonic() - started)
    return seconds


def crash_check(fresh: bool) -> float:
    """Seconds of `alignbot check` on the crashing fixture's ops, one worker."""
    env = {**os.environ, "ALIGNBOT_FRESH_WORKERS": "1" if fresh else ""}
    fixtures = ROOT / "tests" / "fixtures"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude",
         (fixtures / "crashing_prelude.py").read_text(), "--spec-file",
         str(fixtures / "planted_specs.py"), "--ops", "softplus*,tanh*,mean*", "--n", "2",
         "--jobs", "1", "--no-progress"], env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 1:
        raise SystemExit(f"the check ended with {proc.returncode}: {proc.stderr[-500:]}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=5, help="crashes per way (default 5)")
    parser.add_argument("--no-check", action="store_true", help="skip the whole check")
    args = parser.parse_args()
    fresh, forked = restarts(True, args.restarts), restarts(False, args.restarts)
    print(f"restart after a crash, median of {args.restarts}: fresh interpreter "
          f"{statistics.median(fresh):.2f} s, fork of the zygote "
          f"{statistics.median(forked):.3f} s "
          f"({statistics.median(fresh) / statistics.median(forked):.0f}x)")
    if not args.no_check:
        cold, warm = crash_check(True), crash_check(False)
        print(f"check of 3 specs with 2 crashing ops: fresh workers {cold:.1f} s, "
              f"zygote {warm:.1f} s ({cold / warm:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
