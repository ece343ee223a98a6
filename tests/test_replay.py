"""checks/runtime/replay.py: what ``alignbot_wrap`` wraps (tensor computations only, and what
``alignbot_wrap_also`` adds), the same in the worker and in a repro script; what a call
writes into its arguments; whether a result keeps its backward node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateConfig, CandidateProcess
from alignbot.checks import repro as repros
from alignbot.checks.engine import check, draw_programs
from alignbot.checks.findings import Finding, Kind
from alignbot.checks.library import training
from alignbot.checks.runtime.replay import Hooks, computes, replay, seed
from alignbot.checks.spec import Spec

FIXTURES = Path(__file__).parent / "fixtures"
# A compiler-like wrapper that accepts tensor computations only: whatever gives no tensor
# (Tensor.backward, an optimizer's step or construction, Module.parameters) it refuses.
STRICT_WRAP = '''
import torch


def alignbot_wrap(name, fn):
    def compiled(*args, **kwargs):
        out = fn(*args, **kwargs)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"compiled {name} gave {type(out).__name__}, not a tensor")
        return out
    return compiled
'''


def _train_steps() -> Spec:
    spec: Spec = training.train_steps.spec  # type: ignore[attr-defined]
    return spec


def _first_program(spec: Spec) -> Any:
    drawn: list[Any] = []
    draw_programs(spec, 1, 0, lambda program, ref: drawn.append(program))
    return drawn[0]


def test_a_tensor_computation_is_wrapped_and_the_autograd_and_optimizer_calls_are_not(
        ) -> None:
    import torch

    x, module, sgd = torch.ones(2), torch.nn.Linear(2, 2), torch.optim.SGD
    assert computes(torch, "call", "torch.add", torch.add)
    assert computes(torch, "invoke", "torch.nn.Linear", module, module)
    assert computes(torch, "method", "torch.Tensor.sum", x.sum, x)
    assert not computes(torch, "method", "torch.Tensor.backward", x.backward, x)
    assert not computes(torch, "call", "torch.optim.SGD", sgd)
    assert not computes(torch, "call", "torch.manual_seed", torch.manual_seed)
    assert not computes(torch, "call", "torch.autograd.grad", torch.autograd.grad)
    assert not computes(torch, "method", "torch.nn.Linear.parameters", module.parameters,
                        module)
    optimizer = sgd(module.parameters(), lr=0.1)
    assert not computes(torch, "method", "torch.optim.SGD.step", optimizer.step, optimizer)


def _wrapped(program: Any, also: Any = None) -> list[str]:
    import torch

    seen: list[str] = []

    def wrap(name: str, fn: Any) -> Any:
        seen.append(name)
        return fn

    seed(torch, int(program["seed"]))
    replay(torch, program, Hooks(wrap=wrap, wrap_also=also))
    return seen


def test_a_training_program_wraps_its_computations_only_unless_the_prelude_asks() -> None:
    program = _first_program(_train_steps())
    targets = [n.get("target") for n in program["nodes"]]
    assert "torch.Tensor.backward" in targets and any(
        str(t).startswith("torch.optim.") for t in targets)
    wrapped = set(_wrapped(program))
    assert wrapped and not any(name.startswith("torch.optim.") or name.endswith(
        (".backward", ".step", ".zero_grad", ".parameters")) for name in wrapped)
    assert "torch.nn.functional.mse_loss" in wrapped
    more = set(_wrapped(program, {"torch.optim.*"}))
    assert more - wrapped and all(n.startswith("torch.optim.") for n in more - wrapped)
    assert set(_wrapped(program, lambda name: name == "torch.Tensor.backward")) == \
        wrapped | {"torch.Tensor.backward"}


def test_a_repro_wraps_what_the_worker_wraps() -> None:
    """The repro script carries its own copy of the rule: the same calls, in order."""
    import torch

    program = _first_program(_train_steps())
    finding = Finding(Kind.VALUE, "torch.optim.SGD", "train_steps", "m", program,
                      program["nodes"][-1]["id"], program["nodes"][-1]["id"])
    config = CandidateConfig("wrap", STRICT_WRAP + "alignbot_wrap_also = ['*.zero_grad']\n")
    script = repros.render(program, finding, config, 1e-5, 1e-5, two_process=False)
    namespace: dict[str, Any] = {"__name__": "repro"}
    exec(compile(script, "repro.py", "exec"), namespace)
    seen: list[str] = []

    def wrap(name: str, fn: Any) -> Any:
        seen.append(name)
        return fn

    seed(torch, int(program["seed"]))
    namespace["case"](torch, namespace["hooks"]({}, wrap, ["*.zero_grad"]))
    assert seen == _wrapped(program, ["*.zero_grad"])
    assert any(name.endswith(".zero_grad") for name in seen)


@pytest.mark.slow
def test_a_wrapper_around_what_is_not_a_computation_gives_no_false_finding() -> None:
    with CandidateProcess(CandidateConfig("strict", STRICT_WRAP)) as candidate:
        assert check([_train_steps()], candidate, seed=0, n=3).findings == []
    opted = STRICT_WRAP + "alignbot_wrap_also = {'torch.optim.SGD', 'torch.optim.Adam'}\n"
    with CandidateProcess(CandidateConfig("strict", opted)) as candidate:
        found = check([_train_steps()], candidate, seed=0, n=3).findings
    assert {f.op for f in found} <= {"torch.optim.SGD", "torch.optim.Adam"} and found
    assert all(f.kind is Kind.CANDIDATE_ERROR for f in found)
