"""An OpInfo sample as the engine carries it: its tensors copied out as values, so that a
draw can write them into a Program as literals and a variant can change them (the shared
types of :mod:`alignbot.checks.opinfo.specs` and :mod:`alignbot.checks.opinfo.variants`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TensorValue:
    """A sample's tensor, copied out: what ``literal_tensor`` makes again on both sides."""

    array: Any
    dtype: str
    requires_grad: bool


@dataclass(frozen=True)
class Plan:
    """A sample with its tensors replaced by :class:`TensorValue`."""

    input: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
