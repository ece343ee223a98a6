"""Activation functions and their module forms."""

from typing import Any

from checks import autotest, nothing, oneof, random, random_dtype, random_tensor
from checks.library import choose


@autotest(n=12, ops=["torch.nn.functional.softplus", "torch.nn.Softplus"])
def softplus(torch: Any) -> Any:
    x = random_tensor(low=-4, high=4, specials=["zeros", "large"])
    beta, threshold = random(0.5, 3.0) | nothing(), random(1.0, 20.0) | nothing()
    if random(0, 2):
        return torch.nn.Softplus(beta=beta, threshold=threshold)(x)
    return torch.nn.functional.softplus(x, beta=beta, threshold=threshold)


@autotest(n=12, ops=["torch.nn.functional.gelu", "torch.nn.GELU"])
def gelu(torch: Any) -> Any:
    x = random_tensor(low=-3, high=3)
    approximate = oneof("none", "tanh") | nothing()
    if random(0, 2):
        return torch.nn.GELU(approximate=approximate)(x)
    return torch.nn.functional.gelu(x, approximate=approximate)


@autotest(n=16, ops=["torch.relu", "torch.nn.functional.relu", "torch.nn.functional.relu6",
                     "torch.nn.functional.leaky_relu", "torch.nn.functional.hardtanh",
                     "torch.nn.ReLU", "torch.nn.ReLU6", "torch.nn.LeakyReLU", "torch.nn.Hardtanh"])
def relu_family(torch: Any) -> Any:
    F = torch.nn.functional
    x = random_tensor(low=-8, high=8, dtype=random_dtype("float32", "float64"),
                      specials=["zeros", "large"])
    slope = random(0.0, 0.5) | nothing()
    low, high = random(-3.0, -0.1), random(0.1, 3.0)
    return choose(
        lambda: F.relu(x),
        lambda: torch.relu(x),
        lambda: F.relu6(x),
        lambda: F.leaky_relu(x, negative_slope=slope),
        lambda: F.hardtanh(x, min_val=low, max_val=high),
        lambda: F.hardtanh(x),
        lambda: torch.nn.ReLU()(x),
        lambda: torch.nn.ReLU6()(x),
        lambda: torch.nn.LeakyReLU(negative_slope=slope)(x),
        lambda: torch.nn.Hardtanh(min_val=low, max_val=high)(x),
    )()


@autotest(n=12, ops=["torch.nn.functional.elu", "torch.nn.functional.selu",
                     "torch.nn.functional.celu", "torch.nn.ELU", "torch.nn.SELU", "torch.nn.CELU"])
def exponential_units(torch: Any) -> Any:
    F = torch.nn.functional
    x = random_tensor(low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      specials=["zeros"])
    alpha = random(0.1, 2.5) | nothing()
    return choose(
        lambda: F.elu(x, alpha=alpha),
        lambda: F.selu(x),
        lambda: F.celu(x, alpha=alpha),
        lambda: torch.nn.ELU(alpha=alpha)(x),
        lambda: torch.nn.SELU()(x),
        lambda: torch.nn.CELU(alpha=alpha)(x),
    )()


@autotest(n=20, ops=["torch.nn.functional.silu", "torch.nn.functional.mish",
                     "torch.nn.functional.hardswish", "torch.nn.functional.hardsigmoid",
                     "torch.sigmoid", "torch.tanh", "torch.nn.functional.logsigmoid",
                     "torch.nn.functional.softsign", "torch.nn.functional.tanhshrink",
                     "torch.nn.SiLU", "torch.nn.Mish", "torch.nn.Hardswish", "torch.nn.Sigmoid"])
def smooth_gates(torch: Any) -> Any:
    F = torch.nn.functional
    x = random_tensor(low=-6, high=6, dtype=random_dtype("float32", "float64"),
                      specials=["zeros", "large"])
    return choose(
        lambda: F.silu(x),
        lambda: F.mish(x),
        lambda: F.hardswish(x),
        lambda: F.hardsigmoid(x),
        lambda: torch.sigmoid(x),
        lambda: x.tanh(),
        lambda: F.logsigmoid(x),
        lambda: F.softsign(x),
        lambda: F.tanhshrink(x),
        lambda: torch.nn.SiLU()(x),
        lambda: torch.nn.Mish()(x),
        lambda: torch.nn.Hardswish()(x),
        lambda: torch.nn.Sigmoid()(x),
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
    if random(0, 2):
        return torch.nn.Threshold(limit, value)(x)
    return torch.nn.functional.threshold(x, limit, value)


@autotest(n=16, ops=["torch.softmax", "torch.nn.functional.softmax",
                     "torch.nn.functional.log_softmax", "torch.nn.functional.softmin",
                     "torch.Tensor.softmax", "torch.nn.Softmax", "torch.nn.LogSoftmax"])
def softmax(torch: Any) -> Any:
    F = torch.nn.functional
    ndim = int(random(1, 5))
    x = random_tensor(ndim=ndim, low=-5, high=5, dtype=random_dtype("float32", "float64"),
                      specials=["large"])
    dim = random(-ndim, ndim)
    dtype = random_dtype("float64", "float32") | nothing()
    return choose(
        lambda: F.softmax(x, dim=dim, dtype=dtype),
        lambda: F.log_softmax(x, dim=dim, dtype=dtype),
        lambda: F.softmin(x, dim=dim),
        lambda: torch.softmax(x, dim),
        lambda: x.log_softmax(dim),
        lambda: torch.nn.Softmax(dim=dim)(x),
        lambda: torch.nn.LogSoftmax(dim=dim)(x),
    )()


@autotest(n=12, ops=["torch.nn.functional.glu", "torch.nn.GLU"])
def glu(torch: Any) -> Any:
    ndim = int(random(1, 4))
    dim = int(random(-ndim, ndim))
    shape = [int(random(1, 4)) for _ in range(ndim)]
    shape[dim] = 2 * int(random(1, 4))
    x = random_tensor(shape=shape, low=-3, high=3)
    if random(0, 2):
        return torch.nn.GLU(dim=dim)(x)
    return torch.nn.functional.glu(x, dim=dim)


@autotest(n=12, ops=["torch.nn.PReLU", "torch.nn.functional.prelu"])
def prelu(torch: Any) -> Any:
    channels = random(1, 5)
    x = random_tensor(ndim=random(2, 5), dim1=channels, low=-3, high=3)
    num = oneof(1, channels)
    if random(0, 2):
        weight = random_tensor(shape=[num], low=0.0, high=0.5)
        return torch.nn.functional.prelu(x, weight)
    return torch.nn.PReLU(num_parameters=num, init=random(0.0, 0.5) | nothing())(x)
