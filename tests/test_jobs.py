"""``--jobs N``: the same report for one seed whatever N is, crashes included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.cli import main
from alignbot.checks.spec_loading import SpecSource, load_file

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")


def _args(prelude: str, ops: str, jobs: int, out: Path, *extra: str) -> list[str]:
    return ["check", "--prelude", prelude, "--spec-file", PLANTED, "--ops", ops, "--seed", "3",
            "--jobs", str(jobs), "--json", str(out), "--markdown", str(out.with_suffix(".md")),
            "--no-timings", *extra]


def _same_reports(capsys: Any, tmp_path: Path, prelude: str, ops: str, *extra: str
                  ) -> dict[str, Any]:
    """``--jobs 1`` here (one process either way: this one pays no second start of the engine)
    and ``--jobs 2`` in its own process, as a user runs it: byte-identical reports."""
    one, two = tmp_path / "jobs1.json", tmp_path / "jobs2.json"
    assert main(_args(prelude, ops, 1, one, *extra)) == 1, capsys.readouterr().err
    run = subprocess.run([sys.executable, "-m", "alignbot.checks.cli",
                          *_args(prelude, ops, 2, two, *extra)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stderr
    assert one.read_bytes() == two.read_bytes()
    assert one.with_suffix(".md").read_bytes() == two.with_suffix(".md").read_bytes()
    assert "Traceback" not in run.stderr
    report: dict[str, Any] = json.loads(one.read_text())
    return report


@pytest.mark.slow
def test_jobs_1_and_2_give_byte_identical_minimized_reports(capsys: Any, tmp_path: Path
                                                            ) -> None:
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    report = _same_reports(capsys, tmp_path, prelude, "softplus*,mean*,matmul*", "--n", "3",
                           "--shrink-calls", "40")
    assert report["specs"] == ["planted_specs.matmul_clean", "planted_specs.mean_keepdim",
                               "planted_specs.softplus_scaled"]
    assert report["programs_run"] == 9
    assert {f["op"] for f in report["findings"]} == {"torch.nn.functional.softplus",
                                                    "torch.Tensor.mean"}
    assert all(f["repro_verified"] and f["shrink"]["calls"] >= 1 for f in report["findings"])


@pytest.mark.slow
def test_a_candidate_that_crashes_in_either_worker_gives_the_same_report(capsys: Any,
                                                                          tmp_path: Path
                                                                          ) -> None:
    prelude = (FIXTURES / "crashing_prelude.py").read_text()
    report = _same_reports(capsys, tmp_path, prelude, "softplus*,tanh*,mean*", "--n", "2")
    crashes = {f["op"]: f["message"] for f in report["findings"]}
    assert set(crashes) == {"torch.nn.functional.softplus", "torch.tanh"}
    assert crashes["torch.nn.functional.softplus"].startswith("the worker exited with status 1")
    assert crashes["torch.tanh"].startswith("the worker was killed by SIGSEGV")
    assert report["programs_run"] == 6 and report["complete"] is True
    assert all(f["kind"] == "candidate-crash" and f["minimize_error"] is None
               for f in report["findings"])


@pytest.mark.slow
def test_a_spec_that_fails_in_a_worker_exits_2_with_one_line(capsys: Any) -> None:
    code = main(["check", "--candidate", "torch", "--spec-file",
                 str(FIXTURES / "broken_specs.py"), "--spec-file", PLANTED, "--ops",
                 "typo,matmul*", "--jobs", "2", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "spec broken_specs.typo raised on the reference: AttributeError" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_a_prelude_that_fails_in_the_workers_exits_2_with_one_line(capsys: Any) -> None:
    code = main(["check", "--prelude", "raise SystemError('no device')", "--spec-file",
                 PLANTED, "--ops", "matmul*,batchnorm*", "--jobs", "2", "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert "prelude failed: SystemError: no device" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_workers_check_the_specs_the_driver_chose_after_other_files_were_loaded(
        capsys: Any) -> None:
    # a long-lived process (pytest, the plugin) has loaded other spec files before: the
    # driver must not hand workers specs that only it has registered
    load_file(FIXTURES / "chained_bugs_specs.py")
    code = main(["check", "--candidate", "torch", "--library", "--no-opinfo", "--ops", "tanh",
                 "--n", "1", "--jobs", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "chained_bugs_specs" not in out
    expected = [s.name for s in SpecSource(library=True).load() if s.matches(["tanh"])]
    assert len(expected) >= 2
    assert f"alignbot: {len(expected)} specs" in out
