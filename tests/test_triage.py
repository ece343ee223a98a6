"""Verdicts from oracles: the numeric rule, exceptions, and what never blames the reference."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from alignbot.checks.candidate import CandidateConfig
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.oracle import finite_differences, numpy_observations, reference_observations
from alignbot.checks.repro import run_script
from alignbot.checks.triage import NOISE_ULPS, Verdict, rmse, third_names, to_float64, triage

FIXTURES = Path(__file__).parent / "fixtures"


def _t(values: list[float], dtype: str = "float32") -> dict[str, Any]:
    arr = np.asarray(values, dtype=np.float64 if dtype == "float64" else np.float32)
    return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def _err(kind: str = "RuntimeError") -> dict[str, Any]:
    return {"t": "error", "type": kind, "message": "boom", "missing_api": False}


def _finding(kind: Kind, program: dict[str, Any] | None = None) -> Finding:
    return Finding(kind, "torch.op", "t.spec", "m", program or {"nodes": []}, key="v1")


def _judge(kind: Kind, ref: dict[str, Any], cand: dict[str, Any], wide: dict[str, Any] | None,
           others: dict[str, dict[str, Any]] | None = None,
           program: dict[str, Any] | None = None) -> Verdict:
    oracles = {name: {"v1": obs} for name, obs in (others or {}).items()}
    if wide is not None:
        oracles["reference-float64"] = {"v1": wide}
    return triage(program or {"nodes": []}, _finding(kind, program), {"v1": ref},
                  {"v1": cand}, oracles).verdict


def test_rmse_handles_nan_inf_and_shape() -> None:
    assert rmse(np.array([1.0, np.nan]), np.array([1.0, np.nan])) == 0.0
    assert rmse(np.array([1.0]), np.array([np.nan])) == math.inf
    assert rmse(np.array([1.0]), np.array([1.0, 2.0])) == math.inf
    assert rmse(np.array([0.0, 0.0]), np.array([3.0, 4.0])) == math.sqrt(12.5)


def test_candidate_far_from_float64_is_a_candidate_bug() -> None:
    truth = _t([1.0, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.0, 2.0]), _t([1.1, 2.0]), truth) is Verdict.CANDIDATE_BUG


def test_reference_far_from_float64_is_reference_suspect() -> None:
    truth = _t([1.0, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.1, 2.0]), _t([1.0, 2.0]), truth) \
        is Verdict.REFERENCE_SUSPECT


def test_both_as_close_as_each_other_is_noise() -> None:
    truth = _t([1.0000001, 2.0], "float64")
    assert _judge(Kind.VALUE, _t([1.0000002, 2.0]), _t([1.0, 2.0]), truth) \
        is Verdict.TOLERANCE_NOISE


def test_a_third_framework_siding_with_the_reference_blocks_reference_suspect() -> None:
    truth = _t([1.0, 2.0], "float64")
    verdict = _judge(Kind.VALUE, _t([1.1, 2.0]), _t([1.0, 2.0]), truth,
                     {"third:jax": _t([1.1, 2.0])})
    assert verdict is Verdict.UNDETERMINED


def test_crashes_hangs_and_missing_apis_are_always_candidate_bugs() -> None:
    for kind in (Kind.CANDIDATE_CRASH, Kind.CANDIDATE_TIMEOUT, Kind.MISSING_API):
        assert _judge(kind, _t([1.0]), _err(), None) is Verdict.CANDIDATE_BUG


def test_exceptions_follow_what_the_spec_declares() -> None:
    invalid = {"nodes": [], "expect_raise": True}
    # reference raises on an input declared invalid, candidate accepts it: missing validation
    assert _judge(Kind.REFERENCE_ERROR, _err(), _t([1.0]), None, program=invalid) \
        is Verdict.CANDIDATE_BUG
    # reference accepts an input declared invalid, candidate rejects it: PyTorch is suspect
    assert _judge(Kind.CANDIDATE_ERROR, _t([1.0]), _err(), None, program=invalid) \
        is Verdict.REFERENCE_SUSPECT
    # nothing declared: a candidate that raises where PyTorch does not is wrong
    assert _judge(Kind.CANDIDATE_ERROR, _t([1.0]), _err(), None) is Verdict.CANDIDATE_BUG
    # nothing declared, every third framework accepts what the reference rejects
    assert _judge(Kind.REFERENCE_ERROR, _err(), _t([1.0]), None, {"third:x": _t([1.0])}) \
        is Verdict.REFERENCE_SUSPECT


def test_shapes_go_by_the_other_oracles() -> None:
    assert _judge(Kind.SHAPE, _t([1.0]), _t([1.0, 1.0]), None) is Verdict.CANDIDATE_BUG
    assert _judge(Kind.SHAPE, _t([1.0]), _t([1.0, 1.0]), None,
                  {"third:x": _t([1.0, 1.0])}) is Verdict.REFERENCE_SUSPECT


def test_to_float64_widens_inputs_dtypes_and_modules() -> None:
    program = {"nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [2], "recipe": {}},
        {"id": "v1", "op": "input", "dtype": "int64", "shape": [2], "recipe": {}},
        {"id": "v2", "op": "module", "target": "torch.nn.Linear", "args": [2, 2], "kwargs": {}},
        {"id": "v3", "op": "call", "target": "torch.sum", "args": [{"ref": "v0"}],
         "kwargs": {"dtype": {"dtype": "float16"}}},
    ]}
    wide = to_float64(program)
    assert [n["dtype"] for n in wide["nodes"] if n["op"] == "input"] == ["float64", "int64"]
    assert wide["nodes"][3]["name"] == "double"
    assert wide["nodes"][-1]["kwargs"]["dtype"] == {"dtype": "float64"}
    assert program["nodes"][0]["dtype"] == "float32"  # the original is left alone


def _grad_triage(ref: list[float], cand: list[float], numeric: list[float],
                 wide: list[float], dtype: str = "float32") -> Any:
    oracles = {"finite-differences": {"grad:v0": _t(numeric, "float64")},
               "reference-float64": {"grad:v0": _t(wide, "float64")}}
    finding = Finding(Kind.GRAD, "torch.op", "t.spec", "m", {"nodes": []}, key="grad:v0")
    return triage({"nodes": []}, finding, {"grad:v0": _t(ref, dtype)},
                  {"grad:v0": _t(cand, dtype)}, oracles)


def test_finite_differences_blame_a_backward_wrong_in_float64_too() -> None:
    # the reference's float64 gradient repeats its bug: only finite differences see it
    result = _grad_triage([1.5, 0.6], [1.0, 0.4], [1.0, 0.4], [1.5, 0.6])
    assert result.verdict is Verdict.REFERENCE_SUSPECT
    assert result.evidence["reference_grad_error_vs_finite_differences"] == pytest.approx(0.5)
    assert result.evidence["candidate_grad_error_vs_finite_differences"] < 1e-6
    assert result.evidence["reference_float64_grad_error_vs_finite_differences"] \
        == pytest.approx(0.5)
    assert "float64 too" in result.reason
    flipped = _grad_triage([1.0, 0.4], [1.5, 0.6], [1.0, 0.4], [1.0, 0.4])
    assert flipped.verdict is Verdict.CANDIDATE_BUG


def test_finite_differences_that_agree_with_both_leave_the_float64_rule() -> None:
    result = _grad_triage([1.0, 0.4], [1.0001, 0.4], [1.0, 0.4], [1.0, 0.4])
    assert "finite_differences_eps" in result.evidence
    assert "finite differences" not in result.reason


def test_float64_rounding_is_noise_and_a_real_float64_difference_is_not() -> None:
    big = [1.0e9, 2.5]
    noise = triage({"nodes": []}, _finding(Kind.VALUE), {"v1": _t(big, "float64")},
                   {"v1": _t([1.0e9 + 1e-7, 2.5], "float64")},
                   {"reference-float64": {"v1": _t(big, "float64")}})
    assert noise.verdict is Verdict.TOLERANCE_NOISE
    assert noise.evidence["float64_relative_difference"] < 1e-12
    exact = np.array([1.0, 2.0]) / 3
    close = list(exact * (1 + 4e-16))
    # in float64 the reference's own float64 run is no witness: NumPy is
    ulps = triage({"nodes": []}, _finding(Kind.VALUE),
                  {"v1": _t(list(exact * (1 + 1e-6)), "float64")},
                  {"v1": _t(close, "float64")},
                  {"reference-float64": {"v1": _t(list(exact * (1 + 1e-6)), "float64")},
                   "numpy": {"v1": _t(list(exact), "float64")}})
    assert ulps.verdict is Verdict.REFERENCE_SUSPECT
    assert ulps.evidence["candidate_ulps_vs_numpy"] <= NOISE_ULPS
    wrong = triage({"nodes": []}, _finding(Kind.VALUE), {"v1": _t(list(exact), "float64")},
                   {"v1": _t(list(exact * (1 + 1e-6)), "float64")},
                   {"reference-float64": {"v1": _t(list(exact), "float64")},
                    "numpy": {"v1": _t(list(exact), "float64")}})
    assert wrong.verdict is Verdict.CANDIDATE_BUG
    assert wrong.evidence["candidate_ulps_vs_numpy"] > NOISE_ULPS


def _call_program(target: str, kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"seed": 0, "nodes": [
        {"id": "v0", "op": "input", "dtype": "float64", "shape": [2, 3], "requires_grad": True,
         "recipe": {"kind": "pattern", "pattern": "arange"}},
        {"id": "v1", "op": "call", "target": target, "args": [{"ref": "v0"}],
         "kwargs": kwargs or {}}],
        "backward": {"outputs": ["v1"], "wrt": ["v0"], "intermediates": [],
                     "seeds": [{"kind": "pattern", "pattern": "ones"}]}}


def test_finite_differences_match_the_derivative() -> None:
    program = _call_program("torch.tanh")
    numeric = finite_differences(program)["grad:v0"]["data"]
    x = reference_observations(program)["v0"]["data"]
    np.testing.assert_allclose(numeric, 1 - np.tanh(x) ** 2, rtol=1e-6, atol=1e-9)


def test_numpy_recomputes_softplus_with_beta_and_threshold() -> None:
    program = _call_program("torch.nn.functional.softplus", {"beta": 2.0, "threshold": 3.0})
    wide = reference_observations(program)
    value = numpy_observations(program, wide)["v1"]["data"]
    np.testing.assert_allclose(value, wide["v1"]["data"], rtol=1e-12)
    x = wide["v0"]["data"]
    assert (value[x * 2 > 3] == x[x * 2 > 3]).all()
    assert "v1" not in numpy_observations(_call_program("torch.erfinv"), wide)


def _buggy_backward_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(FIXTURES / "buggy_backward_reference")
    return env


@pytest.mark.slow
def test_a_backward_bug_of_the_reference_is_caught_by_finite_differences(
        tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude",
         (FIXTURES / "correct_tanh.py").read_text(), "--spec-file",
         str(FIXTURES / "planted_specs.py"), "--ops", "tanh_backward", "--json", str(path),
         "--no-progress"], env=_buggy_backward_env(), capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(path.read_text())["findings"]
    assert finding["kind"] == "grad-mismatch" and finding["verdict"] == "reference-suspect"
    evidence = finding["evidence"]
    assert evidence["reference_grad_error_vs_finite_differences"] > 0.1
    assert evidence["reference_float64_grad_error_vs_finite_differences"] > 0.1
    assert evidence["candidate_grad_error_vs_finite_differences"] < 1e-5
    assert finding["repro_reference_only_verified"] is True
    assert "### 🐛 Describe the bug" in finding["upstream_draft"]
    assert finding["repro_reference_only"] in finding["upstream_draft"]
    script = finding["repro_reference_only"]
    code, output = run_script(script, env=_buggy_backward_env())
    assert code == 1 and "autograd and finite differences disagree" in output
    code, output = run_script(script)
    assert code == 0, output  # real PyTorch's tanh backward is right
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "-"],
                          input=script, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def _c(values: list[complex], dtype: str = "complex64") -> dict[str, Any]:
    arr = np.asarray(values, dtype=dtype)
    return {"t": "tensor", "dtype": dtype, "shape": list(arr.shape), "data": arr}


def test_complex_results_are_measured_with_both_parts() -> None:
    assert rmse(np.array([1 + 1j]), np.array([1 - 1j])) == 2.0
    truth = _c([1 + 2j, 3 - 1j], "complex128")
    # the candidate's imaginary parts are wrong: float64 alone would not see it
    assert _judge(Kind.VALUE, _c([1 + 2j, 3 - 1j]), _c([1 - 2j, 3 + 1j]), truth) \
        is Verdict.CANDIDATE_BUG
    assert _judge(Kind.VALUE, _c([1 - 2j, 3 + 1j]), _c([1 + 2j, 3 - 1j]), truth) \
        is Verdict.REFERENCE_SUSPECT
    program = {"nodes": [{"id": "v0", "op": "input", "dtype": "complex64", "shape": [2],
                          "recipe": {}},
                         {"id": "v1", "op": "call", "target": "torch.ones", "args": [2],
                          "kwargs": {"dtype": {"dtype": "complex64"}}}]}
    wide = to_float64(program)
    assert wide["nodes"][0]["dtype"] == "complex128"
    assert wide["nodes"][1]["kwargs"]["dtype"] == {"dtype": "complex128"}


def test_low_precision_rounding_is_noise_and_a_real_error_is_not() -> None:
    truth = _t([0.1, 0.7], "float64")
    half = np.asarray([0.1, 0.7], dtype=np.float16).astype(np.float32).tolist()
    # one float16 rounding step apart, as two correct float16 kernels may be
    assert _judge(Kind.VALUE, _t(half, "float16"), _t([half[0], half[1] + 4.9e-4], "float16"),
                  truth) is Verdict.TOLERANCE_NOISE
    assert _judge(Kind.VALUE, _t(half, "bfloat16"), _t([half[0], 0.75], "bfloat16"), truth) \
        is Verdict.CANDIDATE_BUG


def _votes(ref: list[float], cand: list[float], wide: list[float],
           others: dict[str, list[float]]) -> Any:
    oracles = {name: {"v1": _t(values, "float64" if name in ("formula", "numpy") else
                               "float32")} for name, values in others.items()}
    oracles["reference-float64"] = {"v1": _t(wide, "float64")}
    return triage({"nodes": []}, _finding(Kind.VALUE), {"v1": _t(ref)}, {"v1": _t(cand)},
                  oracles)


def test_the_documented_formula_outvotes_the_references_own_float64_run() -> None:
    """lp_pool2d's partial windows: PyTorch gives 4 in float32 and float64 alike."""
    result = _votes([4, 4, 4, 1], [4, 2, 2, 1], [4, 4, 4, 1], {"formula": [4, 2, 2, 1]})
    assert result.verdict is Verdict.REFERENCE_SUSPECT
    assert result.evidence["measured_against"] == "formula"
    assert result.evidence["decided_by"] == ["formula"]
    assert result.evidence["oracles"] == {"formula": "candidate",
                                          "reference-float64": "reference"}
    assert "documented formula" in result.reason
    # where the formula agrees with the float64 run, the candidate is wrong as before
    agreed = _votes([4, 4, 4, 1], [4, 2, 2, 1], [4, 4, 4, 1], {"formula": [4, 4, 4, 1]})
    assert agreed.verdict is Verdict.CANDIDATE_BUG
    assert agreed.evidence["decided_by"] == ["formula"]


