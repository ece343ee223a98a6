"""Shared by the sandbox's tests (`test_sandbox_*.py`): run one of the hostile repositories of
`fixtures/hostile/` through the real sandbox with a `targets.json` of the test's making, and
read back what its probe printed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from alignbot.bot.config import load_config
from alignbot.bot.sandbox import Containment, SandboxLimits, SandboxResult, run_check, view

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot make the sandbox's namespaces here, or None."""
    found = view.find_bwrap("bwrap")
    if found is None:
        return "bubblewrap is not installed"
    problem = view.probe(found, os.geteuid() == 0)
    return None if problem is None else f"bubblewrap cannot make namespaces here: {problem}"


needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=str(bwrap_problem()))
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a dedicated uid)")
# a Python every uid can run, for sandboxes without a mount namespace to expose the service's
SYSTEM_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3")
                      if os.access(p, os.X_OK)), None)


def run_hostile(name: str, tmp_path: Path, targets: dict[str, Any], limits: SandboxLimits,
                containment: Containment, setup: list[str] | None = None,
                files: dict[str, bytes] | None = None) -> SandboxResult:
    """Copy ``fixtures/hostile/<name>``, write ``targets`` (and ``files``), run its setup (or
    ``setup``)."""
    repo = tmp_path / name
    shutil.copytree(HOSTILE / name, repo)
    (repo / "targets.json").write_text(json.dumps(targets))
    for path, data in (files or {}).items():
        (repo / path).write_bytes(data)
    config = load_config((repo / ".github" / "alignbot.yml").read_text())
    if setup is not None:
        config = config.model_copy(update={"candidate": config.candidate.model_copy(
            update={"setup": setup})})
    return run_check(repo, config, [], limits, containment)


def printed(result: SandboxResult, tag: str) -> dict[str, Any]:
    """The hex-encoded JSON a probe printed after ``tag``."""
    for line in result.stdout_tail.splitlines():
        if line.startswith(tag + " "):
            found: dict[str, Any] = json.loads(bytes.fromhex(line.split()[1]))
            return found
    raise AssertionError(f"no {tag} line: {result.reason}\n{result.stdout_tail[-2000:]}\n"
                         f"{result.stderr_tail[-2000:]}")
