"""Reductions and scans: sums and means, extrema with indices, variance, norms, cumulative ops,
order statistics and boolean all/any."""

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


def _shape(low: int = 1, high: int = 5) -> list[int]:
    """A shape of 1 to 4 axes with sizes in [low, high)."""
    return [int(random(low, high)) for _ in range(int(random(1, 5)))]


def _dims(ndim: int) -> Any:
    """A dim argument: one axis (maybe negative), or a tuple of distinct axes."""
    first = int(random(-ndim, ndim))
    if ndim == 1 or random_bool():
        return first
    second = (first % ndim + int(random(1, ndim))) % ndim
    return (first, second - ndim if random_bool() else second)


@autotest(n=20, ops=["torch.sum", "torch.mean", "torch.nansum", "torch.Tensor.sum",
                     "torch.Tensor.mean"])
def sum_mean(torch: Any) -> Any:
    shape = _shape()
    x = random_tensor(shape=shape, low=-2, high=2, dtype=random_dtype("float32", "float64"))
    dim, keepdim = _dims(len(shape)), random_bool() | nothing()
    dtype = random_dtype("float64") | nothing()
    return choose(
        lambda: torch.sum(x),
        lambda: torch.sum(x, dim, keepdim=keepdim, dtype=dtype),
        lambda: x.sum(dim=dim, keepdim=keepdim),
        lambda: torch.mean(x),
        lambda: torch.mean(x, dim, keepdim=keepdim, dtype=dtype),
        lambda: x.mean(dim, keepdim=keepdim),
        lambda: torch.nansum(x, dim=dim),
        lambda: torch.sum(torch.floor(x * 3).to(torch.int64), dim, dtype=oneof(
            torch.int64, torch.float32) | nothing()),
    )()


@autotest(n=12, ops=["torch.prod", "torch.Tensor.prod"])
def prod(torch: Any) -> Any:
    shape = _shape()
    # Magnitudes around 1 and no zeros: the gradient divides by the input.
    x = random_tensor(shape=shape, low=0.6, high=1.5) * oneof(1.0, -1.0)
    if random_bool():
        return torch.prod(x, dtype=random_dtype("float64") | nothing())
    return x.prod(int(random(-len(shape), len(shape))), keepdim=random_bool() | nothing())


@autotest(n=20, ops=["torch.amax", "torch.amin", "torch.max", "torch.min", "torch.Tensor.max",
                     "torch.aminmax"])
