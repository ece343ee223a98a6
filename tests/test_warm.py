"""Warm interpreters: a script forked from one gives what a fresh interpreter gives, and a
finding minimized with warm oracles is the one minimized with fresh interpreters."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import presets, repro
from alignbot.checks.candidate import CandidateProcess
from alignbot.checks.engine import check
from alignbot.checks.minimize import MinimizeOptions, minimize_all
from alignbot.checks.spec_loading import SpecSource

FIXTURES = Path(__file__).parent / "fixtures"
SCRIPT = """import sys
import torch
print("argv", sys.argv[1:], "main", __name__, torch.tensor([1.5]).double().item())
print("to stderr", file=sys.stderr)
sys.exit(3 if "--fail" in sys.argv else 0)
"""


@pytest.mark.slow
def test_a_warm_fork_runs_a_script_as_a_fresh_interpreter_does() -> None:
    fresh = repro.run_script(SCRIPT, args=["--fail", "x"], timeout=120)
    assert fresh[0] == 3 and "argv ['--fail', 'x'] main __main__ 1.5" in fresh[1]
    assert "to stderr" in fresh[1]
    assert repro.run_script(SCRIPT, args=["--fail", "x"], timeout=120, warm=True) == fresh
    # the next script in the same server: its own argv, exit status and __main__
    assert repro.run_script(SCRIPT, timeout=120, warm=True) == (
        0, "argv [] main __main__ 1.5\nto stderr\n")


@pytest.mark.slow
def test_a_warm_fork_has_the_environment_it_is_given(tmp_path: Path) -> None:
    """As a fresh interpreter started with ``env``: its variables, and PYTHONPATH on
    ``sys.path`` (a sitecustomize there runs before the script, as the buggy reference's)."""
    (tmp_path / "planted_here.py").write_text("VALUE = 'imported'\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "ALIGNBOT_TEST_MARK": "marked"}
    script = ("import os, planted_here\n"
              "print(planted_here.VALUE, os.environ.get('ALIGNBOT_TEST_MARK'))\n")
    assert repro.run_script(script, timeout=120, env=env, warm=True) == (
        0, "imported marked\n")
    assert repro.run_script(script, timeout=120, env=env) == (0, "imported marked\n")
    assert repro.run_script(script, timeout=120, warm=True)[0] == 1  # not this process's


@pytest.mark.slow
def test_output_names_the_script_as_its_folder_does_fresh_or_warm() -> None:
    """A warning names the script's file; the throwaway folder around it differs each run,
    and a report must say the same for the same seed."""
    script = "import warnings\nwarnings.warn('implicit dim')\n"
    for warm in (False, True):
        code, output = repro.run_script(script, timeout=120, warm=warm)
        assert code == 0 and output.startswith("repro.py:2: UserWarning: implicit dim"), output
        assert "alignbot-repro-" not in output


@pytest.mark.slow
def test_a_warm_script_that_hangs_is_killed_at_its_timeout() -> None:
    code, output = repro.run_script("import time\ntime.sleep(600)\n", timeout=2, warm=True)
    assert (code, output) == (-1, "the repro did not finish within 2 s")
    assert repro.run_script(SCRIPT, timeout=120, warm=True)[0] == 0  # a new server


@pytest.mark.slow
def test_warm_oracles_minimize_to_the_same_findings_as_fresh_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One finding, a module's: the module's random initialisation is where a fork of a
    server that has already drawn random numbers could differ from a fresh interpreter."""
    specs = SpecSource(library=False, files=(FIXTURES / "module_bug_specs.py",)).load()
    config = presets.candidate(None, (FIXTURES / "module_bug_prelude.py").read_text())
    results: list[list[Any]] = []
    with CandidateProcess(config) as candidate:
        drawn = check(specs, candidate, seed=0, n=1).findings
        assert [f.op for f in drawn] == ["torch.nn.Linear"]
        for fresh in ("0", "1"):
            monkeypatch.setenv("ALIGNBOT_FRESH_ORACLES", fresh)
            findings = copy.deepcopy(drawn)
            minimize_all(findings, specs, candidate, config,
                         MinimizeOptions(max_calls=30, max_seconds=1e9), timings=False)
            results.append([(f.fingerprint, f.message, f.extra) for f in findings])
    assert results[0] == results[1]
    assert all(extra["repro_verified"] and extra["verdict"] == "candidate-bug"
               for _, _, extra in results[0])
