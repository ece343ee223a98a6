"""Pointwise math: binary ops with broadcasting and promotion, unary functions, comparisons,
rounding, clamping and dtype casts."""

from typing import Any

from checks import autotest, nothing, oneof, random, random_bool, random_dtype, random_tensor
from checks.library import choose


def _broadcast_pair(low: float = -2.0, high: float = 2.0, dtype: Any = "float32",
                    other_dtype: Any = "float32", other_low: float | None = None,
                    other_high: float | None = None) -> tuple[Any, Any]:
    """Two tensors whose shapes broadcast: the second drops leading axes and has some size 1."""
    ndim = int(random(1, 5))
    dims = [random(1, 5) for _ in range(ndim)]
    keep = int(random(0, ndim + 1))
    other = [oneof(d, 1) for d in dims[ndim - keep:]]
    a = random_tensor(shape=dims, low=low, high=high, dtype=dtype)
    b = random_tensor(shape=other, low=low if other_low is None else other_low,
                      high=high if other_high is None else other_high, dtype=other_dtype)
    return (b, a) if random_bool() else (a, b)


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


@autotest(n=16, ops=["torch.div", "torch.true_divide", "torch.fmod", "torch.remainder",
                     "torch.Tensor.div"])
def division(torch: Any) -> Any:
    a, b = _broadcast_pair(-5.0, 5.0, other_low=0.5, other_high=2.0)
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


@autotest(n=16, ops=["torch.pow", "torch.Tensor.pow", "torch.float_power", "torch.square"])
def power(torch: Any) -> Any:
    base, exponent = _broadcast_pair(0.5, 2.0, dtype=random_dtype("float32", "float64"),
                                     other_low=-2.0, other_high=2.0)
    signed = random_tensor(low=-2, high=2, specials=["zeros"])
    return choose(
        lambda: torch.pow(base, exponent),
        lambda: base.pow(random(-2.0, 3.0)),
        lambda: torch.pow(signed, oneof(0, 1, 2, 3, -1)),
        lambda: torch.pow(random(0.5, 3.0), exponent),
        lambda: torch.float_power(base, exponent),
        lambda: torch.square(signed),
    )()


@autotest(n=20, ops=["torch.Tensor.__add__", "torch.Tensor.__radd__", "torch.Tensor.__sub__",
                     "torch.Tensor.__rsub__", "torch.Tensor.__mul__", "torch.Tensor.__truediv__",
                     "torch.Tensor.__rtruediv__", "torch.Tensor.__pow__", "torch.Tensor.__rpow__",
                     "torch.Tensor.__neg__", "torch.Tensor.__abs__"])
def operators(torch: Any) -> Any:
    a, b = _broadcast_pair(0.5, 2.0, dtype=random_dtype("float32", "float64"))
    scalar = oneof(random(-3.0, 3.0), random(-3, 4))
    return choose(
        lambda: a + b,
        lambda: a - b * scalar,
        lambda: scalar - a,
        lambda: scalar + a,
        lambda: a * b + scalar * a,
        lambda: a / b,
        lambda: oneof(1.0, 2, -0.5) / a,
        lambda: a / scalar if float(scalar) != 0 else -a,
        lambda: a ** b,
        lambda: a ** oneof(2, 0.5, -1.5, 3.0),
        lambda: oneof(2.0, 0.5, 3) ** a,
        lambda: abs(a - b),
        lambda: -(a * b),
    )()


@autotest(n=20, ops=["torch.exp", "torch.log", "torch.sqrt", "torch.rsqrt", "torch.sin",
                     "torch.cos", "torch.tan", "torch.erf", "torch.erfinv", "torch.lgamma",
                     "torch.expm1", "torch.log1p", "torch.log2", "torch.reciprocal", "torch.abs",
                     "torch.asin", "torch.atan", "torch.sinh", "torch.digamma"])
def unary_math(torch: Any) -> Any:
    dtype = random_dtype("float32", "float64")
    x = random_tensor(low=-1.2, high=1.2, dtype=dtype, specials=["zeros"])
    positive = random_tensor(low=0.1, high=5.0, dtype=dtype)
    unit = random_tensor(low=-0.9, high=0.9, dtype=dtype)
    return choose(
        lambda: torch.exp(x),
        lambda: x.expm1(),
        lambda: torch.log(positive),
        lambda: positive.log1p(),
        lambda: torch.log2(positive),
        lambda: torch.sqrt(positive),
        lambda: positive.rsqrt(),
        lambda: torch.sin(x),
        lambda: x.cos(),
        lambda: torch.tan(x),
        lambda: torch.erf(x),
        lambda: torch.erfinv(unit),
        lambda: torch.asin(unit),
        lambda: torch.atan(x),
        lambda: torch.sinh(x),
        lambda: torch.lgamma(positive),
        lambda: torch.digamma(positive),
        lambda: torch.reciprocal(positive),
        lambda: torch.abs(x),
    )()


