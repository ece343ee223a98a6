"""Judging: a backward that raises names the call whose backward raised; wrong gradients are
blamed on the call that sent them; a finding's identity is its kind, op and failure; and
whatever form a bug takes (a result without a backward node, a gradient that never arrives,
state left unwritten, a wrong gradient inside a call), the finding names its call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from alignbot.checks import CandidateConfig, CandidateProcess, random_tensor
from alignbot.checks.cli import main
from alignbot.checks.engine import CheckResult, check, draw_programs
from alignbot.checks.findings import (
    BACKWARD_OP,
    Finding,
    Kind,
    ancestors_of,
    backward_call,
    judge,
)
from alignbot.checks.runtime.replay import AUTOGRAD_KEY, BackwardTracker, Hooks, replay
from alignbot.checks.runtime.replay import seed as seed_reference
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import load_file

FIXTURES = Path(__file__).parent / "fixtures"


class _Raising(torch.autograd.Function):
    """The right forward (``fn``), a backward that raises."""

    @staticmethod
    def forward(ctx: Any, x: Any, fn: Any) -> Any:
        return fn(x.detach())

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        raise RuntimeError("no backward here")


class Sin(torch.autograd.Function):
    """``torch.sin`` with a gradient off by half; its node is ``SinBackward``."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x.detach().sin()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 0.5


def _raising(target: str) -> Any:
    fn = getattr(torch, target.rsplit(".", 1)[-1])
    return lambda x: _Raising.apply(x, fn)


def _two_calls(torch: Any) -> Any:
    return torch.sigmoid(torch.tanh(random_tensor(ndim=2)))


def _fan_out(torch: Any) -> Any:
    x = random_tensor(ndim=1, low=0.2, high=1.0)
    return torch.sin(x) + torch.cos(x)


