"""What a sandbox costs before the pull request's code runs: one command through the sandbox
(``true`` as a setup command), with bubblewrap's namespaces and without, and the fixed cost
of one check (work folder, virtual environment, cgroups, quota) besides.

    python benchmarks/sandbox_start.py [--repeat 10]

Per command = (time of 1 + R commands - time of 1 command) / R, median of 3 tries each. The
first check of a process also pays bubblewrap's probe and the scan of the allowed trees for
socket files and FIFOs (reused for ``view.SCAN_SECONDS``): printed apart.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from alignbot.bot.config import load_config  # noqa: E402
from alignbot.bot.sandbox import Containment, SandboxLimits, run_check  # noqa: E402


class Refused(Exception):
    """The sandbox would not run here (its reason)."""


def _check(repo: Path, commands: int, containment: Containment) -> float:
    setup = ", ".join(["'true'"] * commands + ["'exit 3'"])
    config = load_config(f"candidate:\n  preset: torch\n  setup: [{setup}]\n")
    started = time.monotonic()
    result = run_check(repo, config, [], SandboxLimits(wall_seconds=120), containment)
    elapsed = time.monotonic() - started
    if result.reason != "setup command `exit 3` failed with exit status 3":
        raise Refused(str(result.reason))
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        (repo / "README.md").write_text("x\n")
        first = time.monotonic()
        _check(repo, 0, Containment())
        print(f"first check of the process (probe and scans included): "
              f"{time.monotonic() - first:.2f} s")
        for name, containment in (("bubblewrap", Containment()),
                                  ("no namespaces", Containment(namespaces=False))):
            try:
                one = statistics.median(_check(repo, 0, containment) for _ in range(3))
                many = statistics.median(_check(repo, args.repeat, containment)
                                         for _ in range(3))
            except Refused as exc:
                print(f"{name}: {exc}")
                continue
            per = (many - one) / args.repeat
            print(f"{name}: {per * 1000:.0f} ms per command, {(one - per) * 1000:.0f} ms "
                  "per check besides")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
