"""Repro scripts end to end: each one, alone in an empty folder, fails the way its finding says,
passes its control run, passes ruff and stays short; the PyTorch-alone variant claims only
what it measured.

A repro's *body* is the ``case()`` function: the inputs, the call (and the backward call with
its upstream gradient) and what it returns; it excludes the shared comparison code.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import repro as repros
from alignbot.checks.candidate import CandidateConfig
from alignbot.checks.cli import main
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.presets import OWN_INTERPRETER, PRESETS

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent
RUFF = Path(sys.executable).parent / "ruff"
PADDLE_PYTHON = os.environ.get("ALIGNBOT_PADDLE_PYTHON")
BODY_LIMIT = 15
# kinds whose repro is the value mismatch's script with another comparison line
SAME_FORM_AS_VALUE = {"dtype-mismatch", "shape-mismatch", "state-mismatch"}
SOFTPLUS_BUG = ("--override", "torch.nn.functional.softplus=softplus_bug:softplus")


def _check(folder: Path, prelude: str, specs: str, ops: str, *extra: str,
           timeout: int = 3) -> dict[str, Any]:
    path = folder / "report.json"
    code = main(["check", "--prelude", prelude, "--spec-file", str(FIXTURES / specs),
                 "--ops", ops, "--timeout", str(timeout), "--seed", "7", "--jobs", "1",
                 "--json", str(path), "--no-progress", *extra])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    assert report["findings"]
    return report


def _run(script: str, folder: Path, *args: str, env: dict[str, str] | None = None
         ) -> tuple[int, dict[str, Any] | None, str]:
    """The script alone in an empty folder: exit status, last line's status, output."""
    folder.mkdir(parents=True, exist_ok=True)
    assert not any(folder.iterdir())
    (folder / "repro.py").write_text(script)
    proc = subprocess.run([sys.executable, "repro.py", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    status = json.loads(last.split(": ", 1)[1]) if last.startswith("alignbot-repro:") else None
    return proc.returncode, status, proc.stdout + proc.stderr


def body(script: str) -> list[str]:
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def case("))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return lines[start + 1:end]


def assert_good_repro(finding: dict[str, Any], folder: Path, *args: str,
                      env: dict[str, str] | None = None) -> None:
    script = finding["repro"]
    assert finding["repro_verified"], (finding["op"], finding.get("repro_verify_note"),
                                       finding.get("repro_output"))
    code, status, output = _run(script, folder / "run", *args, env=env)
    assert code == 1, output
    assert status == {"status": "mismatch", "kind": finding["kind"], "op": finding["op"]}
    code, status, output = _run(script, folder / "control", *args, "--control", env=env)
    assert code == 0 and status is not None and status["status"] == "agree", output
    (folder / "lint").mkdir()
    (folder / "lint" / "repro.py").write_text(script)
    assert_clean(folder / "lint")
    assert_readable(script)


def assert_readable(script: str) -> None:
    assert len(body(script)) <= BODY_LIMIT, body(script)
    assert "/work/" not in script and str(ROOT) not in script  # no paths of this machine
    assert " or 1)" not in script and "lambda" not in "\n".join(body(script))


def assert_clean(folder: Path) -> None:
    """ruff finds nothing in the repros under ``folder``."""
    lint = subprocess.run([str(RUFF), "check", "--config", str(ROOT / "pyproject.toml"),
                           str(folder)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


@pytest.mark.slow
def test_every_planted_bug_has_a_repro_that_fails_its_way(planted_report: dict[str, Any],
                                                          tmp_path: Path) -> None:
    kinds = {f["kind"] for f in planted_report["findings"]}
    assert {"value-mismatch", "grad-mismatch", "dtype-mismatch", "shape-mismatch",
            "state-mismatch", "reference-error", "missing-api", "candidate-crash",
            "candidate-timeout"} <= kinds
    # every repro was verified by the engine (its run fails its way, its control agrees); this
    # test runs one of each form of script again from an empty folder (the value, dtype, shape
    # and state mismatches share one form: the value one stands for them), and reads and lints
    # all of them
    first_of_kind: dict[str, dict[str, Any]] = {}
    for finding in planted_report["findings"]:
        if finding["kind"] not in SAME_FORM_AS_VALUE:
            first_of_kind.setdefault(finding["kind"], finding)
    for number, finding in enumerate(first_of_kind.values()):
        assert_good_repro(finding, tmp_path / str(number))
    others = [f for f in planted_report["findings"] if f not in first_of_kind.values()]
    (tmp_path / "all").mkdir()
    for number, finding in enumerate(others):
        assert finding["repro_verified"], (finding["op"], finding.get("repro_verify_note"))
        assert_readable(finding["repro"])
        (tmp_path / "all" / f"repro_{number}.py").write_text(finding["repro"])
    assert_clean(tmp_path / "all")


def test_one_interpreter_unless_the_candidate_can_kill_it(planted_report: dict[str, Any]) -> None:
    for finding in planted_report["findings"]:
        two = "--candidate-side" in finding["repro"]
        assert two == (finding["kind"] in ("candidate-crash", "candidate-timeout")), \
            finding["op"]
        assert "def run_candidate(" in finding["repro"]


def test_gradient_repros_call_backward_with_the_upstream_gradient(planted_report: dict[str, Any]
                                                                  ) -> None:
    grads = [f for f in planted_report["findings"] if f["kind"] == "grad-mismatch"]
    assert grads
    for finding in grads:
        lines = body(finding["repro"])
        assert any(line.strip().startswith("grad_out = ") for line in lines)
        assert any("torch.autograd.grad(" in line and "allow_unused=True" in line
                   for line in lines)


@pytest.mark.slow
def test_overrides_device_and_wrap_are_applied_as_the_worker_does(tmp_path: Path) -> None:
    for number, name in enumerate(("repro_overrides_prelude.py", "repro_wrap_prelude.py")):
        (tmp_path / name).mkdir()
        report = _check(tmp_path / name, (FIXTURES / name).read_text(), "repro_specs.py",
                        "softplus_plain")
        (finding,) = report["findings"]
        assert finding["kind"] == "value-mismatch"
        assert "alignbot_" in finding["repro"]
        assert_good_repro(finding, tmp_path / f"run{number}")


@pytest.fixture(scope="module")
def topk_on_path(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A topk override imported from a module where alignbot was started (the user's
    project folder): that folder and the check's one finding, for the tests that read it."""
    project = tmp_path_factory.mktemp("topk") / "project"
    project.mkdir()
    shutil.copy(FIXTURES / "repro_mytopk.py", project / "mytopk.py")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(project)  # the candidate imports from where alignbot was started
        report = _check(project, "import torch\n", "repro_specs.py", "topk_tuple",
                        "--override", "torch.topk=mytopk:topk")
    (finding,) = report["findings"]
    return project, finding


@pytest.mark.slow
def test_override_from_a_module_on_the_candidates_path(
        tmp_path: Path, topk_on_path: tuple[Path, dict[str, Any]]) -> None:
    project, finding = topk_on_path
    assert finding["op"] == "torch.topk" and finding["kind"] == "value-mismatch"
    env = {**os.environ, "PYTHONPATH": str(project)}
    assert_good_repro(finding, tmp_path / "with-path", env=env)
    # without the module where the user has it, the script cannot show the bug
    code, status, output = _run(finding["repro"], tmp_path / "without-path")
    assert code == 1 and status is None and "mytopk" in output


def _bug_on_path(folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A softplus bug in a module where the candidate imports from; the user's environment."""
    folder.mkdir()
    shutil.copy(FIXTURES / "repro_softplus_bug.py", folder / "softplus_bug.py")
    monkeypatch.chdir(folder)
    return {**os.environ, "PYTHONPATH": str(folder)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(PRESETS) - OWN_INTERPRETER))
def test_every_preset_prelude_gives_a_verified_repro(name: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _bug_on_path(tmp_path / "project", monkeypatch)
    report = _check(tmp_path, PRESETS[name], "repro_specs.py", "softplus_plain", *SOFTPLUS_BUG,
                    timeout=120)  # torch.compile takes its time
    (finding,) = report["findings"]
    # the engine ran the script from an empty folder in a fresh interpreter and its control
    # (the planted test above runs such scripts again itself): what that run printed is kept
    assert finding["repro_verified"], (finding.get("repro_verify_note"),
                                       finding.get("repro_output"))
    assert repros.status_line(finding["repro_output"]) == {
        "status": "mismatch", "kind": finding["kind"], "op": finding["op"]}
    (tmp_path / "lint").mkdir()
    (tmp_path / "lint" / "repro.py").write_text(finding["repro"])
    assert_clean(tmp_path / "lint")
    assert_readable(finding["repro"])


@pytest.mark.slow
@pytest.mark.paddle
@pytest.mark.skipif(not PADDLE_PYTHON, reason="needs ALIGNBOT_PADDLE_PYTHON")
def test_paddle_interpreter_repro(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert PADDLE_PYTHON is not None
    env = _bug_on_path(tmp_path / "project", monkeypatch)
    report = _check(tmp_path, PRESETS["paddle"], "repro_specs.py", "softplus_plain",
                    "--python", PADDLE_PYTHON, *SOFTPLUS_BUG, timeout=120)
    (finding,) = report["findings"]
    assert "--candidate-side" in finding["repro"] and PADDLE_PYTHON not in finding["repro"]
    assert_good_repro(finding, tmp_path / "run", "--python", PADDLE_PYTHON, env=env)


@pytest.mark.slow
def test_a_repro_that_does_not_fail_its_way_is_not_verified(planted_report: dict[str, Any]) -> None:
    finding = next(f for f in planted_report["findings"] if f["kind"] == "value-mismatch")
    program = finding["repro_program"]
    wrong = Finding(Kind.DTYPE, finding["op"], finding["spec"], "", program,
                    key=finding["observation"], node=finding["node"])
    config = repros.CandidateConfig("planted", (FIXTURES / "planted_prelude.py").read_text())
    checked = repros.make(program, wrong, config, 1.3e-6, 1e-5, timeout=120)
    assert not checked.verified and "dtype-mismatch" in checked.note
    broken = repros.CandidateConfig("broken", "import torch\nimport no_such_module_here\n")
    right = Finding(Kind(finding["kind"]), finding["op"], finding["spec"], "", program,
                    key=finding["observation"], node=finding["node"])
    checked = repros.make(program, right, broken, 1.3e-6, 1e-5, timeout=120)
    assert not checked.verified and "without a result line" in checked.note


# PyTorch alone


def _alone(finding: dict[str, Any], mode: str, key: str | None = None,
           declared: bool = False) -> tuple[str, int, str]:
    program = finding["repro_program"]
    current = Finding(Kind(finding["kind"]), finding["op"], finding["spec"], "", program,
                      key=key or finding["observation"], node=finding["node"])
    return repros.reference_only(program, current, mode, "", 1.3e-6, 1e-5,
                                 declared_invalid=declared)


@pytest.mark.slow
def test_integer_outputs_are_compared_exactly(topk_on_path: tuple[Path, dict[str, Any]]
                                              ) -> None:
    _, finding = topk_on_path
    indices = finding["repro_program"]["nodes"][-1]["id"] + ".1"
    script, code, output = _alone(finding, "numeric", key=indices)
    assert code == 0, output
    assert "float32 and float64 agree" in script and "disagree" not in output


def test_a_valid_input_gets_no_exception_claim(planted_report: dict[str, Any]) -> None:
    finding = next(f for f in planted_report["findings"] if f["kind"] == "value-mismatch")
    script, code, output = _alone(finding, "accepts", declared=False)
    assert code == 0, output
    assert "invalid" not in script and "checks nothing" in script


def test_a_declared_invalid_input_is_checked(planted_report: dict[str, Any]) -> None:
    finding = next(f for f in planted_report["findings"] if f["kind"] == "reference-error")
    script, code, output = _alone(finding, "accepts", declared=True)
    assert code == 0 and "as for an invalid input" in output  # PyTorch does reject it
    assert "exit status 0" in script


@pytest.mark.slow
def test_a_real_float32_problem_is_claimed_and_exits_1(planted_report: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    finding = next(f for f in planted_report["findings"] if f["op"].endswith("softplus"))
    monkeypatch.setenv("PYTHONPATH", str(FIXTURES / "buggy_reference"))
    script, code, output = _alone(finding, "numeric")
    assert code == 1, output
    assert "Measured when alignbot generated it: exit status 1: float32 and float64 " \
           "disagree" in script
    monkeypatch.delenv("PYTHONPATH")
    code, status, output = _run(script, tmp_path / "real")
    assert code == 0 and status == {"status": "agree", "result": "float32 and float64 agree"}


@pytest.mark.slow
def test_a_slow_starting_candidate_gets_its_timeout_after_its_prelude(tmp_path: Path) -> None:
    # In the repro's fresh interpreter the prelude takes 6 s, longer than --timeout and than
    # the 5 s the repro once allowed for start and call together: the limit counts from when
    # the prelude has run, as the engine's does, so the crash is not reported as a hang.
    prelude = ("import os\nimport sys\nimport time\n\nimport torch\n\n"
               "if '--candidate-side' in sys.argv:\n    time.sleep(6)\n\n\n"
               "def elu(*args, **kwargs):\n    os.abort()\n\n\n"
               "alignbot_overrides = {'torch.nn.functional.elu': elu}\n")
    report = _check(tmp_path, prelude, "planted_specs.py", "elu_crash", timeout=1)
    (finding,) = report["findings"]
    assert finding["kind"] == "candidate-crash"
    assert "START = 180" in finding["repro"] and "TIMEOUT = 1 " in finding["repro"]
    assert_good_repro(finding, tmp_path / "repro")


@pytest.mark.slow
def test_bugs_in_one_dtype_only_are_found_with_verified_repros(tmp_path: Path) -> None:
    report = _check(tmp_path, (FIXTURES / "dtype_bugs_prelude.py").read_text(),
                    "dtype_bugs_specs.py", "*", "--shrink-seconds", "5", timeout=30)
    by_op: dict[str, list[dict[str, Any]]] = {}
    for finding in report["findings"]:
        by_op.setdefault(finding["op"], []).append(finding)
    assert set(by_op) == {"torch.sigmoid", "torch.mul"}
    assert {f["signature"].split()[1] for f in by_op["torch.sigmoid"]} == {"float16"}
    assert {f["signature"].split()[1] for f in by_op["torch.mul"]} <= {"complex64",
                                                                        "complex128"}
    for number, finding in enumerate(report["findings"]):
        assert finding["verdict"] == "candidate-bug", finding["verdict_reason"]
        assert_good_repro(finding, tmp_path / str(number))
    assert any("j)" in finding["repro"] for finding in by_op["torch.mul"])


@pytest.mark.slow
def test_a_module_simplified_to_its_random_defaults_gets_them_written(tmp_path: Path) -> None:
    """Simplifying drops ``bias=False``: the bias the module then makes is written out, so
    that two runs of the repro (and its control run) see the same values."""
    report = _check(tmp_path, (FIXTURES / "module_bug_prelude.py").read_text(),
                    "module_bug_specs.py", "*", "--shrink-seconds", "5")
    (finding,) = report["findings"]
    assert "bias=False" not in finding["repro"] and ".bias.copy_(" in finding["repro"]
    # the engine ran it and its control run (which agreed); two runs here print the same
    assert finding["repro_verified"], finding.get("repro_verify_note")
    runs = [_run(finding["repro"], tmp_path / name) for name in ("first", "again")]
    assert runs[0][:2] == (1, {"status": "mismatch", "kind": finding["kind"],
                               "op": finding["op"]}), runs[0][2]
    assert runs[0][2] == runs[1][2] and "reference:" in runs[0][2]
    (tmp_path / "lint").mkdir()
    (tmp_path / "lint" / "repro.py").write_text(finding["repro"])
    assert_clean(tmp_path / "lint")
    assert_readable(finding["repro"])


def test_long_lines_fold_inside_brackets_and_never_inside_strings_or_comments() -> None:
    line = ("y = torch.tensor([(1.5+2.0j), complex(-2.0, 0.0), (0.25-1.0j)], "
            "dtype=torch.complex128, requires_grad=True)  # a, b, c")
    pieces = repros.fold(line, 40)
    assert all(len(p) <= 40 for p in pieces[:-1]) and pieces[-1].endswith("# a, b, c")
    assert all(p.startswith("    ") for p in pieces[1:])
    assert ast.dump(ast.parse("\n".join(pieces))) == ast.dump(ast.parse(line))
    assert repros.fold("f('a, b, c, d, e, f', 1)", 12) == ["f('a, b, c, d, e, f',", "    1)"]
    assert repros.fold("short(1, 2)", 40) == ["short(1, 2)"]


# A script of the two-process form (it starts itself with --candidate-side) that says which of
# its processes had torch imported before its first line: a warm fork has, a fresh one has not.
FRESHNESS = '''import json, subprocess, sys
warm = "torch" in sys.modules
if "--candidate-side" in sys.argv:
    print(json.dumps({"candidate_warm": warm}))
    sys.exit(0)
if "--control" in sys.argv:
    print('alignbot-repro: {"status": "agree", "kind": null, "op": "torch.cos"}')
    sys.exit(0)
side = subprocess.run([sys.argv[sys.argv.index("--python") + 1], __file__, "--candidate-side"],
                      capture_output=True, text=True, check=True).stdout
print("reference warm:", warm, "candidate warm:", json.loads(side)["candidate_warm"])
print('alignbot-repro: {"status": "mismatch", "kind": "value-mismatch", "op": "torch.cos"}')
sys.exit(1)
'''


@pytest.mark.parametrize("fresh_oracles", ["", "1"])
def test_a_two_process_repro_runs_the_candidate_in_a_fresh_interpreter(
        fresh_oracles: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The script's own process runs PyTorch alone, as the control does: a warm fork, unless
    # ALIGNBOT_FRESH_ORACLES asks for fresh ones; the candidate's side is always fresh.
    monkeypatch.setenv("ALIGNBOT_FRESH_ORACLES", fresh_oracles)
    finding = Finding(Kind.VALUE, "torch.cos", "spec", "differs", {"nodes": []})
    config = CandidateConfig("two", "import torch", python=sys.executable)
    checked = repros.verify(FRESHNESS, finding, config, timeout=120)
    assert checked.verified, checked.note
    warm = "True" if not fresh_oracles else "False"
    assert f"reference warm: {warm} candidate warm: False" in checked.output
