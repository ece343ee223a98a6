"""Activation functions and their module forms."""

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


@autotest(n=12, ops=["torch.nn.functional.softplus", "torch.nn.Softplus"])
def softplus(torch: Any) -> Any:
    x = random_tensor(low=-4, high=4, specials=["zeros", "large", "huge"])
    beta, threshold = random(0.5, 3.0) | nothing(), random(1.0, 20.0) | nothing()
    if random_bool():
        return torch.nn.Softplus(beta=beta, threshold=threshold)(x)
    return torch.nn.functional.softplus(x, beta=beta, threshold=threshold)


@autotest(n=12, ops=["torch.nn.functional.gelu", "torch.nn.GELU"])
def gelu(torch: Any) -> Any:
    x = random_tensor(low=-3, high=3)
    approximate = oneof("none", "tanh") | nothing()
    if random_bool():
        return torch.nn.GELU(approximate=approximate)(x)
    return torch.nn.functional.gelu(x, approximate=approximate)


# Parameterless activations: the function (a path under torch) and its module class.
PLAIN = {
    "relu": ("torch.nn.functional.relu", "ReLU"),
    "relu6": ("torch.nn.functional.relu6", "ReLU6"),
    "selu": ("torch.nn.functional.selu", "SELU"),
    "silu": ("torch.nn.functional.silu", "SiLU"),
    "mish": ("torch.nn.functional.mish", "Mish"),
    "hardswish": ("torch.nn.functional.hardswish", "Hardswish"),
    "hardsigmoid": ("torch.nn.functional.hardsigmoid", "Hardsigmoid"),
    "sigmoid": ("torch.sigmoid", "Sigmoid"),
    "tanh": ("torch.tanh", "Tanh"),
    "logsigmoid": ("torch.nn.functional.logsigmoid", "LogSigmoid"),
    "softsign": ("torch.nn.functional.softsign", "Softsign"),
    "tanhshrink": ("torch.nn.functional.tanhshrink", "Tanhshrink"),
}


def _lookup(torch: Any, path: str) -> Any:
    target = torch
    for part in path.split(".")[1:]:
        target = getattr(target, part)
    return target


def _register_plain(name: str, function: str, module: str) -> None:
    """One spec per activation, so each is drawn on every run and --ops selects exactly it."""

    def spec(torch: Any) -> Any:
        # Kinks (relu6 at 6, hardswish at +-3) fall inside the range; specials add the zeros,
        # saturation and overflow cases.
        x = random_tensor(low=-7, high=7, dtype=random_dtype("float32", "float64"),
                          specials=["zeros", "large"])
        if random_bool():
            return getattr(torch.nn, module)()(x)
        return _lookup(torch, function)(x)

    spec.__name__ = spec.__qualname__ = name
    autotest(n=8, ops=[function, f"torch.nn.{module}"])(spec)


for _name, (_function, _module) in PLAIN.items():
    _register_plain(_name, _function, _module)


@autotest(n=16, ops=["torch.nn.functional.leaky_relu", "torch.nn.LeakyReLU"])
def leaky_relu(torch: Any) -> Any:
    x = random_tensor(low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      specials=["zeros"])
    if random_bool():
        # Whole numbers: many exact zeros, the kink, where the gradient is negative_slope.
        x = torch.round(x)
    slope = random(0.0, 0.5) | oneof(-0.2, 1.5) | nothing()
    if random_bool():
        return torch.nn.LeakyReLU(negative_slope=slope)(x)
    return torch.nn.functional.leaky_relu(x, negative_slope=slope)


@autotest(n=12, ops=["torch.nn.functional.hardtanh", "torch.nn.Hardtanh"])
def hardtanh(torch: Any) -> Any:
    x = random_tensor(low=-4, high=4, dtype=random_dtype("float32", "float64"))
    low, high = random(-3.0, -0.1) | nothing(), random(0.1, 3.0) | nothing()
    if random_bool():
        return torch.nn.Hardtanh(min_val=low, max_val=high)(x)
    return torch.nn.functional.hardtanh(x, min_val=low, max_val=high)


