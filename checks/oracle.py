"""An oracle answers "does this program still show the finding?" within a bounded budget.

Shrinking, slicing and simplifying all ask the same question many times; the oracle counts
the calls and the seconds, so every pass stays bounded and reports what it cost.

Triage's independent oracles live here too: the reference re-run on a program
(``reference_observations``), finite-difference gradients in float64
(``finite_differences``) and NumPy's float64 values (``numpy_observations``), which share no
kernel with either side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .calls import judge_program
from .candidate import CandidateProcess
from .engine import evaluate
from .findings import Finding
from .program import (
    BackwardPlan,
    Node,
    Observations,
    Program,
    complete_states,
    reference_observations,
)
from .report_types import Shrink
from .runtime.replay import Hooks, replay
from .runtime.replay import seed as seed_reference
from .spec import Spec


class ShrinkBudgetSpent(Exception):
    """The oracle has used its calls or seconds."""


SHRINK_CALLS = 300  # oracle calls per finding: the one default of every shrink budget
SHRINK_SECONDS = 120.0  # and its seconds: a safety net, the calls bound shrinking


@dataclass
class ShrinkBudget:
    """The oracle calls and seconds that minimizing one finding may spend. The calls bound
    it, so that a report does not depend on the machine's speed; the seconds are a safety net
    (a candidate whose every call waits out the timeout), and ``stopped`` says when the net,
    not the calls, ended it."""

    max_calls: int = SHRINK_CALLS
    max_seconds: float = SHRINK_SECONDS
    calls: int = 0
    started: float = field(default_factory=time.perf_counter)
    stopped: str | None = None  # "calls" or "seconds": what ended the shrinking early

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def spend(self) -> None:
        if self.calls >= self.max_calls:
            self.stopped = self.stopped or "calls"
            raise ShrinkBudgetSpent
        if self.seconds >= self.max_seconds:
            self.stopped = self.stopped or "seconds"
            raise ShrinkBudgetSpent
        self.calls += 1


class Oracle:
    def __init__(self, spec: Spec, candidate: CandidateProcess, budget: ShrinkBudget) -> None:
        self.spec, self.candidate, self.budget = spec, candidate, budget

    def traced(self, program: Program, ref: Observations, want: Finding | None = None
               ) -> list[Finding]:
        """A program traced from the spec, with the reference's observations at hand."""
        self.budget.spend()
        return evaluate(self.spec, program, ref, self.candidate, want=want)

    def program(self, program: Program, want: Finding | None = None) -> list[Finding]:
        """A program built by hand (sliced, simplified): the reference replays it too. Its
        modules get every tensor written out (:func:`alignbot.checks.program.complete_states`)."""
        self.budget.spend()
        ref = reference_observations(complete_states(program))
        outcome = self.candidate.run(program)
        return judge_program(self.spec, program, ref, outcome, self.candidate, want)

    def same(self, program: Program, target: Finding) -> Finding | None:
        """The finding if ``program`` still shows ``target``'s bug up to the keyword
        arguments of the failing call (:attr:`Finding.core`), else None."""
        return next((f for f in self.program(program, target) if f.core == target.core),
                    None)


def stats(budget: ShrinkBudget) -> Shrink:
    shrink: Shrink = {"calls": budget.calls, "seconds": round(budget.seconds, 3)}
    if budget.stopped == "seconds":  # the safety net bit: this shrink depends on speed
        shrink["seconds_limit"] = (
            f"stopped by the {budget.max_seconds:g} s limit after {budget.calls} oracle calls, "
            f"before the {budget.max_calls}-call limit: on a faster or less loaded machine it "
            "may shrink further (--shrink-seconds)")
    return shrink


FD_EPS = 1e-6  # torch.autograd.gradcheck's central-difference step
FD_RTOL, FD_ATOL = 1e-3, 1e-5  # and its tolerances
FD_MAX_ELEMENTS = 4096  # two forward runs per element: larger inputs give no evidence


def _loss(torch: Any, program: Program, plan: BackwardPlan, key: str, value: Any) -> float:
    """sum(output * upstream gradient) of the program in float64, with the leaf ``key``
    (``v0`` or ``v2:weight``) replaced by ``value``; no autograd is involved."""
    from .runtime.replay import bind_result, make_array, run_node

    node_id, _, attr = key.partition(":")
    values: dict[str, Any] = {}
    hooks = Hooks()
    seed_reference(torch, int(program.get("seed", 0)))
    with torch.no_grad():
        for node in program["nodes"]:
            result = run_node(torch, node, values, hooks)
            if node["id"] == node_id:
                if attr:
                    target = result
                    for part in attr.split("."):
                        target = getattr(target, part)
                    target.copy_(value)
                else:
                    result = value
            bind_result(torch, node["id"], result, values)
        total = 0.0
        for out_id, seed in zip(plan["outputs"], plan["seeds"], strict=True):
            out = values[out_id].double()
            grad = make_array(seed, "float64", list(out.shape))
            total += float((out * torch.from_numpy(grad)).sum())
    return total