@autotest(n=16, ops=["torch.sign", "torch.floor", "torch.ceil", "torch.round", "torch.trunc",
                     "torch.frac", "torch.Tensor.round"])
def rounding(torch: Any) -> Any:
    x = random_tensor(low=-10, high=10, dtype=random_dtype("float32", "float64"),
                      specials=["zeros"])
    return choose(
        lambda: torch.sign(x),
        lambda: torch.floor(x),
        lambda: x.ceil(),
        lambda: torch.round(x),
        lambda: torch.round(x, decimals=oneof(0, 1, 2, -1)),
        lambda: x.round(decimals=random(0, 3)),
        lambda: torch.trunc(x),
        lambda: torch.frac(x),
    )()


@autotest(n=16, ops=["torch.clamp", "torch.clip", "torch.Tensor.clamp"])
def clamp(torch: Any) -> Any:
    dtype, last = random_dtype("float32", "float64"), random(1, 5)
    x = random_tensor(ndim=random(1, 5), dim0=last, low=-3, high=3, dtype=dtype).transpose(0, -1)
    low, high = random(-2.0, 0.0), random(0.0, 2.0)
    if random_bool():
        lo_t = random_tensor(shape=[last], low=-2, high=0, dtype=dtype)
        hi_t = random_tensor(shape=[last], low=0, high=2, dtype=dtype)
        return choose(
            lambda: torch.clamp(x, lo_t, hi_t),
            lambda: torch.clamp(x, min=lo_t),
            lambda: x.clamp(max=hi_t),
        )()
    return choose(
        lambda: torch.clamp(x, low, high),
        lambda: torch.clamp(x, min=low),
        lambda: x.clamp(max=high),
        lambda: torch.clip(x, min=low, max=high),
    )()


@autotest(n=16, ops=["torch.where", "torch.lerp", "torch.addcmul", "torch.addcdiv"])
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


@autotest(n=16, ops=["torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt", "torch.ge",
                     "torch.isclose", "torch.Tensor.__lt__", "torch.Tensor.__ge__",
                     "torch.Tensor.__eq__", "torch.equal"])
def comparisons(torch: Any) -> Any:
    dtype = random_dtype("float32", "float64")
    a, b = _broadcast_pair(-2.0, 2.0, dtype=dtype, other_dtype=dtype)
    # Quantized values make equality (and the <= / >= boundary) common.
    qa, qb = torch.round(a * 2), torch.round(b * 2)
    return choose(
        lambda: torch.eq(qa, qb),
        lambda: qa.ne(qb),
        lambda: torch.lt(a, b),
        lambda: qa <= qb,
        lambda: a > b,
        lambda: torch.ge(qa, random(-2, 3)),
        lambda: qa >= qb,
        lambda: torch.isclose(a, a + b * 1e-3, rtol=random(0.0, 1e-3) | nothing(),
                              atol=random(0.0, 1e-3) | nothing()),
        lambda: torch.isclose(qa, qb, equal_nan=random_bool()),
        lambda: (qa == qb, torch.equal(qa, qa))[0],
    )()


@autotest(n=14, ops=["torch.Tensor.to", "torch.Tensor.double", "torch.Tensor.float",
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


@autotest(n=12, ops=["torch.Tensor.__floordiv__", "torch.Tensor.__mod__", "torch.floor_divide",
                     "torch.bitwise_and", "torch.Tensor.__and__", "torch.logical_xor"])
def integer_ops(torch: Any) -> Any:
    a = random_tensor(ndim=random(1, 4), low=-20, high=20, dtype=oneof("int64", "int32"))
    b = random_tensor(ndim=1, dim0=1, low=1, high=6, dtype="int64")
    return choose(
        lambda: a // b,
        lambda: a % b,
        lambda: torch.floor_divide(a, oneof(3, -2)),
        lambda: a * b - 7,
        lambda: torch.bitwise_and(a, b),
        lambda: (a > 0) & (b > 2),
        lambda: torch.logical_xor(a > 0, a < 5),
        lambda: a / b,
    )()
