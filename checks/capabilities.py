"""What a candidate that is not full PyTorch says it can do: no gradients (an inference-only
backend), or computing in a lower precision. The prelude declares it
(``alignbot_capabilities = {"gradients": False}``, ``alignbot_precision = "bfloat16"``), the
command line overrides it (``--no-gradients``, ``--precision DTYPE``), :func:`resolve`
decides, and :meth:`Capabilities.apply` turns it into what the specs compare."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from .compare import tolerance
from .report_types import CapabilitiesEntry
from .runtime.dtypes import DECLARABLE
from .spec import Spec

PRECISIONS: tuple[str, ...] = DECLARABLE  # the dtype table's declarable rows
KNOWN = frozenset({"gradients"})  # the keys alignbot_capabilities may hold


class CapabilityError(ValueError):
    """A declaration that is not one of those above: one line that says what is expected."""


@dataclass(frozen=True)
class Capabilities:
    """``gradients`` False: only forward values are compared; ``precision``: every
    comparison allows that dtype's tolerances (its row of the dtype table). ``declared_by`` says
    where each came from: ``"prelude"`` or ``"command line"``."""

    gradients: bool = True
    precision: str | None = None
    declared_by: tuple[tuple[str, str], ...] = ()

    @property
    def full(self) -> bool:
        return self.gradients and self.precision is None

    def apply(self, spec: Spec) -> Spec:
        """The spec as it is checked on this candidate: without backward when it computes
        no gradients; with the declared precision's tolerances unless the spec (or
        ``--rtol``/``--atol``) sets its own."""
        changes: dict[str, Any] = {}
        if not self.gradients and spec.backward:
            changes["backward"] = False
        if self.precision is not None and spec.rtol is None:
            changes["rtol"], changes["atol"] = tolerance(self.precision)
        return dataclasses.replace(spec, **changes) if changes else spec

    def to_json(self) -> CapabilitiesEntry:
        return typing.cast("CapabilitiesEntry", {
            "gradients": self.gradients, "precision": self.precision,
            "declared_by": dict(self.declared_by)})


def resolve(declared: Any, declared_precision: Any, gradients: bool | None = None,
            precision: str | None = None) -> Capabilities:
    """The one rule: the command line's ``gradients`` and ``precision`` (None: not given)
    win over what the prelude declared (``declared``: its ``alignbot_capabilities``,
    ``declared_precision``: its ``alignbot_precision``, None where it set none). A
    declaration that is not a known one raises :class:`CapabilityError`."""
    by: dict[str, str] = {}
    declared_gradients = True
    if declared is not None:
        if not isinstance(declared, dict) or not set(declared) <= KNOWN or not all(
                isinstance(v, bool) for v in declared.values()):
            raise CapabilityError(f"alignbot_capabilities {_shown(declared)}: expected a dict "
                                  'such as {"gradients": False}')
        if "gradients" in declared:
            declared_gradients, by["gradients"] = bool(declared["gradients"]), "prelude"
    if declared_precision is not None:
        if declared_precision not in PRECISIONS:
            raise CapabilityError(f"alignbot_precision {_shown(declared_precision)}: expected "
                                  f"one of {', '.join(PRECISIONS)}")
        by["precision"] = "prelude"
    if gradients is not None:
        by["gradients"] = "command line"
    if precision is not None:
        if precision not in PRECISIONS:
            raise CapabilityError(f"--precision {precision!r}: expected one of "
                                  f"{', '.join(PRECISIONS)}")
        by["precision"] = "command line"
    return Capabilities(gradients=declared_gradients if gradients is None else gradients,
                        precision=precision if precision is not None else declared_precision,
                        declared_by=tuple(sorted(by.items())))


def _shown(value: Any) -> str:
    """The candidate's value, bounded: it is the candidate's code that wrote it."""
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "\u2026"


def of_candidate(declared: dict[str, Any], gradients: bool | None = None,
                 precision: str | None = None) -> Capabilities:
    """:func:`resolve` on what a started candidate's prelude declared
    (:attr:`alignbot.checks.candidate.CandidateProcess.declared`)."""
    return resolve(declared.get("capabilities"), declared.get("precision"), gradients,
                   precision)
