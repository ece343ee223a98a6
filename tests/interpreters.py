"""The real candidates' interpreters that `make test` builds (.venv-torchax, .venv-openvino):
where each is, or why its tests are skipped; and `alignbot check` run against one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def candidate_python(variable: str, name: str) -> tuple[str, pytest.MarkDecorator]:
    """The interpreter ``$variable`` names, and a mark that skips the tests that need it,
    saying why: the variable is not set, or pip could not install ``name`` on this machine
    (the Makefile left pip's last words in VENV/.unavailable), or there is no interpreter."""
    python = os.environ.get(variable, "")
    venv = Path(python).parent.parent if python else None
    reason = ""
    if not python:
        reason = f"set {variable} (make test does)"
    elif venv is not None and (venv / ".unavailable").exists():
        words = (venv / ".unavailable").read_text(errors="replace").strip()
        reason = f"{name} could not be installed here: {words or 'pip failed'}"
    elif not os.path.exists(python):
        reason = f"{variable}={python}: no such interpreter (make test builds it)"
    return python, pytest.mark.skipif(bool(reason), reason=reason)


FIXTURES = Path(__file__).parent / "fixtures"
SPECS = FIXTURES / "real_candidate_specs.py"


def run_check(folder: Path, preset: str, python: str, ops: str, *extra: str,
              prelude: str | None = None) -> tuple[int, dict[str, Any], str]:
    """``alignbot check --candidate PRESET --python PYTHON`` (or ``--prelude PRELUDE``) on
    specs of fixtures/real_candidate_specs.py, as a user runs it: exit status, JSON report,
    stderr."""
    report = folder / f"{preset}.json"
    who = ["--candidate", preset] if prelude is None else ["--prelude", prelude]
    done = subprocess.run(
        [str(Path(sys.executable).with_name("alignbot")), "check", *who, "--python", python,
         "--spec-file", str(SPECS), "--ops", ops, "--seed", "0", "--json", str(report),
         "--no-progress", *extra],
        capture_output=True, text=True, timeout=900)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done.returncode, json.loads(report.read_text()), done.stderr


def assert_minimized_repro_fails(folder: Path, preset: str, python: str, spec: str) -> None:
    """A default (minimized) check of one spec gives one finding whose repro was verified,
    and the script, run alone with ``--python``, still fails the way it says."""
    code, report, _ = run_check(folder, preset, python, spec, "--jobs", "1")
    (finding,) = report["findings"]
    assert code == 1 and finding["repro_verified"], finding.get("repro_verify_note")
    (folder / "repro.py").write_text(finding["repro"])
    run = subprocess.run([sys.executable, "repro.py", "--python", python], cwd=folder,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    last = json.loads(run.stdout.splitlines()[-1].split(": ", 1)[1])
    assert last == {"status": "mismatch", "kind": finding["kind"], "op": finding["op"]}
