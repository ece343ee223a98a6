"""Variants of an OpInfo sample, so that one sample reaches what its values alone miss: its
first tensor non-contiguous, negated (an op's negative domain), rounded to integer values or
with exact zeros, arguments in a relation (one equal to another, or just above or below it;
an integer argument such as an index one off), and keywords in their other spelling.

A draw picks the variant after the sample, through a ``oneof`` (the first alternative, the
sample as it is, is the one a finding shrinks to); a variant that does not apply to the
sample (no floating tensor to round, no two numbers to relate) leaves it as it is. Every
variant is a pure function of the planned sample and the draw, so a run replays from its seed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..dsl import literal_tensor, random
from .plans import Plan, TensorValue

AS_SAMPLED = "as sampled"
VARIANTS = (AS_SAMPLED, "non-contiguous", "negated", "integer-valued", "zeros", "related",
            "respelled")
# Keyword spellings an op accepts for one argument: PyTorch's NumPy-style aliases, and
# searchsorted's legacy ``right=`` for ``side=``.
ALIASES = {"dim": "axis", "keepdim": "keepdims", "axis": "dim", "keepdims": "keepdim"}
FLOATING = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
SIGNED = (*FLOATING, "int8", "int16", "int32", "int64")


def first_tensor(planned: Plan) -> TensorValue | None:
    """The sample's input when it is a tensor, else its first tensor argument."""
    for value in (planned.input, *planned.args, *planned.kwargs.values()):
        if isinstance(value, TensorValue):
            return value
    return None


def _swap(planned: Plan, old: TensorValue, new: TensorValue) -> Plan:
    """``planned`` with every occurrence of ``old`` replaced by ``new``."""
    def swap(value: Any) -> Any:
        if value is old:
            return new
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, tuple) and type(value) is tuple:
            return tuple(swap(v) for v in value)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    return Plan(swap(planned.input), tuple(swap(a) for a in planned.args),
                {k: swap(v) for k, v in planned.kwargs.items()})


def _with_values(planned: Plan, dtypes: tuple[str, ...], change: Any) -> Plan:
    tensor = first_tensor(planned)
    if tensor is None or tensor.dtype not in dtypes or tensor.array.size == 0:
        return planned
    array = change(np.array(tensor.array, copy=True))
    return _swap(planned, tensor, replace(tensor, array=array.astype(tensor.array.dtype)))


def negated(planned: Plan) -> Plan:
    return _with_values(planned, SIGNED, lambda a: -a)


def integer_valued(planned: Plan) -> Plan:
    """Every floating tensor rounded (values that tie: searchsorted's boundaries and values)."""
    for tensor in [v for v in (planned.input, *planned.args, *planned.kwargs.values())
                   if isinstance(v, TensorValue) and v.dtype in FLOATING and v.array.size]:
        rounded = np.round(tensor.array).astype(tensor.array.dtype)
        planned = _swap(planned, tensor, replace(tensor, array=rounded))
    return planned


def _zeros(array: Any) -> Any:
    array.reshape(-1)[::2] = 0
    return array


def zeros(planned: Plan) -> Plan:
    return _with_values(planned, SIGNED, _zeros)


