"""Pointwise math: binary ops with broadcasting and promotion, unary functions, comparisons,
rounding, clamping and dtype casts."""

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from alignbot.checks import (
    autotest,
    nothing,
    oneof,
    random,
    random_bool,
    random_dtype,
    random_tensor,
)
from alignbot.checks.library import choose


def _broadcast_pair(low: float = -2.0, high: float = 2.0, dtype: Any = "float32",
                    other_dtype: Any = "float32", other_low: float | None = None,
                    other_high: float | None = None, swap: bool = True) -> tuple[Any, Any]:
    """Two tensors whose shapes broadcast: one drops leading axes of the other and has some
    sizes 1. ``swap`` lets either be the smaller; without it the second one is, and keeps the
    ``other_*`` range (a divisor, an exponent)."""
    ndim = int(random(1, 5))
    dims = [random(1, 5) for _ in range(ndim)]
    keep = int(random(0, ndim + 1))
    other = [oneof(d, 1) for d in dims[ndim - keep:]]
    a = random_tensor(shape=dims, low=low, high=high, dtype=dtype)
    b = random_tensor(shape=other, low=low if other_low is None else other_low,
                      high=high if other_high is None else other_high, dtype=other_dtype)
    return (b, a) if swap and random_bool() else (a, b)


@autotest(n=20, ops=["torch.add", "torch.sub", "torch.mul", "torch.maximum", "torch.minimum",
                     "torch.atan2", "torch.hypot", "torch.logaddexp", "torch.Tensor.add"])
def binary_broadcast(torch: Any) -> Any:
    floats = random_dtype("float32", "float64")
    a, b = _broadcast_pair(-3.0, 3.0, dtype=floats, other_dtype=random_dtype("float32", "float64"))
    alpha = random(-2.0, 2.0) | nothing()
    return choose(
        lambda: torch.add(a, b, alpha=alpha),
        lambda: a.add(b, alpha=alpha),
        lambda: torch.sub(a, b, alpha=alpha),
        lambda: torch.mul(a, b),
        lambda: torch.maximum(a, b),
        lambda: torch.minimum(a, b),
        lambda: torch.atan2(a, b),
        lambda: torch.hypot(a, b),
        lambda: torch.logaddexp(a, b),
    )()


@autotest(n=20, ops=["torch.div", "torch.true_divide", "torch.fmod", "torch.remainder",
                     "torch.Tensor.div"])
def division(torch: Any) -> Any:
    a, b = _broadcast_pair(-5.0, 5.0, other_low=0.5, other_high=2.0, swap=False)
    b = b * oneof(1.0, -1.0)
    mode = oneof("trunc", "floor", None) | nothing()
    return choose(
        lambda: torch.div(a, b, rounding_mode=mode),
        lambda: a.div(b, rounding_mode=mode),
        lambda: torch.true_divide(a, b),
        lambda: torch.fmod(a, b),
        lambda: torch.remainder(a, b),
        lambda: torch.fmod(a, random(-3.0, -0.5) | random(0.5, 3.0)),
        lambda: torch.remainder(a, oneof(2, -3, 1.5)),
    )()


@autotest(n=20, ops=["torch.div", "torch.true_divide", "torch.Tensor.div", "torch.fmod",
                     "torch.remainder"])
def scalar_division(torch: Any) -> Any:
    """Python-number divisors, of floating and of integer tensors (true division of integers
    gives a float; a rounding mode keeps the integer dtype)."""
    if random_bool():
        x = random_tensor(low=-20, high=20, dtype=oneof("int64", "int32"))
        divisor: Any = oneof(2, -3, 4)
    else:
        x = random_tensor(low=-5, high=5, dtype=random_dtype("float32", "float64"))
        divisor = random(0.5, 3.0) | random(-3.0, -0.5) | oneof(2, -3)
    mode = oneof("trunc", "floor") | nothing()
    return choose(
        lambda: torch.div(x, divisor, rounding_mode=mode),
        lambda: torch.true_divide(x, divisor),
        lambda: x.div(divisor, rounding_mode=mode),
        lambda: torch.fmod(x, divisor),
        lambda: torch.remainder(x, divisor),
    )()


