"""Every dtype the Program format carries, one row each: what the engine knows about it.

A dtype is named as torch names it (``torch.<name>``), in Programs, observations and reports
alike. Everything else the engine says about dtypes is read from :data:`TABLE`: which kind
of number it holds, how its values travel through NumPy, its tolerances, how a draw and a
repro make it, which wider dtypes a candidate may compute in it, whether a candidate may
declare it its precision (which the report's types and the App's model then accept). Adding a
dtype is adding a row. The table imports nothing (it is in ``checks/runtime/`` so that the
candidate's worker reads it too) and so never torch: tests/test_dtypes.py holds each row to
torch's own facts.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Literal

Family = Literal["float", "complex", "int", "bool"]
FAMILIES: tuple[Family, ...] = ("float", "complex", "int", "bool")  # the order of DTYPES


@dataclass(frozen=True)
class Dtype:
    """One dtype. Tolerances are torch.testing.assert_close's defaults, except where that
    compares bit for bit (float8): there a result may be one step (``eps``) off.

    ``numpy`` is the NumPy dtype its values travel in: its own where NumPy has it (the same
    name), else one that holds each of its values exactly, which the framework casts to and
    from. ``narrows`` are the wider dtypes a candidate may silently compute in this one
    (``precision: float64 at float32``); with ``presumed`` a result that agrees within this
    dtype's tolerance counts as computed in it even when its values are not ones it holds
    (the loss happened midway), else they must be. ``declarable``: a candidate that computes
    in it may say so (``alignbot_precision``, ``--precision``), and every comparison then
    allows its tolerances. ``draw_rank`` orders an OpInfo or
    ModuleInfo entry's dtypes, lowest first (the one a draw shrinks to), equal ranks in table
    order."""

    name: str
    family: Family
    numpy: str
    _: KW_ONLY
    draw_rank: int
    rtol: float = 0.0
    atol: float = 0.0
    eps: float | None = None  # the rounding step at 1 (of each part, for complex)
    significand: int | None = None  # bits after the point (holds() masks its NumPy dtype's)
    finite_max: float | None = None  # of a low-precision dtype: a drawn range is clipped to it
    part: str | None = None  # complex: the dtype of the real and of the imaginary part
    grad: bool = False  # its inputs take gradients (float8: its kernels have no backward)
    arange: bool = True  # a repro writes torch.arange(n, dtype=…), else torch.arange(n).to(…)
    narrows: tuple[str, ...] = ()
    presumed: bool = False
    declarable: bool = False  # a candidate may declare it its precision (alignbot_precision)

    @property
    def cast(self) -> bool:
        """NumPy has no such dtype: values travel in :attr:`numpy` and are cast."""
        return self.numpy != self.name


def _float8(name: str, eps: float, finite_max: float, significand: int) -> Dtype:
    """float8: a CPU tensor holds it, casts to and from it, and little else."""
    return Dtype(name, "float", "float32", draw_rank=16, rtol=eps, atol=1e-5, eps=eps,
                 significand=significand, finite_max=finite_max, arange=False)


TABLE: tuple[Dtype, ...] = (  # in the order listings show them
    Dtype("bool", "bool", "bool", draw_rank=4, arange=False),
    Dtype("uint8", "int", "uint8", draw_rank=9),
    Dtype("int8", "int", "int8", draw_rank=10),
    Dtype("int16", "int", "int16", draw_rank=11),
    Dtype("int32", "int", "int32", draw_rank=3),
    Dtype("int64", "int", "int64", draw_rank=2),
    Dtype("uint16", "int", "uint16", draw_rank=13, arange=False),
    Dtype("uint32", "int", "uint32", draw_rank=14, arange=False),
    Dtype("uint64", "int", "uint64", draw_rank=15, arange=False),
    Dtype("float16", "float", "float16", draw_rank=5, rtol=1e-3, atol=1e-5, eps=9.77e-4,
          significand=10, finite_max=65504.0, grad=True, narrows=("float64", "float32"),
          declarable=True),
    Dtype("bfloat16", "float", "float32", draw_rank=6, rtol=1.6e-2, atol=1e-5, eps=7.81e-3,
          significand=7, finite_max=3.3895e38, grad=True, narrows=("float64", "float32"),
          declarable=True),
    Dtype("float32", "float", "float32", draw_rank=0, rtol=1.3e-6, atol=1e-5, eps=1.19e-7,
          significand=23, grad=True, narrows=("float64",), presumed=True, declarable=True),
    Dtype("float64", "float", "float64", draw_rank=1, rtol=1e-7, atol=1e-7, eps=2.22e-16,
          significand=52, grad=True, declarable=True),
    Dtype("complex32", "complex", "complex64", draw_rank=12, rtol=1e-3, atol=1e-5,
          eps=9.77e-4, finite_max=65504.0, part="float16", grad=True, arange=False,
          narrows=("complex128", "complex64")),
    Dtype("complex64", "complex", "complex64", draw_rank=7, rtol=1.3e-6, atol=1e-5,
          eps=1.19e-7, part="float32", grad=True, arange=False, narrows=("complex128",),
          presumed=True),
    Dtype("complex128", "complex", "complex128", draw_rank=8, rtol=1e-7, atol=1e-7,
          eps=2.22e-16, part="float64", grad=True, arange=False),
    _float8("float8_e4m3fn", eps=0.125, finite_max=448.0, significand=3),
    _float8("float8_e5m2", eps=0.25, finite_max=57344.0, significand=2),
    _float8("float8_e4m3fnuz", eps=0.125, finite_max=240.0, significand=3),
    _float8("float8_e5m2fnuz", eps=0.125, finite_max=57344.0, significand=2),
)
BY_NAME: dict[str, Dtype] = {row.name: row for row in TABLE}


def _family(family: Family) -> tuple[str, ...]:
    return tuple(row.name for row in TABLE if row.family == family)


FLOAT_DTYPES = _family("float")
COMPLEX_DTYPES = _family("complex")
INT_DTYPES = _family("int")
DTYPES = tuple(name for family in FAMILIES for name in _family(family))  # every one, by family
PART_DTYPES = {row.name: row.part for row in TABLE if row.part is not None}
DEFAULT = "float32"  # torch.get_default_dtype(): what a tensor of Python floats is made in
DECLARABLE = tuple(row.name for row in TABLE if row.declarable)  # the precisions, in order


def _widest(family: Family) -> str:
    rows = [row for row in TABLE if row.family == family]
    return min(rows, key=lambda row: row.eps if row.eps is not None else float("inf")).name


# each floating and complex dtype -> the most precise of its family (float64, complex128):
# what a program's float64 variant computes it in, and a backward's upstream gradient is drawn in
WIDE = {row.name: _widest(row.family) for row in TABLE if row.family in ("float", "complex")}
