"""Finite differences of the formulas: a gradient oracle that shares neither PyTorch's
backward kernels nor its forward ones.

Central differences in float64 (the step and the loss of ``torch.autograd.gradcheck``:
``sum(output * upstream gradient)``) of a program whose backward outputs are calls with a
formula, taken with respect to the inputs those calls read directly. Other programs (a
chain of calls, gradients of module parameters) get none: the formulas cannot stand in for
the calls in between.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..oracle import FD_EPS
from ..program import Observations, Program, target_of
from ..runtime.literals import node_refs
from ..runtime.values import make_array
from . import special
from .evaluate import formula_observations
from .registry import lookup

MAX_ELEMENTS = 1024  # two formula runs per element


def formula_gradients(program: Program, wide: Observations, eps: float = FD_EPS
                      ) -> Observations:
    """``grad:<leaf>`` for each input leaf the backward asks for, where every backward
    output is a formula's call on inputs (``program`` in float64, ``wide`` its reference
    observations)."""
    plan = program.get("backward")
    if not plan:
        return {}
    nodes = {node["id"]: node for node in program["nodes"]}
    outputs = plan["outputs"]
    if any(out not in nodes or nodes[out]["op"] == "input" for out in outputs):
        return {}
    formulas = [lookup(target_of(nodes[out])) for out in outputs]
    if any(f is not None and f.module is special for f in formulas):
        return {}  # elementwise: the reference's own finite differences see as much
    base = formula_observations(program, wide)
    if any(base.get(out, {}).get("dtype") != "float64" for out in outputs):
        return {}
    seeds = [make_array(seed, "float64", base[out]["shape"])
             for out, seed in zip(outputs, plan["seeds"], strict=True)]
    read = {ref for out in outputs for ref in node_refs(nodes[out])}
    result: Observations = {}
    for key in plan["wrt"]:
        leaf = nodes.get(key)
        if ":" in key or leaf is None or leaf["op"] != "input" or key not in read:
            continue
        value = wide.get(key, {})
        if value.get("dtype") != "float64" or int(np.prod(value["shape"])) > MAX_ELEMENTS:
            continue
        grad = _central(functools.partial(_loss, program, wide, key, outputs=outputs,
                                          seeds=seeds),
                        np.asarray(value["data"], dtype=np.float64), eps)
        if grad is not None:
            result[f"grad:{key}"] = {"t": "tensor", "dtype": "float64",
                                     "shape": list(grad.shape), "data": grad}
    return result


def _loss(program: Program, wide: Observations, key: str, data: np.ndarray, *,
          outputs: list[str], seeds: list[np.ndarray]) -> float | None:
    moved = {**wide, key: {**wide[key], "data": data}}
    values = formula_observations(program, moved)
    if any(out not in values for out in outputs):
        return None
    return float(sum(np.sum(values[out]["data"] * seed)
                     for out, seed in zip(outputs, seeds, strict=True)))


def _central(loss: Callable[[np.ndarray], float | None], point: np.ndarray, eps: float
             ) -> np.ndarray | None:
    grad = np.zeros(point.shape)
    flat = point.reshape(-1)
    for index in range(flat.size):
        values: list[Any] = []
        for step in (eps, -eps):
            moved = flat.copy()
            moved[index] += step
            values.append(loss(moved.reshape(point.shape)))
        if values[0] is None or values[1] is None:
            return None
        grad.reshape(-1)[index] = (values[0] - values[1]) / (2 * eps)
    return grad
