"""How many of Paddle's known torch-compat divergences a default `alignbot check` reports."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE_FILE = ROOT / "tests" / "fixtures" / "paddle_divergences.py"
PRELUDE = "import paddle; paddle.enable_compat(); import torch"


def load_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("paddle_divergences", TABLE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def run_check(python: str, ops: list[str], seed: int, minimize: bool, out: Path) -> float:
    alignbot = Path(sys.executable).with_name("alignbot")
    command = [str(alignbot), "check", "--prelude", PRELUDE, "--python", python,
               "--ops", ",".join(ops), "--seed", str(seed), "--json", str(out),
               "--no-progress", "--no-timings"]
    if not minimize:
        command.append("--no-minimize")
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"alignbot check failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def score(table: Any, report: dict[str, Any]) -> dict[str, Any]:
    found = {(f["kind"], f["op"]) for f in report["findings"]}
    known = {(e.kind, e.op) for e in table.TABLE}
    rows = [{"id": e.id, "family": e.family, "kind": e.kind, "op": e.op,
             "reported": (e.kind, e.op) in found} for e in table.TABLE]
    other = [f for f in report["findings"] if (f["kind"], f["op"]) not in known]
    unconfirmed = [f for f in report["findings"] if not stands_alone(f)]
    return {"rows": rows, "reported": sum(r["reported"] for r in rows), "known": len(rows),
            "findings": len(report["findings"]),
            "downstream": sum(bool(f.get("downstream_of")) for f in report["findings"]),
            # not confirmed alone and with another finding upstream: possibly a consequence
            "consequences": sum(bool(f.get("downstream_of")) for f in unconfirmed),
            "unconfirmed": [{"kind": f["kind"], "op": f["op"], "spec": f["spec"],
                             "message": f["message"][:200]} for f in unconfirmed],
            "repro_verified": sum(f.get("repro_verified") is True for f in report["findings"]),
            "not_in_table": [{"kind": f["kind"], "op": f["op"], "spec": f["spec"]}
                             for f in other]}


def stands_alone(finding: dict[str, Any]) -> bool:
    """The finding is a bug of its call, not a consequence of another: its call was judged
    on the reference's inputs (``judged_alone``), or it is the chained run's first forward
    divergence or error (every input agreed up to it), or it is about autograd itself."""
    if finding.get("judged_alone") or finding["op"] == "torch.autograd.grad":
        return True
    return finding["kind"] != "grad-mismatch" and finding["observation"] != "backward"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=os.environ.get("ALIGNBOT_PADDLE_PYTHON",
                                                           str(ROOT / ".venv-paddle/bin/python")),
                        help="the Paddle interpreter (default $ALIGNBOT_PADDLE_PYTHON)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-minimize", action="store_true",
                        help="pass --no-minimize to alignbot check (much faster)")
    parser.add_argument("--json", type=Path, help="write the per-entry table and figures")
    args = parser.parse_args(argv)
    if not Path(args.python).exists():
        print(f"no Paddle interpreter at {args.python}", file=sys.stderr)
        return 2
    table = load_table()
    ops = sorted({e.op for e in table.TABLE})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        seconds = run_check(args.python, ops, args.seed, not args.no_minimize, out)
        report = json.loads(out.read_text())
    result = score(table, report)
    for row in result["rows"]:
        mark = "reported" if row["reported"] else "MISSED  "
        print(f"{mark}  {row['kind']:<16} {row['op']:<48} {row['id']}")
    print(f"\n{result['reported']} of {result['known']} known divergences reported as their "
          f"own findings with the right kind and op")
    print(f"{len(result['not_in_table'])} of {result['findings']} findings are not in the table:")
    for f in result["not_in_table"]:
        print(f"  {f['kind']:<16} {f['op']:<48} {f['spec']}")
    print(f"{result['findings'] - len(result['unconfirmed'])} of {result['findings']} findings "
          f"stand alone (first divergence, or their call judged on the reference's inputs); "
          f"{result['downstream']} of them downstream of another finding; not confirmed alone "
          f"({result['consequences']} of them with another finding upstream):")
    for f in result["unconfirmed"]:
        print(f"  {f['kind']:<16} {f['op']:<48} {f['spec']}: {f['message'][:100]}")
    if not args.no_minimize:
        print(f"{result['repro_verified']} of {result['findings']} repros verified")
    print(f"alignbot check: {seconds:.0f} s (seed {args.seed}, "
          f"{'no minimization' if args.no_minimize else 'minimized'}, {len(ops)} op globs)")
    if args.json:
        result.update(seconds=round(seconds, 1), seed=args.seed,
                      minimize=not args.no_minimize, ops=ops)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
