"""Judging: a backward that raises names the call whose backward raised; wrong gradients are
blamed on the call that sent them."""

from __future__ import annotations

from typing import Any

import torch

from checks import random_tensor
from checks.engine import draw_programs
from checks.findings import BACKWARD_OP, Kind, backward_call, judge
from checks.runtime.replay import AUTOGRAD_KEY, BackwardTracker, Hooks, replay
from checks.runtime.replay import seed as seed_reference
from checks.spec import Spec


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