def _numbers(planned: Plan) -> list[tuple[str, int | str]]:
    """Where the sample's plain numbers are: ("arg", index) or ("kwarg", name)."""
    places: list[tuple[str, int | str]] = [
        ("arg", i) for i, a in enumerate(planned.args)
        if isinstance(a, (int, float)) and not isinstance(a, bool)]
    places += [("kwarg", k) for k, v in planned.kwargs.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return places


def _get(planned: Plan, place: tuple[str, int | str]) -> Any:
    kind, key = place
    return planned.args[int(key)] if kind == "arg" else planned.kwargs[str(key)]


def _set(planned: Plan, place: tuple[str, int | str], value: Any) -> Plan:
    kind, key = place
    if kind == "arg":
        args = list(planned.args)
        args[int(key)] = value
        return Plan(planned.input, tuple(args), planned.kwargs)
    return Plan(planned.input, planned.args, {**planned.kwargs, str(key): value})


def _near(value: Any, way: int) -> Any:
    """``value`` itself (0), just above (1) or just below (2): one step for an integer, the
    next representable float32 value for a float."""
    if way == 0:
        return value
    if isinstance(value, int):
        return value + (1 if way == 1 else -1)
    target = np.inf if way == 1 else -np.inf
    return float(np.nextafter(np.float32(value), np.float32(target)))


def related(planned: Plan, way: int) -> Plan:
    """Two plain numbers: the second set equal to (``way`` 0), just above (1) or just below (2)
    the first (min and max, a value and eps); one: an integer one off, a float a step off
    (above for ``way`` 0 and 2, below for 1: an index next to the one sampled); else two
    tensors, tied by :func:`tied`."""
    places = _numbers(planned)
    if len(places) >= 2:
        return _set(planned, places[1], _near(_get(planned, places[0]), way))
    if places:
        return _set(planned, places[0], _near(_get(planned, places[0]), 1 + way % 2))
    return tied(planned, way)


def tied(planned: Plan, way: int = 0) -> Plan:
    """Two tensors of one dtype, the last two of one shape where there are such (clamp's min
    and max), else the last two non-empty ones (searchsorted's boundaries and values): the
    second's values taken from the first's (in order, repeated to its size), equal to them
    (``way`` 0) or a float32/float64 step above (1) or below (2) them."""
    tensors = [v for v in (planned.input, *planned.args, *planned.kwargs.values())
               if isinstance(v, TensorValue)]
    alike = [(a, b) for j, b in enumerate(tensors) for a in tensors[:j]
             if a is not b and a.dtype == b.dtype and a.array.size and b.array.size]
    shaped = [(a, b) for a, b in alike if a.array.shape == b.array.shape]
    if not alike:
        return planned
    like, other = (shaped or alike)[-1]
    array = np.resize(np.array(like.array).reshape(-1), other.array.shape)
    array = array.astype(other.array.dtype)
    if way and like.dtype in ("float32", "float64"):
        array = np.nextafter(array, np.inf if way == 1 else -np.inf).astype(array.dtype)
    return _swap(planned, other, replace(other, array=array))


def respelled(planned: Plan) -> Plan:
    """Each keyword in its other spelling: ``dim=`` as ``axis=``, ``keepdim=`` as
    ``keepdims=``, ``right=`` as ``side=`` and back (a spelling the reference rejects for
    this op is not drawn: see :func:`alignbot.checks.opinfo.specs.sample_spec`). Where a spelling
    changes, two tensors are tied too (:func:`tied`): ``right=`` and ``side=`` differ from
    the default only where a value equals a boundary, which random floats never do."""
    if list(_respelt(planned.kwargs)) == list(planned.kwargs):
        return planned
    planned = tied(planned)
    return Plan(planned.input, planned.args, _respelt(planned.kwargs))


def _respelt(given: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for name, value in given.items():
        if name == "right" and isinstance(value, bool):
            kwargs["side"] = "right" if value else "left"
        elif name == "side" and value in ("left", "right"):
            kwargs["right"] = value == "right"
        else:
            kwargs[ALIASES.get(name, name)] = value
    return kwargs


def apply(planned: Plan, variant: str) -> Plan:
    """The planned sample in a variant of its values (``non-contiguous`` is made when the
    sample is built: see :func:`maker`)."""
    if variant == "related":  # equal to (0), just above (1) or just below (2) another
        return related(planned, int(random(0, 3)))
    change = {"negated": negated, "integer-valued": integer_valued, "zeros": zeros,
              "respelled": respelled}.get(variant)
    return planned if change is None else change(planned)


def laid_out(value: TensorValue) -> Any:
    """``value`` as a non-contiguous view of a literal input: transposed when its last two
    sizes both exceed 1, else every other element of a literal twice as long; the view is a
    traced call, so the candidate gets the same strides. A 0-d or empty tensor stays as is."""
    array = value.array
    if array.ndim >= 2 and array.shape[-1] > 1 and array.shape[-2] > 1:
        base = literal_tensor(np.ascontiguousarray(np.swapaxes(array, -1, -2)), value.dtype,
                              value.requires_grad).resolve()
        return base.transpose(-2, -1)
    if array.ndim >= 1 and array.size:
        base = literal_tensor(np.repeat(array, 2, axis=-1), value.dtype,
                              value.requires_grad).resolve()
        return base[..., ::2]
    return literal_tensor(array, value.dtype, value.requires_grad).resolve()
