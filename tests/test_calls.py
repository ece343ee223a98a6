"""Every call judged on its own: bugs behind other bugs, consequences, autograd's None."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alignbot.bot.engine_report import parse_report
from alignbot.checks import CandidateConfig, CandidateProcess
from alignbot.checks.cli import main
from alignbot.checks.engine import CheckResult, check
from alignbot.checks.findings import BACKWARD_OP, Kind
from alignbot.checks.report import render_markdown
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).parent / "fixtures"
PRELUDE = (FIXTURES / "chained_bugs_prelude.py").read_text()
ALL_QUIRKS = '''{"log_softmax", "nll_loss", "hardtanh", "exp", "grad", "add_", "mul_", "asinh",
          "atan"}'''


def _specs(*names: str) -> list[Spec]:
    specs = load_file(FIXTURES / "chained_bugs_specs.py")
    return [s for s in specs if s.name.rsplit(".", 1)[-1] in names]


def _check(names: tuple[str, ...], quirks: set[str] | None = None, seed: int = 0
           ) -> CheckResult:
    assert ALL_QUIRKS in PRELUDE
    prelude = PRELUDE if quirks is None else PRELUDE.replace(
        ALL_QUIRKS, "{" + ", ".join(f'"{q}"' for q in sorted(quirks)) + "}" if quirks
        else "set()")
    with CandidateProcess(CandidateConfig("chained", prelude)) as candidate:
        return check(_specs(*names), candidate, seed=seed)


def _summary(result: CheckResult) -> set[tuple[str, str]]:
    return {(f.kind.value, f.op) for f in result.findings}


def test_two_broken_ops_in_one_program_are_two_findings() -> None:
    result = _check(("log_softmax_then_nll_loss",))
    assert _summary(result) == {("value-mismatch", "torch.nn.functional.log_softmax"),
                                ("value-mismatch", "torch.nn.functional.nll_loss")}
    root, later = result.findings  # root causes first
    assert root.op == "torch.nn.functional.log_softmax"
    assert "downstream_of" not in root.extra and "judged_alone" not in root.extra
    assert later.extra["judged_alone"] is True
    assert later.extra["downstream_of"] == [
        {"kind": "value-mismatch", "op": "torch.nn.functional.log_softmax", "node": root.node}]
    assert later.count == result.programs_run == 4  # every draw shows both


@pytest.mark.slow
def test_a_call_fed_a_wrong_value_is_no_finding_of_its_own() -> None:
    # only log_softmax is broken: nll_loss and `loss * 2.0` differ in the chained run, and
    # judged on the reference's inputs they agree
    result = _check(("log_softmax_then_nll_loss",), {"log_softmax"})
    assert _summary(result) == {("value-mismatch", "torch.nn.functional.log_softmax")}
    # only nll_loss is broken: the multiplication after it is a consequence too
    result = _check(("log_softmax_then_nll_loss",), {"nll_loss"})
    assert _summary(result) == {("value-mismatch", "torch.nn.functional.nll_loss")}
    assert "downstream_of" not in result.findings[0].extra


@pytest.mark.slow
def test_a_backward_bug_behind_a_forward_error_is_found() -> None:
    # the candidate raises in hardtanh, so its chained run never reaches exp's backward
    result = _check(("hardtanh_then_exp",))
    assert _summary(result) == {("candidate-error", "torch.nn.functional.hardtanh"),
                                ("grad-mismatch", "torch.exp")}
    grad = next(f for f in result.findings if f.kind is Kind.GRAD)
    assert grad.extra["downstream_of"][0]["op"] == "torch.nn.functional.hardtanh"
    assert grad.signature == "grad:arg0 float32 kw=[]"
    # without the forward error the chained run blames exp's backward by itself
    alone = _check(("hardtanh_then_exp",), {"exp"})
    assert [(f.kind, f.op, f.signature) for f in alone.findings] == \
        [(Kind.GRAD, "torch.exp", grad.signature)]


@pytest.mark.slow
def test_a_wrong_gradient_of_an_in_place_call_is_its_own_not_its_producers() -> None:
    # add_ doubles the gradient of the tensor it writes into: the chained run sees the
    # gradient w.r.t. the multiplication's input go wrong and would blame __mul__; judged
    # alone, __mul__ agrees and add_ (writing into a clone of its input) does not
    result = _check(("add_in_place",), {"add_"})
    assert [(f.kind, f.op, f.signature) for f in result.findings] == \
        [(Kind.GRAD, "torch.Tensor.add_", "grad:arg0 float32 kw=[]")]
    assert result.findings[0].extra["judged_alone"] is True
    # mul_ is right alone and wrong written into a view: no call shows it alone, and the
    # in-place write is named, not the multiplication that made the tensor
    result = _check(("mul_into_a_view",), {"mul_"})
    assert [(f.kind, f.op) for f in result.findings] == [(Kind.GRAD, "torch.Tensor.mul_")]
    assert "wrote in place" in result.findings[0].message
    assert _check(("add_in_place", "mul_into_a_view"), set()).findings == []


@pytest.mark.slow
def test_autograd_giving_none_is_one_finding_whatever_the_ops() -> None:
    result = _check(("sin_tanh", "sigmoid_matmul"), {"grad"})
    assert [(f.kind, f.op, f.signature) for f in result.findings] == \
        [(Kind.GRAD, BACKWARD_OP, "None on the candidate for an intermediate")]
    assert result.findings[0].count == result.programs_run == 8
    assert "gave None on the candidate" in result.findings[0].message
    # the same programs with the quirk off: no finding at all
    assert _check(("sin_tanh", "sigmoid_matmul"), set()).findings == []


def test_none_against_zeros_is_the_autograd_finding_in_either_direction() -> None:
    from alignbot.checks.findings import judge_all

    program = {"nodes": [{"id": "v0", "op": "input", "dtype": "float32", "shape": [2],
                          "recipe": {}, "requires_grad": True}],
               "backward": {"wrt": ["v0"], "intermediates": []}}
    zeros = {"t": "tensor", "dtype": "float32", "shape": [2],
             "data": __import__("numpy").zeros(2, dtype="float32")}
    none = {"t": "value", "value": None}
    found = judge_all(program, {"grad:v0": none}, {"grad:v0": zeros}, "t")
    assert [(f.op, f.signature) for f in found] == [(BACKWARD_OP,
                                                     "None on the reference for a leaf")]
    found = judge_all(program, {"grad:v0": zeros}, {"grad:v0": none}, "t")
    assert [(f.op, f.signature) for f in found] == [(BACKWARD_OP,
                                                     "None on the candidate for a leaf")]
    assert judge_all(program, {"grad:v0": none}, {"grad:v0": none}, "t") == []


@pytest.fixture(scope="module")
def chained_report(tmp_path_factory: Any) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("chained") / "report.json"
    code = main(["check", "--prelude", PRELUDE, "--spec-file",
                 str(FIXTURES / "chained_bugs_specs.py"), "--seed", "0", "--jobs", "1",
                 "--json", str(path), "--no-progress"])
    assert code == 1
    report: dict[str, Any] = json.loads(path.read_text())
    return report


@pytest.mark.slow
def test_each_bug_behind_another_minimizes_to_a_verified_repro_of_its_own(
        chained_report: dict[str, Any]) -> None:
    found = {(f["kind"], f["op"]): f for f in chained_report["findings"]}
    assert set(found) == {("value-mismatch", "torch.nn.functional.log_softmax"),
                          ("value-mismatch", "torch.nn.functional.nll_loss"),
                          ("candidate-error", "torch.nn.functional.hardtanh"),
                          ("grad-mismatch", "torch.exp"),
                          ("grad-mismatch", BACKWARD_OP),
                          ("grad-mismatch", "torch.Tensor.add_"),
                          ("grad-mismatch", "torch.Tensor.mul_"),
                          ("value-mismatch", "torch.asinh"),
                          ("value-mismatch", "torch.atan")}
    for finding in found.values():
        assert finding["repro_verified"] is True, finding["op"]
        assert finding["verdict"] == "candidate-bug", finding["op"]
    # the downstream findings' repros are their call alone: the bug upstream is gone
    for key, gone in ((("value-mismatch", "torch.nn.functional.nll_loss"), "log_softmax"),
                      (("grad-mismatch", "torch.exp"), "hardtanh")):
        finding = found[key]
        targets = [n.get("target", "") for n in finding["repro_program"]["nodes"]]
        assert not any(gone in t for t in targets), targets
        assert f"torch.nn.functional.{gone}(" not in finding["repro"]  # the prelude has it
        assert finding["downstream_of"][0]["op"].endswith(gone)
    # a call that got a strided view is judged, and reproduced, on the same strides
    atan = found[("value-mismatch", "torch.atan")]
    assert atan["downstream_of"][0]["op"] == "torch.asinh"
    assert "torch.asinh(" not in atan["repro"] and ".permute(" in atan["repro"]
    # root causes come first in the report
    flags = [bool(f.get("downstream_of")) for f in chained_report["findings"]]
    assert flags == sorted(flags)


def test_the_app_reads_and_renders_downstream_marks(chained_report: dict[str, Any]) -> None:
    parsed = parse_report(chained_report)
    marked = [f for f in parsed.findings if f.downstream_of]
    assert {f.op for f in marked} == {"torch.nn.functional.nll_loss", "torch.exp",
                                      "torch.atan"}
    text = render_markdown(chained_report)
    assert "Downstream of value-mismatch at `torch.nn.functional.log_softmax`" in text


@pytest.mark.slow
def test_a_bug_only_on_strided_input_is_judged_on_the_same_strides() -> None:
    # atan is wrong only on a non-contiguous input, and its input (a transpose) already
    # differs because asinh is off: judged alone it must still get a transposed input
    result = _check(("asinh_then_atan_of_a_transpose",))
    assert _summary(result) == {("value-mismatch", "torch.asinh"),
                                ("value-mismatch", "torch.atan")}
    atan = next(f for f in result.findings if f.op == "torch.atan")
    assert atan.extra["judged_alone"] is True
    assert atan.extra["downstream_of"][0]["op"] == "torch.asinh"
    assert atan.count == result.programs_run == 4
    # the same bug alone is found by the chained run, and a contiguous input shows nothing
    alone = _check(("asinh_then_atan_of_a_transpose",), {"atan"})
    assert _summary(alone) == {("value-mismatch", "torch.atan")}
    assert _summary(_check(("sin_tanh",), {"atan"})) == set()
