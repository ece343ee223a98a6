"""The Program format (what a drawn program is on the wire) and its replay on the reference."""

from __future__ import annotations

from typing import Any, cast

from .runtime.program_types import (
    AttrLiteral,
    BackwardPlan,
    CallNode,
    CallOp,
    DeviceLiteral,
    DictLiteral,
    DtypeLiteral,
    EllipsisLiteral,
    EncodedArray,
    EncodedLiteral,
    FloatLiteral,
    InputNode,
    LiteralRecipe,
    Node,
    NodeOp,
    PatternRecipe,
    Recipe,
    RefLiteral,
    Scalar,
    SizeLiteral,
    SliceLiteral,
    TupleLiteral,
    UniformRecipe,
    call_args,
    call_kwargs,
    is_call,
    is_op_call,
    is_step,
    target_of,
)
from .runtime.program_types import (
    Program as ProgramData,
)
from .runtime.replay import Hooks, replay
from .runtime.replay import seed as seed_reference

__all__ = [
    "AttrLiteral", "BackwardPlan", "CallNode", "CallOp", "DeviceLiteral", "DictLiteral",
    "DtypeLiteral", "EllipsisLiteral", "EncodedArray", "EncodedLiteral", "FloatLiteral",
    "InputNode", "LiteralRecipe", "Node", "NodeOp", "Observations", "PatternRecipe", "Program",
    "ProgramData", "Recipe", "RefLiteral", "Scalar", "SizeLiteral", "SliceLiteral", "TupleLiteral",
    "UniformRecipe", "call_args", "call_kwargs", "is_call", "is_op_call", "is_step",
    "reference_observations", "target_of",
]

Program = ProgramData
Observations = dict[str, dict[str, Any]]


def as_json(program: Program) -> dict[str, Any]:
    """The program as a report carries it: plain JSON (the App validates it as such)."""
    return cast("dict[str, Any]", program)


def reference_observations(program: Program) -> Observations:
    """The reference's observations of a Program that is data only (no spec to trace)."""
    import torch

    seed_reference(torch, int(program.get("seed", 0)))
    return replay(torch, program, Hooks())


def complete_states(program: Program) -> Program:
    """Give every module node the value of each parameter and buffer its construction makes,
    in place, and return the program. A traced module records them all, but a program built
    by hand may build it otherwise (simplifying dropped ``bias=False``): a tensor left to
    the module's random initialisation would differ between the reference and the candidate,
    and between two runs of a repro, whose control run then never agrees. The values are
    those the reference's seeded replay makes, so its observations stay as they were."""
    import torch

    from .runtime.replay import bind_result, module_tensors, run_node
    from .runtime.values import encode_array, to_numpy

    nodes = program["nodes"]
    last = max((i for i, node in enumerate(nodes) if node["op"] == "module"), default=-1)
    if last < 0:
        return program
    seed_reference(torch, int(program.get("seed", 0)))
    values: dict[str, Any] = {}
    for node in nodes[:last + 1]:
        try:
            result = run_node(torch, node, values, Hooks())
        except Exception:  # the replay raises here as well: nothing after it is built
            return program
        bind_result(torch, node["id"], result, values)
        if node["op"] == "module":
            state = cast("CallNode", node).setdefault("state", {})
            for name, tensor in module_tensors(result).items():
                if name not in state:
                    state[name] = encode_array(to_numpy(torch, tensor)[1])
    return program