def test_a_formula_that_agrees_with_no_one_decides_nothing() -> None:
    result = _votes([4, 4, 4, 1], [4, 2, 2, 1], [4, 4, 4, 1], {"formula": [9, 9, 9, 9]})
    assert result.verdict is Verdict.UNDETERMINED
    assert result.evidence["oracles"]["formula"] == "neither"


def test_third_frameworks_count_as_documented() -> None:
    wrong, right = [1.1, 2.0], [1.0, 2.0]
    # one third framework against the reference's own float64 run: undetermined
    one = _votes(wrong, right, wrong, {"third:jax": right})
    assert one.verdict is Verdict.UNDETERMINED
    # two outvote it; the record says which frameworks decided
    two = _votes(wrong, right, wrong, {"third:jax": right, "third:paddle": right})
    assert two.verdict is Verdict.REFERENCE_SUSPECT
    assert two.evidence["decided_by"] == ["third:jax", "third:paddle"]
    # a third framework that sides with the reference against the documented formula
    against = _votes(wrong, right, wrong, {"formula": right, "third:jax": wrong})
    assert against.verdict is Verdict.UNDETERMINED
    assert against.evidence["decided_by"] == ["formula", "third:jax"]
    # and one that agrees with the formula is recorded beside it
    beside = _votes(wrong, right, wrong, {"formula": right, "third:jax": right})
    assert beside.verdict is Verdict.REFERENCE_SUSPECT
    assert beside.evidence["decided_by"] == ["formula", "third:jax"]


