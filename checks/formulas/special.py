"""Special functions in arbitrary precision (mpmath, 40 digits), rounded once to float64.

Each is the mathematical function ``torch.special``'s docs name; at a pole the value is the
limit where it exists (``lgamma`` +inf, ``digamma(+0)`` -inf as the docs say, odd orders of
``polygamma`` +inf) and NaN where the two sides disagree. Where the docs name the function but
PyTorch evaluates a restricted domain (``zeta`` below 1, ``gammainc`` at ``a <= 0``), the
formula abstains rather than vote.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np

from .common import Ambiguous

DIGITS = 40
MAX_ELEMENTS = 4096  # each element is evaluated in Python: larger inputs get no formula


def elementwise(fn: Callable[..., Any], *arrays: Any) -> np.ndarray:
    """``fn`` on each element of the broadcast inputs (Python floats), at DIGITS digits."""
    values = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in arrays))
    if values[0].size > MAX_ELEMENTS:
        raise ValueError(f"more than {MAX_ELEMENTS} elements for mpmath")
    out = np.empty(values[0].shape)
    with mpmath.workdps(DIGITS):
        for index in np.ndindex(out.shape):
            out[index] = _to_float(fn(*(float(v[index]) for v in values)))
    return out


def _to_float(value: Any) -> float:
    if isinstance(value, mpmath.mpc):
        if value.imag != 0:
            return math.nan
        value = value.real
    return float(value)


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _pole(x: float) -> bool:
    return x <= 0 and x == math.floor(x)


def _erf(x: float) -> Any:
    return mpmath.erf(x) if _finite(x) else math.copysign(1.0, x) if not math.isnan(x) else x


def _erfc(x: float) -> Any:
    if math.isnan(x):
        return x
    return mpmath.erfc(x) if _finite(x) else (0.0 if x > 0 else 2.0)


def _erfinv(x: float) -> Any:
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    if abs(x) == 1:
        return math.copysign(math.inf, x)
    return mpmath.erfinv(x)


def _erfcx(x: float) -> Any:
    if math.isnan(x):
        return x
    if math.isinf(x):
        return 0.0 if x > 0 else math.inf
    return mpmath.exp(mpmath.mpf(x) ** 2) * mpmath.erfc(x)


def _lgamma(x: float) -> Any:
    if math.isnan(x):
        return x
    if math.isinf(x) or _pole(x):
        return math.inf
    return mpmath.log(abs(mpmath.gamma(x)))


def _digamma(x: float) -> Any:
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return math.nan
    if x == 0:
        return -math.inf if math.copysign(1.0, x) > 0 else math.inf
    return math.nan if _pole(x) else mpmath.digamma(x)


def _polygamma(n: float, x: float) -> Any:
    order = int(n)
    if order == 0:
        return _digamma(x)
    if math.isnan(x):
        return x
    if math.isinf(x):
        raise Ambiguous("polygamma at infinity")
    if _pole(x):
        if order % 2 == 0:
            raise Ambiguous("an even order of polygamma has no limit at a pole")
        return math.inf
    return mpmath.polygamma(order, x)


def _bessel_i(order: int, scaled: bool) -> Callable[[float], Any]:
    def fn(x: float) -> Any:
        if not _finite(x):
            if math.isnan(x):
                return x
            raise Ambiguous("a modified Bessel function at infinity")
        value = mpmath.besseli(order, x)
        return value * mpmath.exp(-abs(mpmath.mpf(x))) if scaled else value
    return fn


def _bessel_j(order: int) -> Callable[[float], Any]:
    def fn(x: float) -> Any:
        if math.isinf(x):
            return 0.0
        return x if math.isnan(x) else mpmath.besselj(order, x)
    return fn


def _bessel_y(order: int) -> Callable[[float], Any]:
    def fn(x: float) -> Any:
        if math.isnan(x) or x < 0:
            return math.nan
        if x == 0:
            return -math.inf
        return 0.0 if math.isinf(x) else mpmath.bessely(order, x)
    return fn


def _bessel_k(order: int, scaled: bool) -> Callable[[float], Any]:
    def fn(x: float) -> Any:
        if math.isnan(x) or x < 0:
            return math.nan
        if x == 0:
            return math.inf
        if math.isinf(x):
            return 0.0
        value = mpmath.besselk(order, x)
        return value * mpmath.exp(x) if scaled else value
    return fn


def _ndtr(x: float) -> Any:
    if math.isnan(x):
        return x
    return mpmath.ncdf(x) if _finite(x) else (1.0 if x > 0 else 0.0)


def _log_ndtr(x: float) -> Any:
    if math.isnan(x):
        return x
    if math.isinf(x):
        return 0.0 if x > 0 else -math.inf
    return mpmath.log(mpmath.ncdf(x))


def _ndtri(p: float) -> Any:
    if math.isnan(p) or p < 0 or p > 1:
        return math.nan
    if p in (0.0, 1.0):
        return -math.inf if p == 0 else math.inf
    return mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(p) - 1)


def _gammainc(upper: bool) -> Callable[[float, float], Any]:
    def fn(a: float, x: float) -> Any:
        if math.isnan(a) or math.isnan(x):
            return math.nan
        if a <= 0 or x < 0 or math.isinf(a):
            raise Ambiguous("the regularized incomplete gamma function outside a > 0, x >= 0")
        if math.isinf(x):
            return 0.0 if upper else 1.0
        if upper:
            return mpmath.gammainc(a, x, mpmath.inf, regularized=True)
        return mpmath.gammainc(a, 0, x, regularized=True)
    return fn


def _zeta(x: float, q: float) -> Any:
    if math.isnan(x) or math.isnan(q):
        return math.nan
    if x == 1:
        return math.inf
    if x < 1 or q <= 0 or not _finite(x, q):
        raise Ambiguous("the Hurwitz zeta function where PyTorch restricts its domain")
    return mpmath.zeta(x, q)


def _sinc(x: float) -> Any:
    if math.isinf(x):
        return 0.0
    if math.isnan(x):
        return x
    return 1.0 if x == 0 else mpmath.sin(mpmath.pi * x) / (mpmath.pi * x)


def _entr(x: float) -> Any:
    if math.isnan(x):
        return x
    if x < 0:
        return -math.inf
    if x == 0:
        return 0.0
    return -math.inf if math.isinf(x) else -mpmath.mpf(x) * mpmath.log(x)


def _xlogy(x: float, y: float) -> Any:
    if math.isnan(y):
        return math.nan
    if x == 0:
        return 0.0
    if math.isnan(x) or not _finite(x, y) or y <= 0:
        raise Ambiguous("xlogy outside finite x and y > 0")
    return mpmath.mpf(x) * mpmath.log(y)


def _xlog1py(x: float, y: float) -> Any:
    if math.isnan(y):
        return math.nan
    if x == 0:
        return 0.0
    if math.isnan(x) or not _finite(x, y) or y <= -1:
        raise Ambiguous("xlog1py outside finite x and y > -1")
    return mpmath.mpf(x) * mpmath.log1p(y)


def _spherical_j0(x: float) -> Any:
    if math.isinf(x):
        return 0.0
    if math.isnan(x):
        return x
    return 1.0 if x == 0 else mpmath.sin(x) / x


def _airy_ai(x: float) -> Any:
    if math.isnan(x):
        return x
    if math.isinf(x):
        raise Ambiguous("the Airy function at infinity")
    return mpmath.airyai(x)


def unary(fn: Callable[[float], Any]) -> Callable[..., np.ndarray]:
    def call(input: Any, *, out: Any = None) -> np.ndarray:
        return elementwise(fn, input)
    return call


def binary(fn: Callable[[float, float], Any], first: str = "input", second: str = "other"
           ) -> Callable[..., np.ndarray]:
    def call(*args: Any, out: Any = None, **kwargs: Any) -> np.ndarray:
        values = list(args) + [kwargs[k] for k in (first, second)[len(args):] if k in kwargs]
        if len(values) != 2:
            raise TypeError("expected two arguments")
        return elementwise(fn, *values)
    return call


def polygamma(n: int, input: Any, *, out: Any = None) -> np.ndarray:
    return elementwise(lambda x: _polygamma(n, x), input)


def mvlgamma(input: Any, p: int, *, out: Any = None) -> np.ndarray:
    """``log(pi) p (p - 1) / 4 + sum_{i=1}^{p} lgamma(x - (i - 1) / 2)``; defined for
    ``x > (p - 1) / 2`` (PyTorch raises elsewhere)."""
    def one(x: float) -> Any:
        if not x > (p - 1) / 2:
            raise ValueError("mvlgamma is defined for x > (p - 1) / 2")
        return mpmath.log(mpmath.pi) * p * (p - 1) / 4 + sum(
            mpmath.log(abs(mpmath.gamma(x - mpmath.mpf(i) / 2))) for i in range(p))
    return elementwise(one, input)


def logit(input: Any, eps: Any = None, *, out: Any = None) -> np.ndarray:
    """``log(z / (1 - z))``, ``z`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    def one(x: float) -> Any:
        z = x if eps is None or math.isnan(x) else min(max(x, eps), 1 - eps)
        if math.isnan(z) or z < 0 or z > 1:
            return math.nan
        if z in (0.0, 1.0):
            return -math.inf if z == 0 else math.inf
        return mpmath.log(z / (1 - mpmath.mpf(z)))
    return elementwise(one, input)


erf, erfc, erfinv, erfcx = unary(_erf), unary(_erfc), unary(_erfinv), unary(_erfcx)
lgamma, digamma = unary(_lgamma), unary(_digamma)
i0, i0e = unary(_bessel_i(0, False)), unary(_bessel_i(0, True))
i1, i1e = unary(_bessel_i(1, False)), unary(_bessel_i(1, True))
modified_bessel_k0, modified_bessel_k1 = unary(_bessel_k(0, False)), unary(_bessel_k(1, False))
scaled_modified_bessel_k0 = unary(_bessel_k(0, True))
scaled_modified_bessel_k1 = unary(_bessel_k(1, True))
bessel_j0, bessel_j1 = unary(_bessel_j(0)), unary(_bessel_j(1))
bessel_y0, bessel_y1 = unary(_bessel_y(0)), unary(_bessel_y(1))
spherical_bessel_j0, airy_ai = unary(_spherical_j0), unary(_airy_ai)
ndtr, log_ndtr, ndtri = unary(_ndtr), unary(_log_ndtr), unary(_ndtri)
gammainc, gammaincc = binary(_gammainc(False)), binary(_gammainc(True))
zeta, sinc, entr = binary(_zeta), unary(_sinc), unary(_entr)
xlogy, xlog1py = binary(_xlogy), binary(_xlog1py)

# a name in torch / torch.special / Tensor -> the name of its formula here
SPECIAL = {
    "erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "erfcx": "erfcx", "lgamma": "lgamma",
    "gammaln": "lgamma", "digamma": "digamma", "psi": "digamma", "polygamma": "polygamma",
    "mvlgamma": "mvlgamma", "multigammaln": "mvlgamma", "i0": "i0", "i0e": "i0e",
    "i1": "i1", "i1e": "i1e", "modified_bessel_i0": "i0", "modified_bessel_i1": "i1",
    "modified_bessel_k0": "modified_bessel_k0", "modified_bessel_k1": "modified_bessel_k1",
    "scaled_modified_bessel_k0": "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1": "scaled_modified_bessel_k1", "bessel_j0": "bessel_j0",
    "bessel_j1": "bessel_j1", "bessel_y0": "bessel_y0", "bessel_y1": "bessel_y1",
    "spherical_bessel_j0": "spherical_bessel_j0", "airy_ai": "airy_ai", "ndtr": "ndtr",
    "log_ndtr": "log_ndtr", "ndtri": "ndtri", "gammainc": "gammainc", "igamma": "gammainc",
    "gammaincc": "gammaincc", "igammac": "gammaincc", "zeta": "zeta", "sinc": "sinc",
    "entr": "entr", "xlogy": "xlogy", "xlog1py": "xlog1py", "logit": "logit",
}
