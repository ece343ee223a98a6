"""Generators a spec draws its program from; every random choice goes through one DrawContext.

A generator is a lazy description (``random(1, 6)``, ``random_tensor(ndim=2)``) that is
resolved when a spec uses it. Within one draw the same generator object always resolves to
the same value, so ``c = random(1, 6)`` can size a module and a tensor alike. The choices come
from Hypothesis while generating, and from a recorded list when a program is drawn again, so
a run is fixed by its seed and a program can be re-drawn (and shrunk) from its choices.
"""

from __future__ import annotations

import contextvars
import math
import random as _random
from collections.abc import Sequence
from typing import Any

import numpy as np

from .choice_points import ChoicePoint, Key, Site, site_here
from .hypothesis_compat import conjecture_data
from .runtime.dtypes import DEFAULT, DTYPES, FLOAT_DTYPES, WIDE
from .runtime.values import (
    differentiable,
    dtype_name,
    encode_array,
    finite_range,
    numpy_dtype,
)

_CURRENT: contextvars.ContextVar[DrawContext | None] = contextvars.ContextVar(
    "alignbot_draw", default=None
)


class DslError(Exception):
    """A generator was used wrongly (bad bounds, resolved outside a spec)."""


class _Nothing:
    """Leave the keyword argument out, so the API default is exercised."""

    _instance: _Nothing | None = None

    def __new__(cls) -> _Nothing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOTHING"


NOTHING = _Nothing()


class DrawContext:
    """Source of every choice in one draw; logs them so the draw can be replayed exactly.

    ``steer`` (set while generating, from :mod:`alignbot.checks.explore`) names the alternative some
    choice points must pick in this draw, and ``path`` the choices to make again after the
    program seed. A steered choice is drawn from Hypothesis with ``forced=``, so it is an
    ordinary recorded choice: replaying or shrinking ``choices`` rebuilds the same program
    without any steering. ``free`` (set with the steering) draws every choice the steering does
    not name, forced too: Hypothesis makes its first few test cases of a run its simplest
    (every choice at its lower bound), and the steered draws are those first ones, so without
    it an option steered to would only ever meet the smallest sizes and values.
    """

    def __init__(self, data: Any = None, choices: Sequence[int | float] | None = None) -> None:
        # Draw primitive choices straight from the ConjectureData under ``st.data()``: a
        # strategy per draw costs more than the rest of tracing a small program.
        self._data = conjecture_data(data)
        self._replay = list(choices) if choices is not None else None
        self._position = 0
        self.choices: list[int | float] = []
        self.memo: dict[int, tuple[Generator, Any]] = {}
        self.tracer: Any = None
        self.steer: dict[Key, int] = {}
        self.path: list[int | float] = []  # choices to make again after the program seed
        self.free: _random.Random | None = None  # the rest of a steered draw, seeded
        self.points: list[ChoicePoint] = []  # the choice points of this draw, in order
        self._occurrences: dict[Site, int] = {}

    def _next_recorded(self) -> int | float | None:
        assert self._replay is not None
        if self._position >= len(self._replay):
            return None
        value = self._replay[self._position]
        self._position += 1
        return value

    def draw_int(self, low: int, high: int, forced: int | None = None) -> int:
        """An integer in [low, high] (both ends included); ``forced`` while generating."""
        if high < low:
            raise DslError(f"empty integer range [{low}, {high}]")
        if self._replay is not None:
            recorded = self._next_recorded()
            value = low if recorded is None else min(max(int(recorded), low), high)
        else:
            if forced is None:
                forced = self._on_path(low, high, int)
            if forced is None and self.free is not None:
                forced = self.free.randint(low, high)
            value = int(self._data.draw_integer(low, high, forced=forced))
        self.choices.append(value)
        return value

    def _on_path(self, low: float, high: float, kind: type) -> Any:
        """The choice the steering's path names for this position, if it still fits."""
        index = len(self.choices) - 1
        if 0 <= index < len(self.path):
            value = self.path[index]
            if type(value) is kind and low <= value <= high:
                return value
        return None

    def draw_alternative(self, site: Site, alternatives: Sequence[str], spread: int = 0) -> int:
        """Which of ``alternatives`` a choice point picks. The recorded choice is in
        ``[0, len - 1 + spread]``: the first alternative takes ``spread + 1`` of its values
        (a draw that should mostly pick it), each other one a single value."""
        occurrence = self._occurrences.get(site, 0)
        self._occurrences[site] = occurrence + 1
        count = len(alternatives)
        wanted = self.steer.get((site, occurrence))
        forced = None
        if wanted is not None and wanted < count:
            forced = wanted + spread if wanted else 0
        position = len(self.choices)
        picked = max(0, self.draw_int(0, count - 1 + spread, forced) - spread)
        if count > 1:
            self.points.append(ChoicePoint(site, occurrence, tuple(alternatives), picked,
                                           position))
        return picked

    def draw_float(self, low: float, high: float) -> float:
        if high < low:
            raise DslError(f"empty float range [{low}, {high}]")
        if self._replay is not None:
            recorded = self._next_recorded()
            value = low if recorded is None else min(max(float(recorded), low), high)
        else:
            forced = self._on_path(low, high, float)
            if forced is None and self.free is not None and math.isfinite(high - low):
                forced = min(max(self.free.uniform(low, high), low), high)
            value = float(self._data.draw_float(low, high, allow_nan=False, forced=forced))
        self.choices.append(value)
        return value

    def __enter__(self) -> DrawContext:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)