def extrema(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    # Views too: a broadcast one ties every value along an axis (the first index wins).
    x = random_tensor(shape=shape, low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      layout=["transposed", "strided", "broadcast"])
    dim, keepdim = int(random(-ndim, ndim)), random_bool() | nothing()
    return choose(
        lambda: torch.amax(x, dim=_dims(ndim), keepdim=keepdim),
        lambda: torch.amin(x, _dims(ndim)),
        lambda: torch.max(x),
        lambda: x.min(),
        lambda: tuple(torch.max(x, dim, keepdim=keepdim)),
        lambda: torch.min(x, dim=dim),
        lambda: tuple(torch.max(x, dim=dim, keepdim=keepdim)),
        lambda: x.max(dim)[0] * 2,
        lambda: torch.min(x, dim, keepdim=keepdim)[1],
        lambda: tuple(torch.aminmax(x, dim=dim, keepdim=random_bool())),
    )()


@autotest(n=12, ops=["torch.max", "torch.min", "torch.Tensor.max", "torch.Tensor.min",
                     "torch.fmax", "torch.fmin"])
def pairwise_extrema(torch: Any) -> Any:
    """torch.max/min given a second tensor: elementwise, with broadcasting."""
    shape = _shape()
    dtype = random_dtype("float32", "float64")
    x = random_tensor(shape=shape, low=-5, high=5, dtype=dtype)
    other = random_tensor(shape=shape[int(random(0, len(shape) + 1)):] or [1], low=-5, high=5,
                          dtype=dtype)
    return choose(
        lambda: torch.max(x, other),
        lambda: torch.min(x, other),
        lambda: x.max(other),
        lambda: x.min(other),
        lambda: torch.fmax(x, other),
        lambda: torch.fmin(other, x),
    )()


@autotest(n=12, backward=False, ops=["torch.argmax", "torch.argmin", "torch.Tensor.argmax",
                                     "torch.Tensor.argmin"])
def argmax(torch: Any) -> Any:
    shape = _shape()
    x = random_tensor(shape=shape, low=-5, high=5, dtype=random_dtype("float32", "float64"))
    dim = random(-len(shape), len(shape)) | nothing()
    keepdim = random_bool() | nothing()
    return choose(
        lambda: torch.argmax(x),
        lambda: torch.argmax(x, dim=dim, keepdim=keepdim),
        lambda: x.argmin(dim=dim, keepdim=keepdim),
        lambda: torch.argmin(x, int(random(-len(shape), len(shape)))),
    )()


@autotest(n=20, ops=["torch.var", "torch.std", "torch.var_mean", "torch.std_mean",
                     "torch.Tensor.var", "torch.Tensor.std"])
def var_std(torch: Any) -> Any:
    shape = _shape(low=3, high=6)
    x = random_tensor(shape=shape, low=-3, high=3, dtype=random_dtype("float32", "float64"))
    dim, keepdim = _dims(len(shape)), random_bool() | nothing()
    correction = oneof(0, 1, 2) | nothing()
    return choose(
        lambda: torch.var(x, dim, correction=correction, keepdim=keepdim),
        lambda: torch.std(x, dim=dim, correction=correction, keepdim=keepdim),
        lambda: x.var(dim, unbiased=random_bool(), keepdim=keepdim),
        lambda: x.std(unbiased=random_bool()),
        lambda: torch.var(x),
        lambda: tuple(torch.var_mean(x, dim, correction=correction, keepdim=keepdim)),
        lambda: tuple(torch.std_mean(x, dim=dim)),
    )()


@autotest(n=12, ops=["torch.logsumexp", "torch.Tensor.logsumexp"])
def logsumexp(torch: Any) -> Any:
    shape = _shape()
    # Huge entries (the max-shift trick) only in float64: in float32 their rounding swamps
    # the result's low digits.
    if random_bool():
        x = random_tensor(shape=shape, low=-10, high=10, dtype="float64",
                          specials=["large", "huge"])
    else:
        x = random_tensor(shape=shape, low=-10, high=10)
    dim, keepdim = _dims(len(shape)), random_bool() | nothing()
    if random_bool():
        return x.logsumexp(dim, keepdim=keepdim)
    return torch.logsumexp(x, dim=dim, keepdim=keepdim)


@autotest(n=20, ops=["torch.norm", "torch.linalg.vector_norm", "torch.linalg.norm",
                     "torch.linalg.matrix_norm", "torch.Tensor.norm"])
def norms(torch: Any) -> Any:
    shape = _shape(low=2, high=5)
    ndim = len(shape)
    # Bounded away from zero: the norms' gradients are undefined there.
    x = random_tensor(shape=shape, low=0.2, high=2, dtype=random_dtype("float32", "float64"))
    x = x * torch.sign(random_tensor(shape=shape, low=-1, high=1, requires_grad=False))
    dim, keepdim = _dims(ndim) | nothing(), random_bool() | nothing()
    ord_ = oneof(1, 2, 3, 0.5, float("inf"), float("-inf")) | nothing()
    if ndim >= 2 and random_bool():
        mat = oneof("fro", 1, -1, float("inf")) | nothing()
        return torch.linalg.matrix_norm(x, ord=mat, keepdim=keepdim)
    return choose(
        lambda: torch.linalg.vector_norm(x, ord=ord_, dim=dim, keepdim=keepdim),
        lambda: torch.linalg.vector_norm(x, ord=ord_, dtype=random_dtype("float64") | nothing()),
        lambda: torch.norm(x, p=oneof(1, 2, "fro") | nothing(), dim=dim, keepdim=keepdim),
        lambda: x.norm(),
        lambda: torch.linalg.norm(x.flatten(), ord=ord_),
    )()


@autotest(n=14, ops=["torch.linalg.norm", "torch.linalg.matrix_norm"])
def matrix_norms(torch: Any) -> Any:
    """Matrix norms, including the spectral (ord=2, -2) and nuclear ones, of a matrix or over
    the last two axes of a batch."""
    rows, cols = int(random(1, 5)), int(random(1, 5))
    batch = [int(random(1, 3)) for _ in range(int(random(0, 2)))]
    x = random_tensor(shape=[*batch, rows, cols], low=-2, high=2,
                      dtype=random_dtype("float32", "float64"))
    ord_ = oneof(2, "fro", "nuc", -2, 1, -1, float("inf")) | nothing()
    keepdim = random_bool() | nothing()
    return choose(
        lambda: torch.linalg.norm(x.flatten(0, -2), ord=ord_),
        lambda: torch.linalg.norm(x, ord=ord_, dim=(-2, -1), keepdim=keepdim),
        lambda: torch.linalg.matrix_norm(x, ord=ord_, keepdim=keepdim),
    )()


@autotest(n=20, ops=["torch.cumsum", "torch.cumprod", "torch.cummax", "torch.cummin",
                     "torch.logcumsumexp", "torch.Tensor.cumsum"])
def cumulative(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    x = random_tensor(shape=shape, low=-2, high=2, dtype=random_dtype("float32", "float64"),
                      empty=True)
    nonzero = random_tensor(shape=shape, low=0.5, high=1.5)
    # Integer inputs: cumsum and cumprod give int64, cummax and cummin keep the dtype.
    ints = random_tensor(shape=shape, low=-3, high=4, dtype=oneof("int64", "int32", "uint8"))
    dim = int(random(-ndim, ndim))
    return choose(
        lambda: torch.cumsum(x, dim),
        lambda: x.cumsum(dim=dim, dtype=random_dtype("float64") | nothing()),
        lambda: torch.cumprod(nonzero, dim),
        lambda: nonzero.cumprod(dim=dim),
        lambda: tuple(torch.cummax(x, dim)),
        lambda: torch.cummin(x, dim=dim)[0],
        lambda: torch.logcumsumexp(x, dim),
        lambda: torch.cumsum(ints, dim),
        lambda: ints.cumprod(dim),
        lambda: tuple(torch.cummax(ints, dim=dim)),
    )()


@autotest(n=12, backward=False, ops=["torch.all", "torch.any", "torch.Tensor.all",
                                     "torch.Tensor.any", "torch.count_nonzero"])
def all_any(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    # Mostly-true masks make all() interesting; plain coin flips make any() interesting.
    mask = random_tensor(shape=shape, low=0, high=1, requires_grad=False) < random(0.3, 1.0)
    dim, keepdim = int(random(-ndim, ndim)), random_bool() | nothing()
    return choose(
        lambda: torch.all(mask),
        lambda: torch.any(mask),
        lambda: mask.all(dim, keepdim=keepdim),
        lambda: torch.any(mask, dim=dim, keepdim=keepdim),
        lambda: torch.all(random_tensor(shape=shape, dtype="bool"), dim=_dims(ndim)),
        lambda: torch.count_nonzero(mask, dim=dim),
    )()


@autotest(n=14, ops=["torch.sort", "torch.Tensor.sort", "torch.argsort", "torch.msort"])
def sort(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    x = random_tensor(shape=shape, low=-5, high=5, dtype=random_dtype("float32", "float64"))
    dim = int(random(-ndim, ndim))
    descending = random_bool() | nothing()
    return choose(
        lambda: tuple(torch.sort(x, dim=dim, descending=descending)),
        lambda: x.sort(dim=dim, stable=random_bool(), descending=descending)[0],
        lambda: torch.argsort(x, dim=dim, descending=descending),
        lambda: torch.msort(x),
    )()


@autotest(n=20, ops=["torch.topk", "torch.kthvalue", "torch.median", "torch.Tensor.topk"])
def selection(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    x = random_tensor(shape=shape, low=-5, high=5, dtype=random_dtype("float32", "float64"))
    dim = int(random(-ndim, ndim))
    k = random(1, shape[dim] + 1)
    return choose(
        lambda: tuple(torch.topk(x, k, dim=dim, largest=random_bool() | nothing(),
                                 sorted=True)),
        lambda: x.topk(int(random(1, shape[-1] + 1)))[0],
        lambda: tuple(torch.kthvalue(x, k, dim, keepdim=random_bool())),
        lambda: tuple(torch.median(x, dim=dim, keepdim=random_bool() | nothing())),
        lambda: torch.median(x),
    )()