def _draw(fn: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    programs: list[Any] = []
    draw_programs(Spec(name=f"t.{name}", fn=fn, n=1), 1, 0,
                  lambda program, ref: programs.append((program, ref)))
    program, ref = programs[0]
    return program, ref


def _candidate(program: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    seed_reference(torch, int(program["seed"]))
    return replay(torch, program, Hooks(overrides=overrides))


def _call(program: dict[str, Any], target: str) -> str:
    return next(str(n["id"]) for n in program["nodes"] if n.get("target") == target)


def test_the_call_whose_backward_raises_is_named_not_autograd_grad() -> None:
    program, ref = _draw(_two_calls, "two_calls")
    for raising, other in (("torch.sigmoid", "torch.tanh"), ("torch.tanh", "torch.sigmoid")):
        cand = _candidate(program, {raising: _raising(raising)})
        assert cand["backward"]["t"] == "error"
        finding = judge(program, ref, cand, "t.two_calls")
        assert finding is not None
        assert (finding.kind, finding.op, finding.key) == (Kind.CANDIDATE_ERROR, raising,
                                                           "backward")
        assert finding.node == _call(program, raising) != _call(program, other)
        assert finding.message.startswith(f"the backward of {raising} ({finding.node}) raised "
                                          "RuntimeError: no backward here on the candidate")


def test_a_backward_raising_on_the_reference_only_is_named_too() -> None:
    program, _ = _draw(_two_calls, "two_calls")
    cand = _candidate(program, {})
    raised = _candidate(program, {"torch.tanh": _raising("torch.tanh")})
    finding = judge(program, raised, cand, "t.two_calls")
    assert finding is not None
    assert (finding.kind, finding.op, finding.node) == (
        Kind.REFERENCE_ERROR, "torch.tanh", _call(program, "torch.tanh"))
    assert "on the reference; the candidate's backward ran" in finding.message


def test_backward_and_forward_raising_are_different_fingerprints() -> None:
    program, ref = _draw(_two_calls, "two_calls")
    backward = judge(program, ref, _candidate(program, {"torch.tanh": _raising("torch.tanh")}), "t")

    def forward_raises(x: Any) -> Any:
        raise RuntimeError("no forward here")

    forward = judge(program, ref, _candidate(program, {"torch.tanh": forward_raises}), "t")
    assert backward is not None and forward is not None
    assert (backward.op, backward.kind) == (forward.op, forward.kind)
    assert backward.fingerprint != forward.fingerprint


def _program(*calls: tuple[str, str]) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [{"id": "v0", "op": "input"}]
    for index, (op, target) in enumerate(calls, start=1):
        nodes.append({"id": f"v{index}", "op": op, "target": target,
                      "args": [{"ref": f"v{index - 1}"}], "kwargs": {}})
    return {"nodes": nodes}


def test_without_hook_data_the_backward_function_name_in_the_error_decides() -> None:
    program = _program(("call", "torch.nn.functional.hardtanh"), ("method", "torch.Tensor.exp"),
                       ("call", "torch.sigmoid"))
    program["nodes"][2]["name"] = "exp"
    error = {"t": "error", "type": "RuntimeError",
             "message": "Function 'HardtanhBackward0' returned nan values in its 0th output."}
    assert backward_call(program, error) == program["nodes"][1]
    traced = {**error, "message": "boom",
              "traceback": 'File "x.py", line 3, in backward\n  ExpBackward0 failed'}
    assert backward_call(program, traced) == program["nodes"][2]
    pad = _program(("module", "torch.nn.ReplicationPad2d"), ("invoke", "torch.nn.ReplicationPad2d"))
    snake = {**error, "message": "Assertion failed in replication_pad2d_backward_out_cpu"}
    assert backward_call(pad, {**snake, "message": "replication_pad2d_backward failed"}) == (
        pad["nodes"][2])
    assert backward_call(program, {**error, "message": "MatmulBackward0 failed"}) is None
    # the hooks' answer wins over the message; a node that is no call does not count
    assert backward_call(program, {**error, "node": "v3"}) == program["nodes"][3]
    assert backward_call(program, {**error, "node": "v0"}) == program["nodes"][1]


def test_an_unnamed_backward_error_stays_on_autograd_grad() -> None:
    program = _program(("call", "torch.sigmoid"))
    program["nodes"][1]["target"] = "torch.sigmoid"
    ref = {"v0": {"t": "value", "value": None}, "v1": {"t": "value", "value": None}}
    cand = {**ref, "backward": {"t": "error", "type": "RuntimeError", "message": "boom"}}
    finding = judge(program, {**ref, "grad:v0": {"t": "value", "value": None}}, cand, "t")
    assert finding is not None
    assert (finding.op, finding.node, finding.key) == (BACKWARD_OP, "", "backward")
    assert finding.message == "the backward pass: candidate raised RuntimeError: boom"


class _NoHooksNode:
    """A backward node of a framework without ``register_prehook`` / ``register_hook``."""


class _FakeTensor:
    def __init__(self) -> None:
        self.grad_fn = _NoHooksNode()


class _FakeTorch:
    Tensor = _FakeTensor


def test_a_framework_without_node_hooks_yields_no_hook_data() -> None:
    tracker = BackwardTracker(_FakeTorch())
    tracker.watch({"id": "v1", "op": "call"}, _FakeTensor())
    tracker.watch({"id": "v2", "op": "call"}, (_FakeTensor(), 3))
    assert tracker.raising_call() is None and tracker.observations() == {}


def test_per_call_gradients_blame_the_call_that_sent_the_wrong_gradient() -> None:
    # x feeds sin and cos: the gradient w.r.t. x is wrong, the gradients w.r.t. the results
    # of sin and cos are right. By values alone cos (the last call reading x) is blamed; the
    # per-call gradients show that sin sent the wrong one.
    program, ref = _draw(_fan_out, "fan_out")
    cand = _candidate(program, {"torch.sin": Sin.apply})
    sin, cos = _call(program, "torch.sin"), _call(program, "torch.cos")
    assert cand[AUTOGRAD_KEY]["calls"][sin]["fn"] == "SinBackward"
    assert ref[AUTOGRAD_KEY]["calls"][sin]["fn"] == "SinBackward0"
    finding = judge(program, ref, cand, "t.fan_out")
    assert finding is not None
    assert (finding.kind, finding.op, finding.node, finding.key) == (
        Kind.GRAD, "torch.sin", sin, "grad:v0")
    blind = judge(program, {k: v for k, v in ref.items() if k != AUTOGRAD_KEY},
                  {k: v for k, v in cand.items() if k != AUTOGRAD_KEY}, "t.fan_out")
    assert blind is not None and (blind.op, blind.node) == ("torch.cos", cos)


def _error_finding(type_: str, message: str) -> Finding:
    program = _program(("call", "torch.nn.functional.layer_norm"))
    ref = {"v0": {"t": "value", "value": 1}, "v1": {"t": "value", "value": 1}}
    cand = {"v0": ref["v0"], "v1": {"t": "error", "type": type_, "message": message}}
    finding = judge(program, ref, cand, "t")
    assert finding is not None and finding.kind is Kind.CANDIDATE_ERROR
    return finding


def test_two_errors_of_one_op_are_two_bugs_whatever_their_values() -> None:
    shape = _error_finding("RuntimeError", "Expected weight to be of shape [5] but got [4]")
    same = _error_finding("RuntimeError", "Expected weight to be of shape [7, 2] but got [9]")
    eps = _error_finding("RuntimeError", "eps 0.01 is larger than 1e-3")
    other_type = _error_finding("ValueError", "Expected weight to be of shape [5] but got [4]")
    assert shape.signature == "RuntimeError: Expected weight to be of shape [#] but got [#]"
    assert shape.fingerprint == same.fingerprint and shape.same_bug(same)
    assert len({shape.fingerprint, eps.fingerprint, other_type.fingerprint}) == 3
    assert not shape.same_bug(eps)


class _HalfTanh(torch.autograd.Function):
    """``torch.tanh`` with a gradient off by half."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        y = x.detach().tanh()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y) * 0.5


def _keywords(torch: Any) -> Any:
    x = random_tensor(ndim=2, low=0.2, high=1.0)
    return torch.nn.functional.softplus(torch.tanh(x), threshold=15.0, beta=2.0)


def test_a_mismatch_signature_names_role_dtype_and_keywords_not_ids_or_values() -> None:
    program, ref = _draw(_keywords, "keywords")
    softplus = "torch.nn.functional.softplus"

    def off(x: Any, **kwargs: Any) -> Any:
        return torch.nn.functional.softplus(x, **kwargs) * 1.5

    value = judge(program, ref, _candidate(program, {softplus: off}), "t")
    assert value is not None and value.kind is Kind.VALUE
    assert value.signature == "out float32 kw=[beta,threshold]"
    grad = judge(program, ref, _candidate(program, {"torch.tanh": _HalfTanh.apply}), "t")
    assert grad is not None and grad.kind is Kind.GRAD and grad.op == "torch.tanh"
    assert grad.signature == "grad:arg0 float32 kw=[]"
    # the same call with other values and ids is the same bug
    shifted = {**program, "nodes": [{**n, "id": "w" + n["id"]} for n in program["nodes"]]}
    again = Finding(value.kind, value.op, "t", "other message", shifted, "wv2", "wv2",
                    signature=value.signature)
    assert again.fingerprint == value.fingerprint


def test_merged_draws_keep_their_distinct_messages_up_to_a_bound() -> None:
    first = Finding(Kind.VALUE, "torch.tanh", "t", "a", {}, signature="out float32 kw=[]")
    for message in ("b", "a", "c", "b", "d", "e", "f", "x" * 5000):
        first.merge(Finding(Kind.VALUE, "torch.tanh", "t", message, {}))
    assert first.count == 9
    assert first.examples == ["a", "b", "c", "d", "e"]
    assert first.to_json()["examples"] == ["a", "b", "c", "d", "e"]
    long = Finding(Kind.VALUE, "torch.tanh", "t", "x" * 5000, {})
    assert 0 < len(long.examples[0]) <= 1000


def test_ancestors_follow_references_and_in_place_writes() -> None:
    def call(node_id: str, *refs: str, inplace: bool = False) -> dict[str, Any]:
        node = {"id": node_id, "op": "call", "target": "torch.f",
                "args": [{"ref": r} for r in refs], "kwargs": {}}
        return {**node, "inplace": True} if inplace else node

    program = {"nodes": [{"id": "v0", "op": "input"}, {"id": "v1", "op": "input"},
                         call("v2", "v0"), call("v3", "v1", "v2", inplace=True),
                         call("v4", "v1"), call("v5", "v4.0")]}
    above = ancestors_of(program)
    assert above["v2"] == {"v0"}
    # v4 reads v1 after v3 wrote into it: v3, and what v3 read, are ancestors of v4
    assert above["v4"] == {"v1", "v3", "v2", "v0"}
    assert above["v5"] == {"v4", "v1", "v3", "v2", "v0"}


# -- each form of a bug, named at its call (tests/fixtures/bug_forms_prelude.py) -------------


@pytest.fixture(scope="module")
def forms_run() -> CheckResult:
    prelude = (FIXTURES / "bug_forms_prelude.py").read_text()
    with CandidateProcess(CandidateConfig("forms", prelude)) as candidate:
        return check(load_file(FIXTURES / "bug_forms_specs.py"), candidate, seed=0)


def _found(run: CheckResult, spec: str) -> list[Finding]:
    return [f for f in run.findings if f.spec.rsplit(".", 1)[-1] == spec]


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "op", "node_class"), [
    ("floor_in_a_chain", "torch.floor", "FloorBackward0"),
    ("getitem_in_a_chain", "torch.Tensor.__getitem__", "SliceBackward0"),
    ("linear_then_relu", "torch.nn.Linear", "AddmmBackward0"),
])
def test_a_result_that_lost_its_backward_node_is_named_at_its_call(
        forms_run: CheckResult, spec: str, op: str, node_class: str) -> None:
    """Not at ``torch.autograd.grad``, and not merged with the other ops that do the same:
    the first call whose result has no grad_fn where the reference's has one."""
    (finding,) = _found(forms_run, spec)
    assert (finding.kind, finding.op, finding.signature) == (
        Kind.CANDIDATE_ERROR, op, "out detached")
    assert finding.key == "backward" and finding.node
    assert "has no grad_fn" in finding.message and node_class in finding.message


@pytest.mark.slow
def test_a_cut_graph_met_by_the_programs_own_backward_is_named_at_its_call() -> None:
    """A training step has no backward plan: its ``loss.backward()`` raises on the candidate
    because ``nn.Linear`` cut the graph, and the finding names ``nn.Linear``, not
    ``Tensor.backward``. Alone: in ``forms_run`` it is the same bug as ``linear_then_relu``'s
    and merges with it."""
    prelude = (FIXTURES / "bug_forms_prelude.py").read_text()
    specs = [s for s in load_file(FIXTURES / "bug_forms_specs.py")
             if s.name.endswith(".linear_in_a_training_step")]
    with CandidateProcess(CandidateConfig("forms", prelude)) as candidate:
        run = check(specs, candidate, seed=0)
    (finding,) = run.findings
    assert (finding.kind, finding.op, finding.signature) == (
        Kind.CANDIDATE_ERROR, "torch.nn.Linear", "out detached")
    assert "has no grad_fn" in finding.message and "AddmmBackward0" in finding.message


@pytest.mark.slow
def test_a_wrong_gradient_that_only_an_optimizer_step_reads_is_named_at_its_call(
        tmp_path: Path) -> None:
    """A training step has no backward plan: ``nn.Conv1d`` sends a wrong gradient to its
    weight, ``loss.backward()`` leaves it in ``weight.grad`` and ``SGD.step`` applies it. The
    finding is the weight's gradient just after the backward, at ``nn.Conv1d`` (not at the
    step that read it), and its repro, cut after that backward, is verified."""
    report = tmp_path / "report.json"
    code = main(["check", "--prelude", (FIXTURES / "bug_forms_prelude.py").read_text(),
                 "--spec-file", str(FIXTURES / "bug_forms_specs.py"),
                 "--ops", "*conv_in_a_training_step", "--json", str(report),
                 "--no-progress", "--jobs", "1"])
    assert code == 1
    findings = json.loads(report.read_text())["findings"]
    assert [(f["kind"], f["op"]) for f in findings] == [("grad-mismatch", "torch.nn.Conv1d")]
    (finding,) = findings
    assert "!grad." in finding["observation"] and finding["signature"].startswith(
        "grad:arg0:weight")
    assert "the gradient of" in finding["message"] and "through torch.nn.Conv1d" in \
        finding["message"]
    assert finding["repro_verified"], finding.get("repro_verify_note")
    assert ".weight.grad" in finding["repro"]


def test_a_gradient_written_again_by_a_later_backward_is_named_at_the_call_that_wrote_it(
        forms_run: CheckResult) -> None:
    """The second step's backward halves the first step's input gradient, which its graph
    does not hold: named at the first step's ``nn.Conv2d``, through which that gradient
    came, not at the optimizer's step or ``Tensor.backward``."""
    (finding,) = _found(forms_run, "two_training_steps")
    assert (finding.kind, finding.op) == (Kind.GRAD, "torch.nn.Conv2d")
    assert "!grad." in finding.key and "reused memory" in finding.message


def test_a_gradient_that_never_arrives_is_named_at_the_call_that_dropped_it(
        forms_run: CheckResult) -> None:
    (finding,) = _found(forms_run, "mul_of_two_leaves")
    assert (finding.kind, finding.op, finding.signature) == (
        Kind.GRAD, "torch.mul", "None on the candidate for a leaf")
    assert "the chain breaks at torch.mul" in finding.message


def test_state_a_call_does_not_write_is_named_at_that_call(forms_run: CheckResult) -> None:
    """F.batch_norm leaves its running statistics as they were: the finding is the state it
    should have written, at batch_norm, not the multiplication that read it afterwards."""
    findings = _found(forms_run, "batch_norm_statistics")
    assert {(f.kind, f.op) for f in findings} == {
        (Kind.STATE, "torch.nn.functional.batch_norm")}
    (finding,) = findings
    assert finding.key.endswith("!arg1") and finding.signature.startswith("arg1 float32")
    assert "wrote into (arg1)" in finding.message


@pytest.mark.parametrize(("spec", "op"), [("matmul_of_a_vector", "torch.matmul"),
                                          ("max_pool1d_alone", "torch.nn.functional.max_pool1d")])
def test_a_wrong_gradient_inside_a_call_whose_last_node_agrees_is_named_at_the_call(
        forms_run: CheckResult, spec: str, op: str) -> None:
    """Both end in a right ``squeeze``, as PyTorch's own do: the hooks of that last node
    agree, so the call is judged alone, where its gradient is wrong."""
    (finding,) = _found(forms_run, spec)
    assert (finding.kind, finding.op) == (Kind.GRAD, op)
    assert finding.key == "grad:v0" and finding.extra.get("judged_alone") is True


def test_every_form_is_one_finding_per_op_and_nothing_else(forms_run: CheckResult) -> None:
    assert BACKWARD_OP not in {f.op for f in forms_run.findings}
    assert len(forms_run.findings) == len({f.op for f in forms_run.findings}) == 9