def current() -> DrawContext:
    ctx = _CURRENT.get()
    if ctx is None:
        raise DslError("a generator was resolved outside of a spec being drawn")
    return ctx


def resolve(value: Any) -> Any:
    """A generator's value in the current draw; anything else unchanged."""
    if isinstance(value, Generator):
        return value.resolve()
    return value


class Generator:
    """Base of every DSL generator: memoised per draw, combinable with ``|``."""

    def resolve(self) -> Any:
        ctx = current()
        key = id(self)
        if key not in ctx.memo:
            ctx.memo[key] = (self, self.draw(ctx))
        return ctx.memo[key][1]

    def draw(self, ctx: DrawContext) -> Any:
        raise NotImplementedError

    def __or__(self, other: Any) -> Generator:
        return OneOf((self, other))

    def __ror__(self, other: Any) -> Generator:
        return OneOf((other, self))

    # Python control flow on drawn scalars: ``if int(c) > 2``, ``range(c)``.
    def __int__(self) -> int:
        return int(self.resolve())

    def __index__(self) -> int:
        return int(self.resolve())

    def __float__(self) -> float:
        return float(self.resolve())

    def __bool__(self) -> bool:
        return bool(self.resolve())


class Random(Generator):
    def __init__(self, low: Any = 0.0, high: Any = 1.0) -> None:
        self.low, self.high = low, high

    def draw(self, ctx: DrawContext) -> Any:
        low, high = resolve(self.low), resolve(self.high)
        if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool):
            if high <= low:
                raise DslError(f"random({low}, {high}): integer range is empty (high is excluded)")
            return ctx.draw_int(low, high - 1)
        return ctx.draw_float(float(low), float(high))


class RandomBool(Generator):
    def __init__(self) -> None:
        self.site = site_here("random_bool")

    def draw(self, ctx: DrawContext) -> bool:
        return ctx.draw_alternative(self.site, ("False", "True")) == 1


class OneOf(Generator):
    def __init__(self, options: Sequence[Any]) -> None:
        if not options:
            raise DslError("oneof() needs at least one option")
        flat: list[Any] = []
        option: Any
        for option in options:
            flat.extend(option.options if isinstance(option, OneOf) else [option])
        self.options: tuple[Any, ...] = tuple(flat)
        self.site = site_here("oneof")

    def draw(self, ctx: DrawContext) -> Any:
        names = [str(i) for i in range(len(self.options))]
        return resolve(self.options[ctx.draw_alternative(self.site, names)])


class Constant(Generator):
    def __init__(self, value: Any) -> None:
        self.value = value

    def draw(self, ctx: DrawContext) -> Any:
        return resolve(self.value)


class Nothing(Generator):
    def draw(self, ctx: DrawContext) -> Any:
        return NOTHING


class RandomDtype(Generator):
    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names) or (DEFAULT, WIDE[DEFAULT])
        self.site = site_here("random_dtype")
        for name in self.names:
            _check_dtype(name)

    def draw(self, ctx: DrawContext) -> Any:
        import torch  # the reference; dtypes reach the tracer as real objects

        return getattr(torch, self.names[ctx.draw_alternative(self.site, self.names)])


def choice_index(count: int) -> int:
    """Which of ``count`` alternatives the current draw picks, as a choice point named by the
    caller's caller: for a helper (``alignbot.checks.library.choose``) whose caller is the spec."""
    return current().draw_alternative(site_here("choose"), [str(i) for i in range(count)])


