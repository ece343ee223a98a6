"""In-place operations on tensors that carry gradients: arithmetic, activations, fills,
indexed writes and writes through views. Each spec mutates a non-leaf computed from
grad-requiring inputs, so the gradient has to flow through the mutation."""

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


def _shape(high: int = 5) -> list[int]:
    return [int(random(1, high)) for _ in range(int(random(1, 4)))]


def _broadcastable(shape: list[int]) -> list[int]:
    """A shape that broadcasts *to* ``shape``: a suffix of it, with some axes set to 1."""
    suffix = shape[int(random(0, len(shape))):]
    return [size if random_bool() else 1 for size in suffix]


def _working_copy(torch: Any, x: Any) -> Any:
    """A non-leaf copy of ``x``: mutating a leaf that requires grad is an error."""
    return choose(lambda: x * 1, lambda: x.clone(), lambda: x + 0.0, lambda: torch.mul(x, 1.0))()


@autotest(n=20, ops=["torch.Tensor.add_", "torch.Tensor.sub_", "torch.Tensor.mul_",
                     "torch.Tensor.div_", "torch.Tensor.__iadd__", "torch.Tensor.__isub__",
                     "torch.Tensor.__imul__", "torch.Tensor.__itruediv__", "torch.Tensor.addcmul_",
                     "torch.Tensor.lerp_"])
def arithmetic(torch: Any) -> Any:
    shape = _shape()
    dtype = random_dtype("float32", "float64")
    x = random_tensor(shape=shape, low=-2, high=2, dtype=dtype)
    other = random_tensor(shape=_broadcastable(shape), low=0.5, high=2, dtype=dtype)
    y = _working_copy(torch, x)
    for _ in range(int(random(1, 4))):
        scalar = random(-2.0, 2.0)
        step = int(random(0, 10))
        if step == 0:
            y.add_(other, alpha=random(-2.0, 2.0) | nothing())
        elif step == 1:
            y.sub_(oneof(other, scalar), alpha=random(0.5, 2.0) | nothing())
        elif step == 2:
            y.mul_(oneof(other, scalar))
        elif step == 3:
            y.div_(other, rounding_mode=oneof(None) | nothing())
        elif step == 4:
            y += other
        elif step == 5:
            y -= scalar
        elif step == 6:
            y *= other
        elif step == 7:
            y /= oneof(other, 4.0)
        elif step == 8:
            y.addcmul_(other, other, value=random(-1.0, 1.0) | nothing())
        else:
            y.lerp_(other, random(0.0, 1.0))
    return y


def _method_inplace(torch: Any, y: Any) -> None:
    """One in-place activation of ``y`` through a Tensor method."""
    low, high = random(-2.0, 0.0), random(0.0, 2.0)
    choose(
        lambda: y.clamp_(low, high),
        lambda: y.relu_(),
        lambda: y.clamp_(min=low),
        lambda: y.sigmoid_(),
        lambda: y.clamp_(max=high),
        lambda: y.tanh_(),
        lambda: y.pow_(oneof(2, 3)),
        lambda: y.exp_(),
    )()


def _functional_inplace(torch: Any, y: Any) -> None:
    """One in-place activation of ``y``: a functional with inplace=True or an inplace module."""
    F = torch.nn.functional
    low, high = random(-2.0, 0.0), random(0.0, 2.0)
    choose(
        lambda: F.relu(y, inplace=True),
        lambda: F.leaky_relu(y, random(0.01, 0.5), inplace=True),
        lambda: F.hardtanh(y, min_val=low, max_val=high, inplace=True),
        lambda: F.elu(y, alpha=random(0.1, 2.0), inplace=True),
        lambda: F.silu(y, inplace=True),
        lambda: torch.nn.ReLU(inplace=True)(y),
    )()


def _activate_twice(torch: Any, activate: Any) -> Any:
    x = random_tensor(shape=_shape(), low=-3, high=3, dtype=random_dtype("float32", "float64"))
    y = _working_copy(torch, x)
    activate(torch, y)
    if random_bool():
        # Most of these save their output for backward, so mutating it again would be an
        # error: the second step works on a fresh copy.
        y = y * 1.0
        activate(torch, y)
    return y


@autotest(n=16, ops=["torch.Tensor.clamp_", "torch.Tensor.relu_", "torch.Tensor.sigmoid_",
                     "torch.Tensor.tanh_", "torch.Tensor.pow_", "torch.Tensor.exp_"])
def activation_methods(torch: Any) -> Any:
    return _activate_twice(torch, _method_inplace)


@autotest(n=16, ops=["torch.nn.functional.relu", "torch.nn.functional.leaky_relu",
                     "torch.nn.functional.hardtanh", "torch.nn.functional.elu",
                     "torch.nn.functional.silu", "torch.nn.ReLU"])
def activations_inplace(torch: Any) -> Any:
    return _activate_twice(torch, _functional_inplace)


@autotest(n=20, ops=["torch.Tensor.fill_", "torch.Tensor.zero_", "torch.Tensor.masked_fill_",
                     "torch.Tensor.__setitem__"])
def fill_and_setitem(torch: Any) -> Any:
    shape = _shape()
    first = shape[0]
    x = random_tensor(shape=shape, low=-2, high=2)
    row = random_tensor(shape=shape[1:] or [1], low=-1, high=1)
    y = _working_copy(torch, x)
    value = random(-3.0, 3.0)
    index = int(random(-first, first))
    step = int(random(0, 9))
    if step == 0:
        y[index].fill_(value)
    elif step == 1:
        y[int(random(0, first)):].zero_()
    elif step == 2:
        y.masked_fill_(random_tensor(shape=_broadcastable(shape), dtype="bool"), value)
    elif step == 3:
        y[...] = value
    elif step == 4:
        y[index] = row
    elif step == 5:
        y[y > 0] = 0.0
    elif step == 6:
        y[random_tensor(shape=[int(random(1, 4))], dtype="int64", low=-first, high=first)] = value
    elif step == 7:
        y[..., int(random(0, shape[-1]))] = random_tensor(shape=shape[:-1] or [1], low=-1, high=1)
    else:
        y.fill_(random_tensor(shape=[1], low=-1, high=1, requires_grad=False).sum())
    return y