@autotest(n=20, ops=["torch.pow", "torch.Tensor.pow", "torch.float_power", "torch.square"])
def power(torch: Any) -> Any:
    base, exponent = _broadcast_pair(0.5, 2.0, dtype=random_dtype("float32", "float64"),
                                     other_low=-2.0, other_high=2.0, swap=False)
    signed = random_tensor(low=-2, high=2, specials=["zeros"])
    return choose(
        lambda: torch.pow(base, exponent),
        lambda: base.pow(random(-2.0, 3.0)),
        lambda: torch.pow(signed, oneof(0, 1, 2, 3, -1)),
        # a negative base to a fractional power is nan, and so is its gradient
        lambda: torch.pow(signed, oneof(0.5, 1.5, -0.5)),
        lambda: torch.pow(random(0.5, 3.0), exponent),
        lambda: torch.float_power(base, exponent),
        lambda: torch.square(signed),
        # An integer base to a floating exponent promotes to the default float dtype.
        lambda: torch.pow(random_tensor(low=0, high=10, dtype=oneof("int64", "int32")),
                          oneof(0.5, 2.0, 1.5)),
    )()


@autotest(n=16, ops=["torch.add", "torch.maximum", "torch.minimum", "torch.mul", "torch.sub",
                     "torch.where"])
def int_float_promotion(torch: Any) -> Any:
    """An integer and a floating tensor in one call: the result has the floating dtype."""
    ints, floats = _broadcast_pair(-3.0, 3.0, dtype=oneof("int64", "int32"),
                                   other_dtype=random_dtype("float32", "float64"), swap=False)
    a, b = (ints, floats) if random_bool() else (floats, ints)
    return choose(
        lambda: torch.add(a, b),
        lambda: torch.maximum(a, b),
        lambda: torch.minimum(a, b),
        lambda: torch.mul(a, b),
        lambda: torch.sub(a, b, alpha=random(0.5, 2.0) | nothing()),
        lambda: torch.where(ints > 0, ints, floats),
    )()


OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "**": operator.pow,
}


@autotest(n=20, ops=["torch.Tensor.__add__", "torch.Tensor.__radd__", "torch.Tensor.__sub__",
                     "torch.Tensor.__rsub__", "torch.Tensor.__mul__", "torch.Tensor.__rmul__",
                     "torch.Tensor.__truediv__", "torch.Tensor.__rtruediv__",
                     "torch.Tensor.__pow__", "torch.Tensor.__rpow__", "torch.Tensor.__neg__",
                     "torch.Tensor.__abs__", "torch.Tensor.__pos__"])
def operators(torch: Any) -> Any:
    """Python operators between tensors, and with Python scalars on either side."""
    a, b = _broadcast_pair(0.5, 2.0, dtype=random_dtype("float32", "float64"),
                           other_dtype=random_dtype("float32", "float64"))
    symbol = choose(*OPERATORS)
    apply = OPERATORS[symbol]
    kind = int(random(0, 3))
    scalar: float | int
    if kind == 0:
        scalar = float(random(0.5, 3.0))
    elif kind == 1:
        scalar = int(random(1, 4))
    else:
        # A negative base to a fractional power is nan: keep the base positive.
        scalar = float(random(-3.0, -0.5)) if symbol != "**" else 2
    out = choose(lambda: apply(a, b), lambda: apply(a, scalar), lambda: apply(scalar, a))()
    return choose(lambda: out, lambda: -out, lambda: abs(out - 1), lambda: +out)()


LAYOUTS = ("transposed", "strided", "broadcast")


@dataclass(frozen=True)
class Unary:
    """A unary op that torch and Tensor both carry, and an input range inside its domain."""

    name: str
    low: float = -3.0
    high: float = 3.0
    specials: tuple[str, ...] = ()