def finite_differences(program: Program, eps: float = FD_EPS) -> Observations:
    """Central differences in float64 of each leaf gradient the program asks for (what
    ``torch.autograd.gradcheck`` computes numerically): no backward kernel is involved, so
    it is independent of both sides' autograd. ``program`` must already be in float64."""
    import torch

    from .runtime.replay import observe

    plan = program.get("backward")
    if not plan:
        return {}
    seed_reference(torch, int(program.get("seed", 0)))
    base = replay(torch, program, Hooks())
    nodes = program["nodes"]
    out: Observations = {}
    for key in plan["wrt"]:
        obs = base.get(f"grad:{key}")
        if obs is None or obs.get("t") != "tensor" or obs.get("dtype") != "float64":
            continue
        if int(np.prod(obs["shape"])) > FD_MAX_ELEMENTS:
            continue
        leaf = _leaf_value(torch, program, nodes, key)
        if leaf is None:
            continue
        numeric = torch.zeros_like(leaf).reshape(-1)
        flat = leaf.reshape(-1)
        for index in range(flat.numel()):
            up, down = flat.clone(), flat.clone()
            up[index] += eps
            down[index] -= eps
            numeric[index] = (_loss(torch, program, plan, key, up.reshape(leaf.shape))
                              - _loss(torch, program, plan, key, down.reshape(leaf.shape))
                              ) / (2 * eps)
        out[f"grad:{key}"] = observe(torch, numeric.reshape(leaf.shape))
    return out


def _leaf_value(torch: Any, program: Program, nodes: list[Node], key: str) -> Any:
    """The float64 value of the leaf ``key`` as the program builds it (detached)."""
    from .runtime.replay import bind_result, run_node

    node_id, _, attr = key.partition(":")
    values: dict[str, Any] = {}
    seed_reference(torch, int(program.get("seed", 0)))
    with torch.no_grad():
        for node in nodes:
            result = run_node(torch, node, values, Hooks())
            bind_result(torch, node["id"], result, values)
            if node["id"] == node_id:
                target = result
                for part in attr.split(".") if attr else []:
                    target = getattr(target, part)
                if getattr(target, "dtype", None) != torch.float64:
                    return None
                return target.detach().clone()
    return None


def _softplus(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    scaled = x * beta
    with np.errstate(over="ignore"):
        return np.where(scaled > threshold, x, np.log1p(np.exp(scaled)) / beta)


def _reduce(fn: Any) -> Any:
    def call(x: np.ndarray, dim: Any = None, keepdim: bool = False) -> np.ndarray:
        axis = tuple(dim) if isinstance(dim, list) else dim
        return np.asarray(fn(x, axis=axis, keepdims=keepdim))
    return call


# PyTorch op name (the last part of its target) -> an independent NumPy implementation
NUMPY_OPS: dict[str, Any] = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "abs": np.abs, "neg": np.negative,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)), "softplus": _softplus,
    "relu": lambda x: np.maximum(x, 0.0), "sum": _reduce(np.sum), "mean": _reduce(np.mean),
    "prod": _reduce(np.prod), "amax": _reduce(np.max), "amin": _reduce(np.min),
    "matmul": np.matmul, "mm": np.matmul, "bmm": np.matmul, "mv": np.matmul,
    "dot": np.dot, "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "div": np.divide,
}
_NUMPY_TARGETS = ("torch.", "torch.Tensor.", "torch.nn.functional.", "torch.special.",
                  "torch.linalg.")


def numpy_observations(program: Program, wide: Observations) -> Observations:
    """Each call of the program whose op NUMPY_OPS implements, recomputed with NumPy in
    float64 from the inputs the float64 reference observed: a value oracle that shares no
    kernel with PyTorch. Calls it cannot recompute (other ops, non-literal arguments) are
    left out."""
    out: Observations = {}
    for node in program["nodes"]:
        if node["op"] not in ("call", "method"):
            continue
        target = node.get("target", "")
        prefix, _, name = target.rpartition(".")
        if prefix + "." not in _NUMPY_TARGETS or name not in NUMPY_OPS:
            continue
        try:
            args = [_numpy_arg(a, wide) for a in node.get("args", [])]
            kwargs = {k: _numpy_arg(v, wide) for k, v in node.get("kwargs", {}).items()}
            with np.errstate(all="ignore"):
                value = np.asarray(NUMPY_OPS[name](*args, **kwargs), dtype=np.float64)
        except (TypeError, ValueError, KeyError):
            continue
        out[node["id"]] = {"t": "tensor", "dtype": "float64", "shape": list(value.shape),
                           "data": value}
    return out


def _numpy_arg(value: Any, wide: Observations) -> Any:
    if isinstance(value, dict):
        if set(value) == {"tuple"} and isinstance(value["tuple"], list):
            return tuple(_numpy_arg(v, wide) for v in value["tuple"])
        if set(value) != {"ref"}:
            raise ValueError("not a plain reference")
        obs = wide[value["ref"]]
        if obs.get("t") != "tensor" or obs.get("dtype") != "float64":
            raise ValueError("not a float64 tensor")
        return np.asarray(obs["data"], dtype=np.float64)
    if isinstance(value, (list, tuple)):
        return [_numpy_arg(v, wide) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    raise ValueError("not a literal")