@autotest(n=12, ops=["torch.Tensor.fill_", "torch.Tensor.zero_", "torch.Tensor.masked_fill_"])
def fills(torch: Any) -> Any:
    """Fills with a Python number or a 0-d tensor (whose gradient is the sum of the filled
    positions' gradients)."""
    shape = _shape()
    x = random_tensor(shape=shape, low=-2, high=2)
    y = _working_copy(torch, x)
    number = random(-3.0, 3.0)
    tensor = random_tensor(shape=[], low=-3, high=3)
    mask = random_tensor(shape=_broadcastable(shape), dtype="bool")
    choose(
        lambda: y.fill_(number),
        lambda: y.fill_(tensor),
        lambda: y.zero_(),
        lambda: y.masked_fill_(mask, number),
        lambda: y.masked_fill_(mask, tensor),
    )()
    return y


@autotest(n=12, ops=["torch.Tensor.copy_"])
def copies(torch: Any) -> Any:
    """copy_ keeps self's shape and dtype: the source may broadcast and have another dtype."""
    shape = _shape()
    x = random_tensor(shape=shape, low=-2, high=2)
    y = _working_copy(torch, x)
    source = choose(
        lambda: shape,
        lambda: shape[1:],  # one axis fewer (a 0-d tensor for a vector)
        lambda: _broadcastable(shape),
    )()
    dtype = random_dtype("float32", "float64")
    y.copy_(random_tensor(shape=source, low=-1, high=1, dtype=dtype))
    return y * 2


def _unique_index(length: int, count: int) -> Any:
    """``count`` distinct positions in [0, length): index_copy_ and scatter_ need them."""
    keys = random_tensor(shape=[length], requires_grad=False)
    return keys.argsort()[:count]


@autotest(n=20, ops=["torch.Tensor.copy_", "torch.Tensor.index_add_", "torch.Tensor.index_copy_",
                     "torch.Tensor.index_fill_", "torch.Tensor.scatter_",
                     "torch.Tensor.scatter_add_", "torch.Tensor.masked_scatter_"])
def indexed_writes(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    dim = int(random(-ndim, ndim))
    size = shape[dim]
    x = random_tensor(shape=shape, low=-2, high=2)
    y = _working_copy(torch, x)
    count = int(random(1, size + 1))
    rows = list(shape)
    rows[dim] = count
    source = random_tensor(shape=rows, low=-1, high=1)
    duplicates = random_tensor(shape=[count], dtype="int64", low=0, high=size)
    spike = [count if axis == dim % ndim else 1 for axis in range(ndim)]
    return choose(
        lambda: y.copy_(random_tensor(shape=_broadcastable(shape), low=-1, high=1)),
        lambda: y.index_add_(dim, duplicates, source, alpha=random(-2.0, 2.0) | nothing()),
        lambda: y.index_copy_(dim, _unique_index(size, count), source),
        lambda: y.index_fill_(dim, duplicates, random(-1.0, 1.0)),
        lambda: y.scatter_(dim, _unique_index(size, count).reshape(spike), random(-1.0, 1.0)),
        # Backward of scatter_add_ is only defined when src has the index's shape.
        lambda: y.scatter_add_(dim, duplicates.reshape(spike), random_tensor(shape=spike)),
        lambda: y.masked_scatter_(x > 0, random_tensor(shape=shape, low=-1, high=1)),
    )()


@autotest(n=20, ops=["torch.Tensor.mul_", "torch.Tensor.add_", "torch.Tensor.transpose",
                     "torch.Tensor.view", "torch.Tensor.__getitem__"])
def through_views(torch: Any) -> Any:
    """Writes through a view reach the base; the base's and the view's gradients must agree."""
    shape = [int(random(2, 5)) for _ in range(int(random(2, 4)))]
    x = random_tensor(shape=shape, low=-2, high=2)
    y = _working_copy(torch, x)
    view = choose(
        lambda: y[0],
        lambda: y[:, 1:],
        lambda: y.transpose(0, 1),
        lambda: y.view(-1),
        lambda: y.narrow(-1, 0, 1),
        lambda: y.diagonal(dim1=0, dim2=1),
    )()
    scale = random_tensor(shape=[1], low=0.5, high=2)
    choose(lambda: view.mul_(scale), lambda: view.add_(scale, alpha=random(-1.0, 1.0)),
           lambda: view.sigmoid_(), lambda: view.zero_())()
    return y, view * 2


@autotest(n=12, backward=False, ops=["torch.Tensor.add_", "torch.Tensor.clamp_",
                                     "torch.Tensor.__ifloordiv__", "torch.Tensor.__imul__"])
def plain_buffers(torch: Any) -> Any:
    """Mutating inputs that need no grad (float and integer): the final input is compared."""
    shape = _shape()
    if random_bool():
        x = random_tensor(shape=shape, low=-5, high=5, requires_grad=False)
        x.add_(random(-1.0, 1.0))
        x.clamp_(min=random(-3.0, 0.0))
        x.mul_(random_tensor(shape=_broadcastable(shape), requires_grad=False))
        return x
    n = random_tensor(shape=shape, dtype=oneof("int64", "int32"), low=-20, high=20)
    n *= int(random(-3, 4))
    n //= int(oneof(2, 3, -2))
    n.add_(int(random(-5, 5)))
    return n
