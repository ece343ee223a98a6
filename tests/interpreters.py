"""The real candidates' interpreters that `make test` builds (.venv-torchax, .venv-openvino):
where each is, or why its tests are skipped."""

from __future__ import annotations

import os
from pathlib import Path

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
