"""`make demo`: check the example kernel library (examples/fastops) against PyTorch."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from checks.cli import main

HERE = Path(__file__).resolve().parent
PRELUDE = f"""import sys
sys.path.insert(0, {str(HERE / 'fastops')!r})
import torch, fastops
fastops.enable()
"""


def run() -> int:
    out = Path(tempfile.mkdtemp(prefix="alignbot-demo-"))
    print("alignbot demo: checking examples/fastops (a kernel library that replaces softplus "
          "and mish) against PyTorch\n")
    code = main(["check", "--prelude", PRELUDE, "--ops", "activations.*", "--seed", "1",
                 "--json", str(out / "report.json"), "--markdown", str(out / "report.md"),
                 "--no-progress"])
    if code == 2:
        return 2
    print()
    print((out / "report.md").read_text())
    print(f"(JSON report: {out / 'report.json'})")
    return 0


if __name__ == "__main__":
    sys.exit(run())
