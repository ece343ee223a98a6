"""Common ops in float16, bfloat16 and complex: where kernel libraries and compilers differ
most (accumulation width, rounding of intermediates, conjugation). Small shapes, few draws."""

from typing import Any

from alignbot.checks import autotest, random, random_dtype, random_tensor
from alignbot.checks.library import choose

LOW = ("float16", "bfloat16")
COMPLEX = ("complex64", "complex128")


def _pair(dtype: Any, low: float = -2.0, high: float = 2.0) -> tuple[Any, Any]:
    rows, cols = random(1, 5), random(1, 5)
    a = random_tensor(ndim=2, dim0=rows, dim1=cols, low=low, high=high, dtype=dtype)
    b = random_tensor(ndim=2, dim0=rows, dim1=cols, low=low, high=high, dtype=dtype)
    return a, b


@autotest(n=12, ops=["torch.add", "torch.mul", "torch.sub", "torch.div", "torch.exp",
                     "torch.tanh", "torch.sigmoid", "torch.sqrt"])
def low_precision_elementwise(torch: Any) -> Any:
    a, b = _pair(random_dtype(*LOW))
    return choose(
        lambda: torch.add(a, b),
        lambda: torch.mul(a, b),
        lambda: torch.sub(a, b),
        lambda: torch.div(a, b.abs() + 0.5),
        lambda: torch.exp(a),
        lambda: torch.tanh(a),
        lambda: torch.sigmoid(a),
        lambda: torch.sqrt(a.abs()),
    )()


@autotest(n=12, ops=["torch.add", "torch.mul", "torch.div", "torch.exp", "torch.abs",
                     "torch.conj", "torch.sqrt", "torch.Tensor.conj"])
def complex_elementwise(torch: Any) -> Any:
    a, b = _pair(random_dtype(*COMPLEX))
    return choose(
        lambda: torch.add(a, b),
        lambda: torch.mul(a, b),
        lambda: torch.div(a, b + 3),
        lambda: torch.exp(a),
        lambda: torch.abs(a),
        lambda: torch.conj(a) * b,
        lambda: torch.sqrt(a + 3),
    )()


@autotest(n=12, ops=["torch.matmul", "torch.mm", "torch.bmm"])
def matmul_precision(torch: Any) -> Any:
    dtype = random_dtype(*LOW, *COMPLEX)
    m, k, n = random(1, 5), random(1, 6), random(1, 5)
    if choose(False, True):
        batch = random(1, 3)
        a = random_tensor(shape=[batch, m, k], low=-1, high=1, dtype=dtype)
        return torch.bmm(a, random_tensor(shape=[batch, k, n], low=-1, high=1, dtype=dtype))
    a = random_tensor(ndim=2, dim0=m, dim1=k, low=-1, high=1, dtype=dtype)
    b = random_tensor(ndim=2, dim0=k, dim1=n, low=-1, high=1, dtype=dtype)
    return choose(lambda: torch.matmul(a, b), lambda: torch.mm(a, b))()


@autotest(n=12, ops=["torch.sum", "torch.mean", "torch.prod", "torch.amax", "torch.Tensor.sum"])
def reductions_precision(torch: Any) -> Any:
    dtype = random_dtype(*LOW, *COMPLEX)
    x = random_tensor(ndim=2, low=-2, high=2, dtype=dtype)
    dim = random(-2, 2)
    low_precision = str(x.dtype).rsplit(".", 1)[-1] in LOW
    return choose(
        lambda: torch.sum(x, dim=dim),
        lambda: x.sum(),
        lambda: torch.mean(x, dim=dim, keepdim=True),
        lambda: torch.prod(x, dim=dim),
        lambda: torch.amax(x, dim=dim) if low_precision else torch.sum(x.abs(), dim=dim),
    )()


@autotest(n=12, ops=["torch.softmax", "torch.nn.functional.log_softmax"])
def softmax_low_precision(torch: Any) -> Any:
    x = random_tensor(ndim=2, low=-6, high=6, dtype=random_dtype(*LOW))
    dim = random(-2, 2)
    return choose(lambda: torch.softmax(x, dim),
                  lambda: torch.nn.functional.log_softmax(x, dim=dim))()
