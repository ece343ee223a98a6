"""A call sliced out of its program (checks/isolate.py): fed with the reference's inputs as
literals, views rebuilt with their strides, modules with their state and modes, the upstream
gradient carried for a backward, an in-place call writing into a clone."""

from __future__ import annotations

from typing import Any

import numpy as np

from alignbot.checks import random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.isolate import prefix_values, slice_call, slice_calls, slice_program
from alignbot.checks.program import Observations, Program, reference_observations
from alignbot.checks.runtime.values import decode_array
from alignbot.checks.spec import Spec


def traced(fn: Any) -> tuple[Program, Observations]:
    return trace_program(Spec(name="t.isolate", fn=fn, backward=True), DrawContext(choices=[]))


def exp_then_sin_of_transpose(torch: Any) -> Any:
    x = random_tensor(shape=[2, 3], dtype="float32")
    return torch.sin(torch.exp(x).t())


def linear_in_eval_then_add_(torch: Any) -> Any:
    module = torch.nn.Linear(3, 2).double()
    module.eval()
    out = module(random_tensor(shape=[4, 3], dtype="float64"))
    out.add_(1.0)
    return out


def targets(program: Program) -> list[str]:
    return [str(n.get("target", n["op"])) for n in program["nodes"]]


def test_prefix_values_are_the_references_values_before_the_node() -> None:
    program, ref = traced(exp_then_sin_of_transpose)
    values = prefix_values(program, 2)
    assert set(values) == {"v0", "v1"}  # the transpose (v2) has not run
    np.testing.assert_allclose(values["v1"].detach().numpy(), ref["v1"]["data"], rtol=1e-6)


def test_a_call_alone_is_fed_its_inputs_as_literals_and_gives_the_same_result() -> None:
    program, ref = traced(exp_then_sin_of_transpose)
    sliced = slice_call(program, 3)
    assert sliced is not None
    nodes = sliced.program["nodes"]
    assert nodes[0]["op"] == "input" and nodes[0]["recipe"]["kind"] == "literal"
    # the transpose the call received is rebuilt from a contiguous literal by a view call
    assert targets(sliced.program) == ["input", "torch.Tensor.permute", "torch.sin"]
    literal = decode_array(nodes[0]["recipe"]["array"])  # type: ignore[typeddict-item]
    np.testing.assert_allclose(literal, ref["v1"]["data"], rtol=1e-6)
    assert sliced.program["sliced_from"] == "v3" and sliced.program["choices"] == []
    assert sliced.back == {"v1": "v2", "v2": "v3"}  # the view stands for v2, the call for v3
    alone = reference_observations(sliced.program)
    np.testing.assert_allclose(alone["v2"]["data"], ref["v3"]["data"], rtol=1e-6)


def test_an_input_node_has_nothing_to_slice() -> None:
    program, _ = traced(exp_then_sin_of_transpose)
    assert slice_call(program, 0) is None


def test_a_backward_slice_carries_the_upstream_gradient_the_call_received() -> None:
    program, ref = traced(exp_then_sin_of_transpose)
    sliced = slice_call(program, 1, backward=True, ref=ref)
    assert sliced is not None
    plan = sliced.program["backward"]
    assert plan is not None and plan["outputs"] == ["v1"] and plan["wrt"] == ["v0"]
    seed = decode_array(plan["seeds"][0]["array"])  # type: ignore[typeddict-item]
    np.testing.assert_allclose(seed, ref["grad:v1"]["data"], rtol=1e-6)
    # the call's own backward on that gradient gives the reference's gradient of its input
    alone = reference_observations(sliced.program)
    np.testing.assert_allclose(alone["grad:v0"]["data"], ref["grad:v0"]["data"], rtol=1e-5)


def test_without_keep_grad_the_literal_inputs_need_no_gradient() -> None:
    program, _ = traced(exp_then_sin_of_transpose)
    kept, dropped = slice_call(program, 1), slice_call(program, 1, keep_grad=False)
    assert kept is not None and dropped is not None
    assert kept.program["nodes"][0]["requires_grad"] is True
    assert dropped.program["nodes"][0]["requires_grad"] is False
    assert dropped.program["backward"] is None


def test_a_module_travels_with_its_state_dtype_and_eval_mode() -> None:
    program, ref = traced(linear_in_eval_then_add_)
    sliced = slice_call(program, 4, backward=True, ref=ref)
    assert sliced is not None
    module, mode = sliced.program["nodes"][:2]
    assert module["op"] == "module" and set(module["state"]) == {"weight", "bias"}  # type: ignore[typeddict-item]
    assert module["kwargs"]["dtype"] == {"dtype": "float64"}  # type: ignore[typeddict-item]
    assert mode.get("name") == "eval"
    plan = sliced.program["backward"]
    assert plan is not None and plan["wrt"] == ["v2", "v0:weight", "v0:bias"]
    alone = reference_observations(sliced.program)
    np.testing.assert_allclose(alone["v3"]["data"], ref["v4"]["data"], rtol=1e-12)


def test_an_in_place_call_with_a_backward_writes_into_a_clone_of_its_literal() -> None:
    program, ref = traced(linear_in_eval_then_add_)
    sliced = slice_call(program, 5, backward=True, ref=ref)
    assert sliced is not None
    assert targets(sliced.program) == ["input", "torch.Tensor.clone", "torch.Tensor.add_"]
    add = sliced.program["nodes"][2]
    assert add["args"][0] == {"ref": "v1"}  # type: ignore[typeddict-item]
    alone = reference_observations(sliced.program)
    np.testing.assert_allclose(alone["v2"]["data"], ref["v5"]["data"], rtol=1e-12)


def test_several_calls_sliced_from_one_replay_are_each_calls_slice() -> None:
    program, ref = traced(exp_then_sin_of_transpose)
    together = slice_calls(program, {1: (True, False), 3: (True, True), 0: (True, False)}, ref)
    assert set(together) == {1, 3}  # the input is left out
    for index, (keep_grad, backward) in ((1, (True, False)), (3, (True, True))):
        alone = slice_call(program, index, keep_grad, backward, ref=ref)
        assert alone is not None
        assert together[index].program == alone.program
        assert together[index].back == alone.back


def test_a_call_on_a_value_that_is_no_tensor_cannot_be_sliced() -> None:
    def spec(torch: Any) -> Any:
        x = random_tensor(shape=[3], dtype="float32")
        return torch.full((2,), x.sum().item())

    program, _ = traced(spec)
    item = next(n["id"] for n in program["nodes"] if n.get("name") == "item")
    full = next(i for i, n in enumerate(program["nodes"]) if n.get("target") == "torch.full")
    assert slice_call(program, full) is not None  # the tracer wrote the number down
    call = program["nodes"][full]
    call["args"] = [call["args"][0], {"ref": item}]  # type: ignore[typeddict-item]
    assert slice_call(program, full) is None  # a Python float is no input node


def test_a_finding_is_sliced_at_its_node_with_a_backward_for_a_gradient() -> None:
    program, _ = traced(exp_then_sin_of_transpose)

    def finding(kind: Kind, node: str, key: str) -> Finding:
        return Finding(kind, "torch.exp", "t.isolate", "m", program, key=key, node=node)

    value = slice_program(program, finding(Kind.VALUE, "v1", "v1"))
    grad = slice_program(program, finding(Kind.GRAD, "v1", "grad:v0"))
    assert value is not None and value["backward"] is None
    assert grad is not None and grad["backward"] is not None
    assert slice_program(program, finding(Kind.VALUE, "v9", "v9")) is None