@autotest(n=14, ops=["torch.nn.functional.elu", "torch.nn.functional.celu", "torch.nn.ELU",
                     "torch.nn.CELU"])
def elu_celu(torch: Any) -> Any:
    F = torch.nn.functional
    x = random_tensor(low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      specials=["zeros"])
    alpha = random(0.1, 2.5) | nothing()
    return choose(
        lambda: F.elu(x, alpha=alpha),
        lambda: F.celu(x, alpha=alpha),
        lambda: torch.nn.ELU(alpha=alpha)(x),
        lambda: torch.nn.CELU(alpha=alpha)(x),
    )()


@autotest(n=10, ops=["torch.nn.functional.hardshrink", "torch.nn.functional.softshrink",
                     "torch.nn.Hardshrink", "torch.nn.Softshrink"])
def shrink(torch: Any) -> Any:
    F = torch.nn.functional
    x = random_tensor(low=-2, high=2)
    lambd = random(0.0, 1.0) | nothing()
    return choose(
        lambda: F.hardshrink(x, lambd=lambd),
        lambda: F.softshrink(x, lambd=lambd),
        lambda: torch.nn.Hardshrink(lambd=lambd)(x),
        lambda: torch.nn.Softshrink(lambd=lambd)(x),
    )()


@autotest(n=12, ops=["torch.nn.functional.threshold", "torch.nn.Threshold"])
def threshold(torch: Any) -> Any:
    x = random_tensor(low=-3, high=3, specials=["zeros"])
    limit, value = random(-1.0, 1.0), random(-2.0, 2.0)
    if random_bool():
        return torch.nn.Threshold(limit, value)(x)
    return torch.nn.functional.threshold(x, limit, value)


@autotest(n=20, ops=["torch.softmax", "torch.nn.functional.softmax",
                     "torch.nn.functional.log_softmax", "torch.nn.functional.softmin",
                     "torch.Tensor.softmax", "torch.Tensor.log_softmax", "torch.nn.Softmax",
                     "torch.nn.LogSoftmax", "torch.nn.Softmin"])
def softmax(torch: Any) -> Any:
    ndim = int(random(1, 5))
    x = random_tensor(ndim=ndim, low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      specials=["large", "huge"], layout=["transposed", "strided"])
    dim = random(-ndim, ndim)
    dtype = random_dtype("float64", "float32") | nothing()
    name = choose("softmax", "log_softmax", "softmin")
    module = {"softmax": "Softmax", "log_softmax": "LogSoftmax", "softmin": "Softmin"}[name]
    return choose(
        lambda: getattr(torch.nn.functional, name)(x, dim=dim, dtype=dtype),
        lambda: getattr(torch.nn, module)(dim=dim)(x),
        lambda: getattr(x, name)(dim, dtype=dtype) if name != "softmin" else torch.softmax(x, dim),
    )()


@autotest(n=12, ops=["torch.nn.functional.glu", "torch.nn.GLU"])
def glu(torch: Any) -> Any:
    ndim = int(random(1, 4))
    dim = int(random(-ndim, ndim))
    shape = [int(random(1, 4)) for _ in range(ndim)]
    shape[dim] = 2 * int(random(1, 4))
    x = random_tensor(shape=shape, low=-3, high=3)
    if random_bool():
        return torch.nn.GLU(dim=dim)(x)
    return torch.nn.functional.glu(x, dim=dim)


@autotest(n=12, ops=["torch.nn.PReLU", "torch.nn.functional.prelu"])
def prelu(torch: Any) -> Any:
    channels = random(1, 5)
    x = random_tensor(ndim=random(2, 5), dim1=channels, low=-3, high=3)
    num = oneof(1, channels)
    if random_bool():
        weight = random_tensor(shape=[num], low=0.0, high=0.5)
        return torch.nn.functional.prelu(x, weight)
    return torch.nn.PReLU(num_parameters=num, init=random(0.0, 0.5) | nothing())(x)
