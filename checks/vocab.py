"""The engine's vocabulary: what a finding is (``Kind``), who is wrong (``Verdict``), and
where a draft against the reference goes unless told otherwise (``DEFAULT_TRACKER``).

The bottom of the engine: this module imports nothing from ``checks/``, so every module can
name these words, ``report_types.py`` included, without an import circle. Which nodes of a
Program are calls, in each of the senses the engine uses, is told by the predicates of
``checks/runtime/program_types.py`` instead, and what each dtype is by the table of
``checks/runtime/dtypes.py``: the candidate's worker tests nodes and makes values too, and it
imports nothing outside ``checks/runtime/``.
"""

from __future__ import annotations

from enum import StrEnum

DEFAULT_TRACKER = "pytorch/pytorch"  # the reference's issue tracker: the one default of it


def relative_interpreter(python: str) -> bool:
    """Whether a candidate's interpreter is named by a relative path (``.venv/bin/python``):
    it is then relative to where it was given (the caller's folder, the repository's root);
    a bare name (``python3``) is looked up on PATH as it is, an absolute path stays."""
    return "/" in python and not python.startswith("/")


class Kind(StrEnum):
    """What diverged: a mismatch of one observation, or a failure of one side."""

    VALUE = "value-mismatch"
    GRAD = "grad-mismatch"
    SHAPE = "shape-mismatch"
    DTYPE = "dtype-mismatch"
    STATE = "state-mismatch"
    CANDIDATE_ERROR = "candidate-error"
    MISSING_API = "missing-api"
    REFERENCE_ERROR = "reference-error"
    CANDIDATE_CRASH = "candidate-crash"
    CANDIDATE_TIMEOUT = "candidate-timeout"
    REGION_ERROR = "region-error"


class Verdict(StrEnum):
    """Who is wrong about a finding, as triage (``checks/triage.py``) decides it."""

    CANDIDATE_BUG = "candidate-bug"
    REFERENCE_SUSPECT = "reference-suspect"
    TOLERANCE_NOISE = "tolerance-noise"
    UNDETERMINED = "undetermined"