SPECIAL_SETS: dict[str, tuple[str, ...]] = {
    "zeros": ("0.0", "-0.0"),
    "large": ("1e4", "-1e4", "3e4"),
    "huge": ("1e30", "-1e30"),  # beyond float16: inf there, an overflow test elsewhere
    "nonfinite": ("inf", "-inf", "nan"),
}
LAYOUTS = ("transposed", "strided", "broadcast")


class RandomTensor(Generator):
    """A shape, a dtype and a value recipe: never drawn element by element. Its own
    attributes are private so that ``x.shape``, ``x.dtype`` reach the drawn tensor. The edge
    options (``specials``, ``empty``, ``layout``) are choice points of the tensor's site whose
    first alternative (plain values, no empty axis, contiguous) takes most of the draws."""

    def __init__(self, ndim: Any, dims: dict[int, Any], shape: Any, low: Any, high: Any,
                 dtype: Any, requires_grad: bool, specials: Sequence[str], empty: bool = False,
                 layout: Sequence[str] = ()) -> None:
        self._ndim, self._dims, self._shape = ndim, dims, shape
        self._low, self._high, self._dtype = low, high, dtype
        self._requires_grad, self._specials = requires_grad, tuple(specials)
        self._empty, self._layout = empty, tuple(layout)
        self._site = site_here("random_tensor")

    def draw(self, ctx: DrawContext) -> Any:
        shape = self._draw_shape(ctx)
        dtype = resolve(self._dtype)
        dtype_name = dtype if isinstance(dtype, str) else str(dtype).rsplit(".", 1)[-1]
        low, high = finite_range(dtype_name, float(resolve(self._low)),
                                 float(resolve(self._high)))
        recipe: dict[str, Any] = {"kind": "uniform", "low": low, "high": high,
                                  "seed": ctx.draw_int(0, 2**31 - 1)}
        floating = dtype_name in FLOAT_DTYPES
        if floating and self._specials:
            pick = ctx.draw_alternative(self._edge("specials"), ("none", *self._specials), 3)
            if pick:
                recipe["specials"] = list(SPECIAL_SETS[self._specials[pick - 1]])
        if self._empty and shape and ctx.draw_alternative(self._edge("empty"), ("no", "yes"),
                                                          3):
            shape[ctx.draw_int(0, len(shape) - 1)] = 0
        layout = "contiguous"
        if self._layout:
            layout = ("contiguous", *self._layout)[
                ctx.draw_alternative(self._edge("layout"), ("contiguous", *self._layout), 1)]
        if ctx.tracer is None:
            raise DslError("random_tensor() was resolved outside of a traced spec")
        grad = bool(resolve(self._requires_grad)) and differentiable(dtype_name)
        return _laid_out(ctx, layout, shape, dtype_name, recipe, grad)

    def _edge(self, kind: str) -> Site:
        return Site(self._site.file, self._site.line, kind)

    def _draw_shape(self, ctx: DrawContext) -> list[int]:
        if self._shape is not None:
            return [int(resolve(d)) for d in resolve(self._shape)]
        ndim = int(resolve(self._ndim)) if self._ndim is not None else ctx.draw_int(1, 4)
        shape = []
        for axis in range(ndim):
            given = self._dims.get(axis)
            shape.append(int(resolve(given)) if given is not None else ctx.draw_int(1, 5))
        return shape

    # A tensor generator stands in for its tensor: ``x = random_tensor(); x.sum()``.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)


def _laid_out(ctx: DrawContext, layout: str, shape: list[int], dtype: str,
              recipe: dict[str, Any], grad: bool) -> Any:
    """The input in ``layout``: a contiguous input and the view call that makes it (recorded
    by the tracer, so the candidate gets the same strides). A transposed view of fewer than
    two axes is a strided one; a 0-d tensor is always contiguous."""
    tracer, rank = ctx.tracer, len(shape)
    if layout == "transposed" and rank >= 2:
        base = [*shape[:-2], shape[-1], shape[-2]]
        return tracer.input(base, dtype, recipe, grad).transpose(-2, -1)
    if layout in ("transposed", "strided") and rank >= 1:
        base = [*shape[:-1], 2 * shape[-1]]
        return tracer.input(base, dtype, recipe, grad)[..., ::2]
    if layout == "broadcast" and rank >= 1:
        axis = ctx.draw_int(0, rank - 1)
        base = [1 if d == axis else size for d, size in enumerate(shape)]
        return tracer.input(base, dtype, recipe, grad).expand(*shape)
    return tracer.input(shape, dtype, recipe, grad)


