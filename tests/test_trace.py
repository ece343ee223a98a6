"""The tracer (checks/trace.py) on modules with state and modes: what it records of ``.eval()``,
``.to(dtype)``, tuple results within tuples, several inputs and masks, ``None`` arguments,
lazy modules, torch functions as arguments and optimizer steps; each program replayed from
its JSON (as a candidate's worker gets it) gives the reference's observations again."""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np

from alignbot.checks import random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.program import Program
from alignbot.checks.runtime.replay import Hooks, replay
from alignbot.checks.spec import Spec


def traced(fn: Any, backward: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    program, ref = trace_program(Spec(name="t.module", fn=fn, backward=backward),
                                 DrawContext(choices=[]))
    return json.loads(json.dumps(program)), ref


def assert_replays(program: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """Replay on a fresh torch namespace: every observation the reference made, made again."""
    import torch

    got = replay(torch, cast(Program, program), Hooks())
    assert set(ref) <= set(got), set(ref) - set(got)
    for key, want in ref.items():
        if want.get("t") == "tensor":
            np.testing.assert_allclose(got[key]["data"], want["data"], rtol=1e-6, atol=1e-7,
                                       err_msg=key)
        elif want.get("t") in ("value", "opaque"):
            assert got[key] == want, key
    return got


def ops(program: dict[str, Any]) -> list[tuple[str, str]]:
    return [(n["op"], n.get("name", n.get("target", ""))) for n in program["nodes"]]


def test_eval_and_double_return_the_module_and_are_recorded_as_its_methods() -> None:
    def spec(torch: Any) -> Any:
        norm = torch.nn.BatchNorm1d(3).double()
        first = norm(random_tensor(shape=[4, 3], dtype="float64"))
        norm.eval()
        return first, norm(random_tensor(shape=[4, 3], dtype="float64"))

    program, ref = traced(spec)
    assert ("method", "double") in ops(program) and ("method", "eval") in ops(program)
    invokes = [n for n in program["nodes"] if n["op"] == "invoke"]
    assert invokes[0]["args"][0] == {"ref": "v1"}  # the module, as .double() returned it
    assert ref[f"{invokes[0]['id']}!state.running_mean"]["dtype"] == "float64"
    assert "grad:v0:weight" in ref
    assert_replays(program, ref)


def test_tuples_within_tuples_get_an_id_each() -> None:
    def spec(torch: Any) -> Any:
        lstm = torch.nn.LSTM(2, 3, num_layers=2, proj_size=2)
        out, (h, c) = lstm(random_tensor(shape=[4, 1, 2]))
        return out, h, c

    program, ref = traced(spec)
    call = next(n for n in program["nodes"] if n["op"] == "invoke")["id"]
    assert ref[f"{call}.1"] == {"t": "value", "value": "sequence of 2"}
    assert ref[f"{call}.1.0"]["shape"] == [2, 1, 2] and ref[f"{call}.1.1"]["shape"] == [2, 1, 3]
    assert {f"{call}.1.0", f"{call}.1.1"} <= set(program["backward"]["outputs"])
    assert_replays(program, ref)


def test_several_inputs_masks_and_none() -> None:
    def spec(torch: Any) -> Any:
        attention = torch.nn.MultiheadAttention(4, 2, batch_first=True).eval()
        query = random_tensor(shape=[2, 3, 4])
        mask = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)
        return attention(query, query, query, key_padding_mask=None, attn_mask=mask,
                         need_weights=False)

    program, ref = traced(spec)
    call = next(n for n in program["nodes"] if n["op"] == "invoke")
    assert call["kwargs"]["key_padding_mask"] is None
    assert ref[f"{call['id']}.1"] == {"t": "value", "value": None}
    assert_replays(program, ref)


def test_a_lazy_module_gets_the_parameters_its_first_call_made() -> None:
    def spec(torch: Any) -> Any:
        return torch.nn.LazyConv1d(2, 3)(random_tensor(shape=[1, 4, 5]))

    program, ref = traced(spec)
    built, call = (n for n in program["nodes"] if n["op"] in ("module", "invoke"))
    assert built["state"] == {} and set(call["state"]) == {"weight", "bias"}
    assert_replays(program, ref)  # the candidate's own random parameters are replaced


def test_a_torch_function_argument_is_recorded_by_its_path() -> None:
    def spec(torch: Any) -> Any:
        layer = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                                 activation=torch.nn.functional.gelu)
        return layer(random_tensor(shape=[3, 1, 4]))

    program, ref = traced(spec)
    built = next(n for n in program["nodes"] if n["op"] == "module")
    assert built["kwargs"]["activation"] == {"attr": "torch.nn.functional.gelu"}
    assert_replays(program, ref)


def test_an_optimizer_step_is_recorded_and_replayed() -> None:
    def spec(torch: Any) -> Any:
        linear = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(linear.parameters(), lr=0.5, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            linear(random_tensor(shape=[4, 3])).square().mean().backward()
            opt.step()
        return linear.weight * 1

    program, ref = traced(spec, backward=False)
    names = [name for op, name in ops(program) if op == "method"]
    assert names.count("step") == 2 and names.count("backward") == 2
    assert_replays(program, ref)

    import torch

    real_step = torch.optim.SGD.step
    try:  # an optimizer that does not update: the weights read at the end differ
        torch.optim.SGD.step = lambda self, closure=None: None  # type: ignore[method-assign]
        got = replay(torch, cast(Program, program), Hooks())
    finally:
        torch.optim.SGD.step = real_step  # type: ignore[method-assign]
    last = program["nodes"][-1]["id"]
    assert not np.allclose(got[last]["data"], ref[last]["data"])
