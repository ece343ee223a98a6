"""Try simpler values that keep the failure: patterns, small integers, fewer arguments.

Each attempt is one oracle call and is kept only when the same bug still fails (kind, op and
signature, up to the keyword names of the failing call, which this is allowed to drop), so
the result is never a different bug. Passes run in a fixed order and stop at the budget.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import numpy as np

from .findings import Finding
from .oracle import Oracle, ShrinkBudgetSpent
from .program import EncodedArray, InputNode, Program, Recipe, call_kwargs, is_call
from .runtime.values import decode_array, encode_array, make_array

PATTERNS = ("zeros", "ones", "arange", "arange-centered")


def _input_candidates(node: InputNode) -> Iterator[Recipe]:
    """Simpler recipes for one input, simplest first."""
    for pattern in PATTERNS:
        yield {"kind": "pattern", "pattern": pattern}
    current = make_array(node["recipe"], node["dtype"], node["shape"])
    if current.dtype.kind in "fc" and current.size:
        finite = np.where(np.isfinite(current), current, 0)
        for rounded in (np.clip(np.round(finite), -3, 3), np.round(finite, 1)):
            arr = np.where(np.isfinite(current), rounded, current).astype(current.dtype)
            if not np.array_equal(arr, current, equal_nan=True):
                yield {"kind": "literal", "array": encode_array(arr)}


def _state_candidates(data: EncodedArray) -> Iterator[EncodedArray]:
    arr = decode_array(data)
    if arr.dtype.kind not in "fc" or not arr.size:
        return
    for filled in (np.ones_like(arr), np.zeros_like(arr),
                   np.clip(np.round(arr * 4) / 4, -1, 1)):
        if not np.array_equal(filled, arr):
            yield encode_array(filled.astype(arr.dtype))


class Simplifier:
    """Greedy, bounded passes over a (sliced) program."""

    def __init__(self, oracle: Oracle, program: Program, finding: Finding) -> None:
        self.oracle, self.program, self.finding = oracle, program, finding

    def _try(self, candidate: Program) -> bool:
        found = self.oracle.same(candidate, self.finding)
        if found is None:
            return False
        self.program, self.finding = candidate, found
        return True

    def run(self) -> tuple[Program, Finding]:
        try:
            self._inputs()
            self._keywords()
            self._module_state()
            self._seeds()
        except ShrinkBudgetSpent:
            pass
        return self.program, self.finding

    def _inputs(self) -> None:
        for index, node in enumerate(self.program["nodes"]):
            if node["op"] != "input" or node["recipe"].get("kind") == "pattern":
                continue
            for recipe in _input_candidates(node):
                candidate = copy.deepcopy(self.program)
                simpler = candidate["nodes"][index]
                if simpler["op"] == "input":  # a copy of ``node``: always
                    simpler["recipe"] = recipe
                if self._try(candidate):
                    break

    def _keywords(self) -> None:
        for index, node in enumerate(self.program["nodes"]):
            for key in list(call_kwargs(node)):
                candidate = copy.deepcopy(self.program)
                del call_kwargs(candidate["nodes"][index])[key]
                self._try(candidate)

    def _module_state(self) -> None:
        for index, node in enumerate(self.program["nodes"]):
            state = node.get("state", {}) if is_call(node) else {}
            for name in list(state):
                for data in _state_candidates(state[name]):
                    candidate = copy.deepcopy(self.program)
                    simpler = candidate["nodes"][index]
                    if is_call(simpler) and "state" in simpler:  # a copy of ``node``: always
                        simpler["state"][name] = data
                    if self._try(candidate):
                        break

    def _seeds(self) -> None:
        plan = self.program.get("backward")
        if not plan:
            return
        for position, seed in enumerate(plan["seeds"]):
            if seed.get("kind") == "pattern":
                continue
            candidate = copy.deepcopy(self.program)
            simpler = copy.deepcopy(plan)
            simpler["seeds"][position] = {"kind": "pattern", "pattern": "ones"}
            candidate["backward"] = simpler
            self._try(candidate)