UNARY = (
    Unary("exp", specials=("large", "huge", "nonfinite")),
    Unary("exp2"),
    Unary("expm1"),
    Unary("log", 0.1, 5.0, ("zeros",)),
    Unary("log1p", -0.9, 5.0),
    Unary("log2", 0.1, 5.0),
    Unary("sqrt", 0.1, 5.0, ("zeros",)),
    Unary("rsqrt", 0.1, 5.0),
    Unary("sin", -4.0, 4.0),
    Unary("cos", -4.0, 4.0),
    Unary("tan", -1.2, 1.2),
    Unary("asin", -0.9, 0.9),
    Unary("acos", -0.9, 0.9),
    Unary("atan", specials=("large", "huge", "nonfinite")),
    Unary("sinh"),
    Unary("cosh"),
    Unary("tanh", -4.0, 4.0, ("large", "huge", "nonfinite")),
    Unary("asinh"),
    Unary("acosh", 1.1, 4.0),
    Unary("atanh", -0.9, 0.9),
    Unary("sigmoid", -6.0, 6.0, ("large", "huge", "nonfinite")),
    Unary("erf"),
    Unary("erfc"),
    Unary("erfinv", -0.9, 0.9),
    Unary("lgamma", 0.1, 5.0),
    Unary("digamma", 0.1, 5.0),
    Unary("reciprocal", 0.5, 3.0),
    Unary("abs", specials=("zeros", "nonfinite")),
    Unary("neg", specials=("zeros",)),
    Unary("square"),
    Unary("sign", specials=("zeros", "nonfinite")),
    Unary("floor", -10.0, 10.0, ("zeros", "nonfinite")),
    Unary("ceil", -10.0, 10.0, ("zeros",)),
    Unary("round", -10.0, 10.0, ("zeros",)),
    Unary("trunc", -10.0, 10.0, ("zeros",)),
    Unary("frac", -10.0, 10.0, ("zeros",)),
)


def _register_unary(op: Unary) -> None:
    """One spec per unary op, so each is drawn on every run and --ops selects exactly it."""

    def spec(torch: Any) -> Any:
        # ndim 0 included: 0-d tensors take their own paths in many kernels.
        x = random_tensor(ndim=random(0, 4), low=op.low, high=op.high,
                          dtype=random_dtype("float32", "float64"), specials=op.specials,
                          empty=True, layout=LAYOUTS)
        if random_bool():
            return getattr(torch, op.name)(x)
        return getattr(x, op.name)()

    spec.__name__ = spec.__qualname__ = op.name
    autotest(n=8, ops=[f"torch.{op.name}", f"torch.Tensor.{op.name}"])(spec)


for _op in UNARY:
    _register_unary(_op)


@autotest(n=10, ops=["torch.round", "torch.Tensor.round"])
def round_decimals(torch: Any) -> Any:
    x = random_tensor(low=-50, high=50, dtype=random_dtype("float32", "float64"))
    decimals = oneof(0, 1, 2, 3, -1) | nothing()
    if random_bool():
        return torch.round(x, decimals=decimals)
    return x.round(decimals=decimals)


@autotest(n=20, ops=["torch.clamp", "torch.clip", "torch.Tensor.clamp"])
def clamp(torch: Any) -> Any:
    dtype, last = random_dtype("float32", "float64"), random(1, 5)
    x = random_tensor(ndim=random(1, 5), dim0=last, low=-3, high=3, dtype=dtype,
                      empty=True).transpose(0, -1)
    low, high = random(-2.0, 0.0), random(0.0, 2.0)
    # min > max is defined: every element becomes max (the swapped bounds below).
    if random_bool():
        lo_t = random_tensor(shape=[last], low=-2, high=0, dtype=dtype)
        hi_t = random_tensor(shape=[last], low=0, high=2, dtype=dtype)
        return choose(
            lambda: torch.clamp(x, lo_t, hi_t),
            lambda: torch.clamp(x, min=lo_t),
            lambda: x.clamp(max=hi_t),
            lambda: torch.clamp(x, min=hi_t, max=lo_t),
        )()
    return choose(
        lambda: torch.clamp(x, low, high),
        lambda: torch.clamp(x, min=low),
        lambda: x.clamp(max=high),
        lambda: torch.clip(x, min=low, max=high),
        lambda: torch.clamp(x, min=high, max=low),
    )()


@autotest(n=20, ops=["torch.where", "torch.lerp", "torch.addcmul", "torch.addcdiv"])
def ternary(torch: Any) -> Any:
    a, b = _broadcast_pair(-2.0, 2.0)
    shape = [random(1, 5) for _ in range(int(random(1, 5)))]
    x = random_tensor(shape=shape, low=-2, high=2)
    t1 = random_tensor(shape=shape, low=-2, high=2)
    t2 = random_tensor(shape=shape, low=0.5, high=2)
    cond = random_tensor(shape=shape, dtype="bool")
    value = random(-2.0, 2.0) | nothing()
    return choose(
        lambda: torch.where(cond, x, t1),
        lambda: torch.where(x > 0, x, random(-1.0, 1.0)),
        lambda: torch.lerp(a, b, random(0.0, 1.0)),
        lambda: torch.lerp(x, t1, t2 / 2),
        lambda: torch.addcmul(x, t1, t2, value=value),
        lambda: torch.addcdiv(x, t1, t2, value=value),
        lambda: x.addcdiv(t1, oneof(t2, -t2), value=value),
    )()


COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge,
}


@autotest(n=20, backward=False, ops=[
    *(f"torch.{name}" for name in COMPARISONS), *(f"torch.Tensor.{name}" for name in COMPARISONS),
    *(f"torch.Tensor.__{name}__" for name in COMPARISONS)])
def comparisons(torch: Any) -> Any:
    dtype = random_dtype("float32", "float64")
    a, b = _broadcast_pair(-2.0, 2.0, dtype=dtype, other_dtype=dtype)
    # Quantized values make ties (the boundary of each comparison) common.
    qa = torch.round(a * 2)
    qb = choose(lambda: torch.round(b * 2), lambda: float(int(random(-2, 3))))()
    name = choose(*COMPARISONS)
    return choose(
        lambda: getattr(torch, name)(qa, qb),
        lambda: getattr(qa, name)(qb),
        lambda: COMPARISONS[name](qa, qb),
    )()


@autotest(n=12, backward=False, ops=["torch.isclose", "torch.equal", "torch.allclose"])
def closeness(torch: Any) -> Any:
    dtype = random_dtype("float32", "float64")
    shape = [int(random(1, 5)) for _ in range(int(random(1, 4)))]
    a = random_tensor(shape=shape, low=-2, high=2, dtype=dtype, specials=["nonfinite"])
    noise = random_tensor(shape=shape, low=-1e-3, high=1e-3, dtype=dtype)
    b = choose(lambda: a + noise, lambda: a * 1, lambda: a + noise * 100)()
    rtol, atol = random(0.0, 1e-3) | nothing(), random(0.0, 1e-3) | nothing()
    equal_nan = random_bool() | nothing()
    return choose(
        lambda: torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan),
        lambda: a.isclose(b, equal_nan=equal_nan),
        lambda: (torch.isclose(a, b), torch.equal(a, b), torch.allclose(a, b, rtol=rtol,
                                                                         atol=atol))[0],
    )()


@autotest(n=20, ops=["torch.Tensor.to", "torch.Tensor.double", "torch.Tensor.float",
                     "torch.Tensor.long", "torch.Tensor.type_as", "torch.Tensor.int"])
def casts(torch: Any) -> Any:
    x = random_tensor(low=-50, high=50, dtype=random_dtype("float32", "float64"))
    floored = torch.floor(x)
    return choose(
        lambda: x.to(torch.float64) * 3,
        lambda: x.to(dtype=torch.float32) + 1,
        lambda: x.double().sin(),
        lambda: x.float(),
        lambda: floored.to(torch.int64),
        lambda: floored.long() + 1,
        lambda: floored.int() * 2,
        lambda: x.to(torch.bool),
        lambda: floored.to(torch.int64).to(torch.float32) / 3,
        lambda: x.type_as(random_tensor(ndim=1, dtype=random_dtype("float32", "float64"))),
        lambda: torch.floor(x).to(torch.int32) + floored.to(torch.int64),
    )()


@autotest(n=20, backward=False, ops=["torch.Tensor.__floordiv__", "torch.Tensor.__mod__",
                                     "torch.floor_divide", "torch.bitwise_and",
                                     "torch.Tensor.__and__", "torch.logical_xor",
                                     "torch.Tensor.__truediv__"])
def integer_ops(torch: Any) -> Any:
    a = random_tensor(ndim=random(1, 4), low=-20, high=20, dtype=oneof("int64", "int32"))
    b = random_tensor(ndim=1, dim0=1, low=1, high=6, dtype="int64")
    return choose(
        lambda: a // b,
        lambda: a % b,
        lambda: torch.floor_divide(a, oneof(3, -2)),
        lambda: a * b - 7,
        lambda: torch.bitwise_and(a, b),
        lambda: torch.bitwise_and(a, oneof(3, 6, -2)),
        lambda: (a > 0) & (b > 2),
        lambda: torch.logical_xor(a > 0, a < 5),
        lambda: a / b,
    )()
