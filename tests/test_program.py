"""The Program format's helpers (checks/program.py): the reference's seeded replay, and a
program built by hand given every module tensor its construction makes."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from alignbot.checks import random_tensor
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import trace_program
from alignbot.checks.program import Program, as_json, complete_states, reference_observations
from alignbot.checks.runtime.values import decode_array, encode_array
from alignbot.checks.spec import Spec


def norm_then_linear(torch: Any) -> Any:
    x = random_tensor(shape=[4, 3])
    return torch.nn.Linear(3, 2)(torch.nn.BatchNorm1d(3)(x))


def traced(fn: Any) -> Program:
    program, _ = trace_program(Spec(name="t.program", fn=fn, backward=True),
                               DrawContext(choices=[]))
    return program


def modules(program: Program) -> list[dict[str, Any]]:
    """The module nodes, as the tracer made them: the Linear (v0), then the BatchNorm1d (v1)."""
    return [node for node in program["nodes"] if node["op"] == "module"]  # type: ignore[misc]


def test_the_references_replay_is_seeded_by_the_program() -> None:
    program = traced(lambda torch: torch.nn.Linear(3, 2)(random_tensor(shape=[2, 3])))
    for module in modules(program):
        module["state"] = {}  # left to the module's random initialisation
    first, again = reference_observations(program), reference_observations(program)
    np.testing.assert_array_equal(first["v2"]["data"], again["v2"]["data"])
    other = copy.deepcopy(program)
    other["seed"] = 1
    assert not np.array_equal(reference_observations(other)["v2"]["data"], first["v2"]["data"])


def test_every_module_tensor_is_written_out_as_the_seeded_replay_makes_it() -> None:
    program = traced(norm_then_linear)
    bare = copy.deepcopy(program)
    for module in modules(bare):
        module["state"] = {}
    before = reference_observations(bare)
    completed = complete_states(bare)
    assert completed is bare  # in place
    linear, norm = modules(completed)
    assert set(norm["state"]) == {"weight", "bias", "running_mean", "running_var",
                                  "num_batches_tracked"}
    assert set(linear["state"]) == {"weight", "bias"}
    # the values the traced modules had, and the observations they give are unchanged
    for mine, traced_module in zip(modules(completed), modules(program), strict=True):
        for name, data in mine["state"].items():
            np.testing.assert_array_equal(decode_array(data),
                                          decode_array(traced_module["state"][name]))
    after = reference_observations(completed)
    np.testing.assert_array_equal(after["v4"]["data"], before["v4"]["data"])


def test_a_tensor_given_is_kept() -> None:
    program = traced(norm_then_linear)
    norm = modules(program)[1]
    ones = encode_array(np.ones(3, dtype=np.float32))
    norm["state"] = {"weight": ones}
    complete_states(program)
    assert norm["state"]["weight"] == ones and "bias" in norm["state"]


def test_a_program_without_modules_or_whose_replay_raises_is_left_as_it_is() -> None:
    plain = traced(lambda torch: torch.exp(random_tensor(shape=[2])))
    assert complete_states(copy.deepcopy(plain)) == plain
    program = traced(norm_then_linear)
    for module in modules(program):
        module["state"] = {}
    linear, norm = modules(program)
    linear["args"] = [-1, 2]  # Linear(-1, 2) raises: nothing after it is built
    complete_states(program)
    assert linear["state"] == {} and norm["state"] == {}
    assert as_json(program) is program
