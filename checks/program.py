"""The Program format (what a drawn program is on the wire) and its replay on the reference."""

from __future__ import annotations

from typing import Any

from .runtime.replay import Hooks, replay
from .runtime.replay import seed as seed_reference

Program = dict[str, Any]
Observations = dict[str, dict[str, Any]]


def reference_observations(program: Program) -> Observations:
    """The reference's observations of a Program that is data only (no spec to trace)."""
    import torch

    seed_reference(torch, int(program.get("seed", 0)))
    return replay(torch, program, Hooks())
