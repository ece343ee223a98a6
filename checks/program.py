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
    "UniformRecipe", "call_args", "call_kwargs", "is_call", "reference_observations", "target_of",
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
