"""Minimisation end to end: shrink, slice, simplify, verified repros, triage, drafts."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateConfig, CandidateProcess
from alignbot.checks.cli import main
from alignbot.checks.engine import check
from alignbot.checks.findings import Kind
from alignbot.checks.oracle import Oracle, ShrinkBudget, ShrinkBudgetSpent, stats
from alignbot.checks.repro import run_script
from alignbot.checks.shrink import Shrinker
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).parent / "fixtures"


def _body_lines(script: str) -> int:
    """The lines of the script's ``case()`` function: the inputs, the call and its backward
    (the rest is the same comparison harness in every repro)."""
    (case,) = [node for node in ast.walk(ast.parse(script))
               if isinstance(node, ast.FunctionDef) and node.name == "case"]
    assert case.end_lineno is not None
    return case.end_lineno - case.lineno


def _elements(program: dict[str, Any]) -> int:
    """The largest tensor the repro holds: inputs and module parameters and buffers."""
    sizes = [1]
    for node in program["nodes"]:
        if node["op"] == "input":
            count = 1
            for dim in node["shape"]:
                count *= dim
            sizes.append(count)
        for data in node.get("state", {}).values():
            count = 1
            for dim in data["shape"]:
                count *= dim
            sizes.append(count)
    return max(sizes)


def test_every_planted_bug_has_a_short_verified_repro(planted_report: dict[str, Any]) -> None:
    assert len(planted_report["findings"]) == 11
    for finding in planted_report["findings"]:
        script = finding["repro"]
        assert finding["repro_verified"], finding["op"]
        assert _body_lines(script) <= 15, (finding["op"], script)
        assert _elements(finding["repro_program"]) <= 16, finding["op"]
        assert finding["op"] in script


def test_repro_scripts_need_nothing_of_alignbot(planted_report: dict[str, Any]) -> None:
    for finding in planted_report["findings"]:
        for script in (finding["repro"], finding["repro_reference_only"]):
            tree = ast.parse(script)
            imported = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    imported.add((node.module or "").split(".")[0])
            outside = {name for name in imported if name not in sys.stdlib_module_names}
            assert outside <= {"torch", "numpy"}, outside


def test_candidate_bugs_get_a_verdict_and_never_a_draft(planted_report: dict[str, Any]
                                                       ) -> None:
    for finding in planted_report["findings"]:
        assert finding["verdict"] == "candidate-bug", (finding["op"], finding["evidence"])
        assert finding["upstream_draft"] is None and finding["upstream_url"] is None


def test_shrinking_is_bounded_and_reported(planted_report: dict[str, Any]) -> None:
    for finding in planted_report["findings"]:
        assert 1 <= finding["shrink"]["calls"] <= 300
        assert 0 <= finding["shrink"]["seconds"] < 60


@pytest.mark.slow
def test_repro_runs_alone_and_passes_once_the_bug_is_gone(planted_report: dict[str, Any]
                                                          ) -> None:
    finding = next(f for f in planted_report["findings"] if f["op"].endswith("softplus"))
    code, output = run_script(finding["repro"])
    assert code == 1 and "MISMATCH" in output
    fixed = finding["repro"].replace("* 1.01", "* 1.0")
    code, output = run_script(fixed)
    assert code == 0 and "agree" in output


@pytest.fixture(scope="module")
def shrink_setup() -> Any:
    spec = load_file(FIXTURES / "shrink_specs.py")[0]
    config = CandidateConfig("shrink", (FIXTURES / "shrink_prelude.py").read_text())
    with CandidateProcess(config) as candidate:
        result = check([spec], candidate, seed=3)
        yield spec, candidate, result


@pytest.mark.slow
def test_shrinking_keeps_the_fingerprint_and_finds_the_smallest_shape(shrink_setup: Any
                                                                     ) -> None:
    spec, candidate, result = shrink_setup
    kinds = {f.kind for f in result.findings}
    assert kinds == {Kind.VALUE, Kind.CANDIDATE_ERROR}
    value = next(f for f in result.findings if f.kind is Kind.VALUE)
    value.program = _largest_failing_program(spec, candidate, value)
    best = Shrinker(Oracle(spec, candidate, ShrinkBudget()), value).run()
    shape = best.program["nodes"][0]["shape"]
    count = 1
    for dim in shape:
        count *= dim
    # 5 elements is the smallest that shows the wrong value, 1 or 2 an error instead (another
    # fingerprint). Hypothesis may stop at a local minimum such as 1 x 1 x 2 x 3.
    start = 1
    for dim in value.program["nodes"][0]["shape"]:
        start *= dim
    assert 5 <= count <= 6 < start
    assert best.fingerprint == value.fingerprint and best.kind is Kind.VALUE


def _largest_failing_program(spec: Any, candidate: Any, finding: Any) -> dict[str, Any]:
    from alignbot.checks.engine import draw_programs, evaluate

    found: list[Any] = []

    def visit(program: dict[str, Any], ref: Any) -> None:
        hits = evaluate(spec, program, ref, candidate)
        if any(hit.fingerprint == finding.fingerprint for hit in hits):
            found.append(program)

    draw_programs(spec, 30, 3, visit)
    return max(found, key=lambda p: len(str(p["nodes"][0]["shape"])) + sum(
        p["nodes"][0]["shape"]))


def test_shrinking_stops_at_its_budget(shrink_setup: Any) -> None:
    spec, candidate, result = shrink_setup
    value = next(f for f in result.findings if f.kind is Kind.VALUE)
    budget = ShrinkBudget(max_calls=3, max_seconds=60)
    Shrinker(Oracle(spec, candidate, budget), value).run()
    assert budget.calls == 3


def _buggy_reference_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(FIXTURES / "buggy_reference")
    return env


@pytest.fixture(scope="module")
def reference_suspect(tmp_path_factory: Any) -> dict[str, Any]:
    """PyTorch with a planted float32-only softplus bug, against a correct candidate."""
    path = tmp_path_factory.mktemp("refbug") / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude",
         (FIXTURES / "correct_softplus.py").read_text(), "--spec-file",
         str(FIXTURES / "planted_specs.py"), "--ops", "softplus_scaled", "--json", str(path),
         "--no-progress"], env=_buggy_reference_env(), capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 1, proc.stderr
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.slow
def test_reference_bug_is_reference_suspect_with_a_draft(reference_suspect: dict[str, Any]
                                                         ) -> None:
    (finding,) = reference_suspect["findings"]
    assert finding["verdict"] == "reference-suspect"
    assert finding["evidence"]["reference_rmse_vs_float64"] > 100 * finding["evidence"][
        "candidate_rmse_vs_float64"]
    draft = finding["upstream_draft"]
    assert "### 🐛 Describe the bug" in draft and "### Versions" in draft
    assert "PyTorch version:" in draft
    assert finding["upstream_url"].startswith(
        "https://github.com/pytorch/pytorch/issues/new?title=")


@pytest.mark.slow
def test_reference_only_repro_shows_the_wrong_value_alone(reference_suspect: dict[str, Any],
                                                          tmp_path: Path) -> None:
    (finding,) = reference_suspect["findings"]
    script = tmp_path / "upstream.py"
    script.write_text(finding["repro_reference_only"])
    buggy = subprocess.run([sys.executable, str(script)], env=_buggy_reference_env(),
                           capture_output=True, text=True, timeout=120)
    assert buggy.returncode == 1 and "float32 and float64 disagree" in buggy.stdout
    real = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert real.returncode == 0, real.stdout  # real PyTorch has no such bug
    assert finding["repro_reference_only"] in finding["upstream_draft"]


@pytest.mark.slow
def test_rounding_noise_near_tolerance_is_tolerance_noise(tmp_path: Path) -> None:
    path = tmp_path / "noise.json"
    code = main(["check", "--candidate", "torch-float64", "--spec-file",
                 str(FIXTURES / "noise_specs.py"), "--json", str(path), "--no-progress"])
    assert code == 1
    findings = json.loads(path.read_text())["findings"]
    assert findings and {f["verdict"] for f in findings} == {"tolerance-noise"}
    assert all(f["upstream_draft"] is None for f in findings)


def test_repro_and_upstream_commands(planted_report: dict[str, Any], tmp_path: Path,
                                     capsys: Any) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(planted_report))
    fingerprint = planted_report["findings"][0]["fingerprint"]
    assert main(["repro", str(path), fingerprint]) == 0
    assert capsys.readouterr().out == planted_report["findings"][0]["repro"]
    assert main(["repro", str(path), fingerprint, "--reference-only"]) == 0
    assert "on PyTorch alone" in capsys.readouterr().out
    assert main(["upstream", str(path), fingerprint]) == 1
    assert "only reference-suspect findings" in capsys.readouterr().err
    assert main(["repro", str(path), "nope"]) == 2
    assert "no finding 'nope'" in capsys.readouterr().err
    assert main(["repro", str(tmp_path / "missing.json"), fingerprint]) == 2


def _weighted_loss_check(path: Path, *extra: str) -> int:
    return main(["check", "--prelude", (FIXTURES / "weighted_loss_prelude.py").read_text(),
                 "--spec-file", str(FIXTURES / "weighted_loss_specs.py"), "--seed", "1",
                 "--json", str(path), "--no-progress", "--no-timings", *extra])


@pytest.mark.slow
def test_modules_built_with_a_tensor_argument_get_verified_repros(tmp_path: Path) -> None:
    # BCELoss(weight=v0): rebuilding the module for its repro once failed with KeyError 'v0'
    path = tmp_path / "r.json"
    assert _weighted_loss_check(path) == 1
    findings = json.loads(path.read_text())["findings"]
    assert [f["op"] for f in findings] == ["torch.nn.BCELoss", "torch.nn.CrossEntropyLoss"]
    for finding in findings:
        assert finding["minimize_error"] is None
        assert finding["repro_verified"], finding["repro_output"]
        assert re.search(r"Loss\(weight=\w+\)", finding["repro"]), finding["repro"]


@pytest.mark.slow
def test_a_finding_that_fails_to_minimize_is_kept_and_the_run_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from alignbot.checks import codegen

    fresh_state = codegen._fresh_state

    def broken(node: dict[str, Any], before: list[dict[str, Any]]) -> Any:
        if node["target"] == "torch.nn.BCELoss":  # the old failure, for one finding
            raise KeyError("v0")
        return fresh_state(node, before)

    monkeypatch.setattr(codegen, "_fresh_state", broken)
    path = tmp_path / "r.json"
    assert _weighted_loss_check(path, "--jobs", "1") == 1  # the patch lives in this process
    report = json.loads(path.read_text())
    assert report["complete"] is True
    bce, cross_entropy = report["findings"]
    assert bce["op"] == "torch.nn.BCELoss" and bce["minimize_error"] == "KeyError: 'v0'"
    assert "repro" not in bce and "verdict" not in bce
    assert bce["program"]["spec"] == "weighted_loss_specs.bce_weight"  # as drawn
    assert cross_entropy["minimize_error"] is None and cross_entropy["repro_verified"]
    err = capsys.readouterr().err
    assert f"repro verified for 1 ({cross_entropy['fingerprint']}); minimizing failed for " \
           f"{bce['fingerprint']}" in err
    assert "Traceback" not in err


def _rejudge(finding: dict[str, Any], specs: Any, prelude: str) -> Any:
    """The minimized repro program judged again, on a fresh candidate."""
    spec = next(s for s in specs if s.name == finding["spec"])
    with CandidateProcess(CandidateConfig("rejudge", prelude, timeout=3.0)) as candidate:
        found = Oracle(spec, candidate, ShrinkBudget()).program(finding["repro_program"])
    return found[0] if found else None


@pytest.mark.slow
def test_minimizing_never_changes_the_bug_of_a_planted_finding(
        planted_report: dict[str, Any]) -> None:
    specs = load_file(FIXTURES / "planted_specs.py")
    prelude = (FIXTURES / "planted_prelude.py").read_text()
    for finding in planted_report["findings"]:
        found = _rejudge(finding, specs, prelude)
        assert found is not None, finding["spec"]
        assert (found.kind.value, found.op, found.signature) == \
            (finding["kind"], finding["op"], finding["signature"])
        assert found.fingerprint == finding["fingerprint"]


@pytest.fixture(scope="module")
def two_bugs_report(tmp_path_factory: Any) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("two_bugs") / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "two_bugs_prelude.py").read_text(),
                 "--spec-file", str(FIXTURES / "two_bugs_specs.py"), "--seed", "1",
                 "--json", str(path), "--no-progress"])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.slow
def test_each_of_two_bugs_in_one_op_shrinks_to_itself(two_bugs_report: dict[str, Any]
                                                      ) -> None:
    specs = load_file(FIXTURES / "two_bugs_specs.py")
    full = (FIXTURES / "two_bugs_prelude.py").read_text()
    with CandidateProcess(CandidateConfig("drawn", full)) as candidate:
        drawn = check(specs, candidate, seed=1)
    # a draw passing both keywords is a third drawn finding; minimized, it needs only one
    # of them and merges with that bug's finding: two bugs, two findings
    drawn_keywords = {f.signature.split("kw=", 1)[1] for f in drawn.findings}
    assert drawn_keywords == {"[beta]", "[threshold]", "[beta,threshold]"}
    by_keywords = {f["signature"].split("kw=", 1)[1]: f for f in two_bugs_report["findings"]}
    assert sorted(by_keywords) == ["[beta]", "[threshold]"]
    assert sum(f["count"] for f in two_bugs_report["findings"]) == \
        sum(f.count for f in drawn.findings)
    for keyword, other in (("beta", "threshold"), ("threshold", "beta")):
        finding = by_keywords[f"[{keyword}]"]
        assert finding["repro_verified"] is True
        found = _rejudge(finding, specs, full)
        assert found is not None and found.fingerprint == finding["fingerprint"]
        # the repro shows its own bug, not the other one
        only = 'BUGS = {"beta", "threshold"}'
        assert only in full
        mine = _rejudge(finding, specs, full.replace(only, f'BUGS = {{"{keyword}"}}'))
        theirs = _rejudge(finding, specs, full.replace(only, f'BUGS = {{"{other}"}}'))
        assert mine is not None and mine.fingerprint == finding["fingerprint"]
        assert theirs is None


def test_the_calls_bound_shrinking_and_the_seconds_limit_says_when_it_bit() -> None:
    by_calls = ShrinkBudget(max_calls=2, max_seconds=3600)
    by_calls.spend()
    by_calls.spend()
    with pytest.raises(ShrinkBudgetSpent):
        by_calls.spend()
    assert by_calls.stopped == "calls" and "seconds_limit" not in stats(by_calls)
    by_clock = ShrinkBudget(max_calls=300, max_seconds=0.0)
    with pytest.raises(ShrinkBudgetSpent):
        by_clock.spend()
    assert by_clock.stopped == "seconds" and by_clock.calls == 0
    note = stats(by_clock)["seconds_limit"]
    assert note.startswith("stopped by the 0 s limit after 0 oracle calls, before the 300-call")
