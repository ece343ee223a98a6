"""alignbot's alignment engine: draw PyTorch programs, replay them on a candidate, compare."""

from .candidate import CandidateConfig, CandidateProcess, CandidateStartError
from .dsl import (
    constant,
    literal_tensor,
    nothing,
    oneof,
    random,
    random_bool,
    random_dtype,
    random_tensor,
)
from .engine import CheckResult, check, trace_program
from .findings import Finding, Kind
from .presets import PRESETS, preset
from .spec import Spec, autotest

__all__ = [
    "PRESETS",
    "CandidateConfig",
    "CandidateProcess",
    "CandidateStartError",
    "CheckResult",
    "Finding",
    "Kind",
    "Spec",
    "autotest",
    "check",
    "constant",
    "literal_tensor",
    "nothing",
    "oneof",
    "preset",
    "random",
    "random_bool",
    "random_dtype",
    "random_tensor",
    "trace_program",
]