def _forward(op: str) -> Any:
    def method(self: RandomTensor, *args: Any) -> Any:
        return getattr(self.resolve(), op)(*args)

    method.__name__ = op
    return method


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
            "__rtruediv__", "__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__neg__",
            "__abs__", "__getitem__", "__setitem__", "__lt__", "__le__", "__gt__", "__ge__",
            "__floordiv__", "__mod__", "__and__", "__rand__", "__xor__", "__invert__",
            "__len__", "__iadd__", "__isub__", "__imul__", "__itruediv__"):
    setattr(RandomTensor, _op, _forward(_op))
_bitwise_or = _forward("__or__")


def _or(self: RandomTensor, other: Any) -> Any:
    """``random_tensor() | nothing()`` picks one of the two; with a tensor it is bitwise or."""
    if isinstance(other, Generator) and not isinstance(other, RandomTensor):
        return OneOf((self, other))
    return _bitwise_or(self, other)


RandomTensor.__or__ = _or  # type: ignore[method-assign,assignment]


class LiteralTensor(RandomTensor):
    """A tensor with given values (a ``literal`` recipe): no choice is drawn for it."""

    def __init__(self, values: Any, dtype: str | None, requires_grad: bool) -> None:
        array = np.asarray(values)
        self._dtype_name = dtype or dtype_name(array.dtype)
        # np.array, not np.ascontiguousarray: that one makes a 0-d array 1-d
        self._array = np.array(array, dtype=numpy_dtype(self._dtype_name), order="C")
        self._grad = requires_grad

    def draw(self, ctx: DrawContext) -> Any:
        if ctx.tracer is None:
            raise DslError("literal_tensor() was resolved outside of a traced spec")
        recipe = {"kind": "literal", "array": encode_array(self._array)}
        grad = self._grad and differentiable(self._dtype_name)
        return ctx.tracer.input(list(self._array.shape), self._dtype_name, recipe, grad)


def _check_dtype(name: Any) -> None:
    if isinstance(name, str) and name not in DTYPES:
        raise DslError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")


def random(low: Any = 0.0, high: Any = 1.0) -> Generator:
    """An int in [low, high) when both bounds are ints, else a float in [low, high]."""
    return Random(low, high)


def random_bool() -> Generator:
    return RandomBool()


def oneof(*options: Any) -> Generator:
    return OneOf(options)


def constant(value: Any) -> Generator:
    return Constant(value)


def nothing() -> Generator:
    return Nothing()


def random_dtype(*names: str) -> Generator:
    return RandomDtype(names)


def random_tensor(ndim: Any = None, dim0: Any = None, dim1: Any = None, dim2: Any = None,
                  dim3: Any = None, dim4: Any = None, *, shape: Any = None, low: Any = 0.0,
                  high: Any = 1.0, dtype: Any = DEFAULT, requires_grad: Any = True,
                  specials: Sequence[str] = (), empty: bool = False,
                  layout: Sequence[str] = ()) -> Any:
    """A tensor input. ``specials`` may name ``zeros``, ``large``, ``huge`` and ``nonfinite``:
    a few draws then sprinkle those values (negative zero, big magnitudes, inf/nan) over the
    tensor. ``empty``: a few draws make one axis size 0. ``layout`` may name ``transposed``,
    ``strided`` and ``broadcast``: a few draws hand the spec a view of that kind instead of a
    contiguous tensor (not for specs that write into their inputs)."""
    for name in specials:
        if name not in SPECIAL_SETS:
            raise DslError(f"unknown special value set {name!r}; use one of {sorted(SPECIAL_SETS)}")
    for name in layout:
        if name not in LAYOUTS:
            raise DslError(f"unknown layout {name!r}; use one of {sorted(LAYOUTS)}")
    dims = {i: d for i, d in enumerate((dim0, dim1, dim2, dim3, dim4)) if d is not None}
    if isinstance(ndim, int) and dims and max(dims) >= ndim:
        raise DslError(f"random_tensor(ndim={ndim}) was given dim{max(dims)}")
    if math.isnan(float(low)) if isinstance(low, (int, float)) else False:
        raise DslError("random_tensor(low=nan)")
    _check_dtype(dtype)
    return RandomTensor(ndim, dims, shape, low, high, dtype, requires_grad, specials, empty,
                        layout)


def literal_tensor(values: Any, dtype: str | None = None, requires_grad: bool = False) -> Any:
    """A tensor input with exactly these values (an array or nested lists); ``dtype`` by name,
    the array's own by default. Nothing is drawn: for values a spec already has, such as the
    sample inputs of PyTorch's OpInfo database."""
    _check_dtype(dtype)
    return LiteralTensor(values, dtype, requires_grad)