def test_finite_differences_of_the_formula_outvote_those_of_a_wrong_forward() -> None:
    """The reference's backward matches its own (wrong) forward; only the formula's
    gradient says the candidate's is right."""
    oracles = {"finite-differences": {"grad:v0": _t([1.0, 2.0], "float64")},
               "formula-finite-differences": {"grad:v0": _t([1.0, 1.0], "float64")},
               "reference-float64": {"grad:v0": _t([1.0, 2.0], "float64")}}
    finding = Finding(Kind.GRAD, "torch.op", "t.spec", "m", {"nodes": []}, key="grad:v0")
    result = triage({"nodes": []}, finding, {"grad:v0": _t([1.0, 2.0])},
                    {"grad:v0": _t([1.0, 1.0])}, oracles)
    assert result.verdict is Verdict.REFERENCE_SUSPECT
    assert result.evidence["measured_against"] == "formula-finite-differences"
    assert result.evidence["oracles"]["finite-differences"] == "reference"
    assert result.evidence["oracles"]["formula-finite-differences"] == "candidate"


def _documented_check(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "alignbot.checks.cli", "check", "--prelude",
         (FIXTURES / "documented_prelude.py").read_text(), "--spec-file",
         str(FIXTURES / "documented_specs.py"), "--json", str(path), "--no-progress",
         "--jobs", "1"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(path.read_text())["findings"]
    return {finding["op"]: finding for finding in findings}


@pytest.mark.slow
def test_a_candidate_that_follows_the_documentation_gets_drafts_against_pytorch(
        tmp_path: Path) -> None:
    """lp_pool2d's partial ceil_mode windows (the formula decides) and nearest
    interpolation's gradient at an exactly doubled size (finite differences decide): both
    reference-suspect, each with a verified PyTorch-alone repro and a draft."""
    findings = _documented_check(tmp_path)
    lp = findings["torch.nn.functional.lp_pool2d"]
    near = findings["torch.nn.functional.interpolate"]
    assert lp["kind"] == "value-mismatch" and near["kind"] == "grad-mismatch"
    assert lp["evidence"]["measured_against"] == "formula"
    assert near["evidence"]["measured_against"] == "finite-differences"
    for finding, says in ((lp, "PyTorch and the documented formula disagree"),
                          (near, "autograd and finite differences disagree")):
        assert finding["verdict"] == "reference-suspect", finding["verdict_reason"]
        assert finding["repro_reference_only_verified"] is True
        assert finding["repro_reference_only"] in finding["upstream_draft"]
        script = finding["repro_reference_only"]
        code, output = run_script(script)
        assert code == 1 and says in output, output
        lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "-"],
                              input=script, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout
    assert "def lp_pool2d(" in lp["repro_reference_only"]
    assert "import alignbot" not in lp["repro_reference_only"]


def test_third_frameworks_vote_under_their_own_names() -> None:
    configs = [CandidateConfig("third-0", "import paddle\npaddle.enable_compat()\nimport torch"),
               CandidateConfig("third-1", "import os, torch\nfrom torchax import interop"),
               CandidateConfig("third-2", "import torch"),
               CandidateConfig("third-3", "import paddle as p")]
    assert third_names(configs) == ["paddle-0", "torchax", "third-2", "paddle-3"]


def test_a_third_framework_that_sides_with_the_candidate_against_finite_differences() -> None:
    oracles = {"finite-differences": {"grad:v0": _t([1.0, 0.4], "float64")},
               "third:jax": {"grad:v0": _t([1.5, 0.6])}}
    finding = Finding(Kind.GRAD, "torch.op", "t.spec", "m", {"nodes": []}, key="grad:v0")
    result = triage({"nodes": []}, finding, {"grad:v0": _t([1.0, 0.4])},
                    {"grad:v0": _t([1.5, 0.6])}, oracles)
    assert result.verdict is Verdict.UNDETERMINED
    assert result.evidence["decided_by"] == ["finite-differences", "third:jax"]
