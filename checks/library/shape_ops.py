"""Shape and indexing: views, broadcasting copies, joins and splits, flips, gathers and
scatters, masks, slicing and advanced indexing, triangles and padding."""

import math
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


def _shape(min_ndim: int = 1, max_ndim: int = 4, high: int = 5) -> list[int]:
    return [int(random(1, high)) for _ in range(int(random(min_ndim, max_ndim + 1)))]


def _tensor(shape: list[Any], **kwargs: Any) -> Any:
    kwargs.setdefault("dtype", random_dtype("float32", "float64"))
    return random_tensor(shape=shape, low=-3, high=3, **kwargs)


def _axis(ndim: int) -> int:
    return int(random(-ndim, ndim))


@autotest(n=20, ops=["torch.reshape", "torch.Tensor.reshape", "torch.Tensor.view",
                     "torch.flatten", "torch.Tensor.flatten", "torch.unflatten"])
def reshape(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    x = _tensor(shape)
    numel = math.prod(shape)
    start = int(random(0, ndim))
    end = int(random(start, ndim))
    # A factorisation of one axis for unflatten, with -1 standing in for one factor.
    axis = _axis(ndim)
    factor = choose(*[f for f in range(1, shape[axis] + 1) if shape[axis] % f == 0])
    sizes = choose((factor, shape[axis] // factor), (factor, -1), (-1, shape[axis] // factor))
    return choose(
        lambda: torch.reshape(x, choose((numel,), (-1,), (numel, 1), tuple(reversed(shape)))),
        lambda: x.view(-1, shape[-1]),
        lambda: x.reshape(*shape[:1], -1),
        lambda: torch.flatten(x, start_dim=start, end_dim=end),
        lambda: x.flatten(),
        lambda: torch.unflatten(x, axis, sizes),
    )()


@autotest(n=20, ops=["torch.squeeze", "torch.Tensor.unsqueeze", "torch.permute",
                     "torch.Tensor.permute", "torch.transpose", "torch.movedim",
                     "torch.Tensor.mT", "torch.Tensor.T"])
def permute_squeeze(torch: Any) -> Any:
    shape = [oneof(1, random(2, 5)) for _ in range(int(random(1, 5)))]
    ndim = len(shape)
    x = _tensor(shape)
    order = sorted(range(ndim), key=lambda _: float(random(0.0, 1.0)))
    return choose(
        lambda: torch.squeeze(x, dim=oneof(_axis(ndim), tuple(range(ndim))) | nothing()),
        lambda: x.unsqueeze(int(random(-ndim - 1, ndim + 1))),
        lambda: torch.permute(x, order),
        lambda: x.permute(*order).contiguous().view(-1),
        lambda: torch.transpose(x, _axis(ndim), _axis(ndim)),
        lambda: torch.movedim(x, _axis(ndim), _axis(ndim)),
        lambda: x.mT if ndim >= 2 else x.T,
    )()


@autotest(n=20, ops=["torch.Tensor.expand", "torch.Tensor.expand_as", "torch.Tensor.repeat",
                     "torch.tile", "torch.broadcast_to", "torch.repeat_interleave"])
def expand_repeat(torch: Any) -> Any:
    shape = _shape(high=4)
    x = _tensor([oneof(s, 1) for s in shape])
    leading = [int(random(1, 4)) for _ in range(int(random(0, 2)))]
    target = leading + shape
    reps = [int(random(1, 3)) for _ in range(len(shape) + int(random(0, 2)))]
    grown = choose(lambda: x.expand(*target),
                   lambda: x.expand(*leading, *[-1 if random_bool() else s for s in shape]),
                   lambda: x.expand_as(_tensor(target)),
                   lambda: torch.broadcast_to(x, target))
    return choose(
        grown,
        lambda: x.repeat(*reps),
        lambda: torch.tile(x, tuple(reps[:int(random(1, len(reps) + 1))])),
        lambda: torch.repeat_interleave(x, int(random(1, 4)), dim=_axis(len(shape)) | nothing()),
    )()


@autotest(n=20, ops=["torch.cat", "torch.concat", "torch.stack", "torch.split", "torch.chunk",
                     "torch.narrow", "torch.unbind", "torch.hstack", "torch.Tensor.split"])
def join_split(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    dim = _axis(ndim)
    x = _tensor(shape, dtype="float32")
    size = shape[dim]
    if random_bool():
        parts = []
        for _ in range(int(random(1, 4))):
            piece = list(shape)
            piece[dim] = int(random(0 if random_bool() else 1, 4))
            parts.append(_tensor(piece, dtype="float32"))
        same = [_tensor(shape, dtype="float32") for _ in range(int(random(1, 3)))]
        return choose(
            lambda: torch.cat([x, *parts], dim=dim),
            lambda: torch.concat((x, *parts), dim),
            lambda: torch.stack([x, *same], dim=int(random(-ndim - 1, ndim + 1))),
            lambda: torch.hstack([x, *same]),
        )()
    start = int(random(0, size))
    sections = []
    left = size
    while left:
        sections.append(int(random(1, left + 1)))
        left -= sections[-1]
    return choose(
        lambda: tuple(torch.split(x, int(random(1, size + 1)), dim=dim)),
        lambda: tuple(x.split(sections, dim)),
        lambda: tuple(torch.chunk(x, int(random(1, 5)), dim=dim)),
        lambda: torch.narrow(x, dim, start, int(random(1, size - start + 1))),
        lambda: tuple(torch.unbind(x, dim=dim)),
    )()


@autotest(n=20, ops=["torch.flip", "torch.roll", "torch.rot90", "torch.fliplr"])
def flip_roll(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    x = _tensor(shape, empty=True, layout=["transposed", "strided", "broadcast"])
    axes = sorted({_axis(ndim) % ndim for _ in range(int(random(1, ndim + 1)))})
    shifts = [int(random(-6, 7)) for _ in axes]
    return choose(
        lambda: torch.flip(x, axes),
        lambda: torch.flip(x, dims=[axis - ndim for axis in axes]),
        lambda: x.flip(dims=tuple(axes)),
        lambda: torch.roll(x, shifts, dims=axes),
        lambda: torch.roll(x, shifts[0]),
        lambda: torch.rot90(x, int(random(-3, 5)), (0, ndim - 1)) if ndim >= 2 else x.flip(0),
        lambda: torch.fliplr(x) if ndim >= 2 else -x,
    )()


def _permutation_index(shape: list[int], dim: int, length: int) -> Any:
    """An int64 index of ``shape``, cut to ``length`` along ``dim``, with no value repeated
    along ``dim``: scatter is only deterministic without duplicates."""
    keys = random_tensor(shape=shape, requires_grad=False)
    return keys.argsort(dim=dim).narrow(dim, 0, length)


@autotest(n=20, ops=["torch.gather", "torch.scatter", "torch.scatter_add",
                     "torch.scatter_reduce", "torch.index_select", "torch.take_along_dim",
                     "torch.take", "torch.Tensor.scatter"])
def gather_scatter(torch: Any) -> Any:
    shape = _shape()
    ndim = len(shape)
    dim = _axis(ndim)
    x = random_tensor(shape=shape, low=0.5, high=1.5, dtype=random_dtype("float32", "float64"))
    # Index shapes: other axes equal or 1 (so take_along_dim broadcasts), any length on dim.
    loose = [int(oneof(s, 1)) for s in shape]
    loose[dim] = int(random(1, 5))
    duplicates = random_tensor(shape=loose, dtype="int64", low=0, high=shape[dim])
    src = random_tensor(shape=loose, low=-2, high=2, dtype=x.dtype)
    cut = list(shape)
    cut[dim] = int(random(1, shape[dim] + 1))
    unique = _permutation_index(shape, dim, cut[dim])
    flat = random_tensor(shape=[int(random(1, 6))], dtype="int64", low=-math.prod(shape),
                         high=math.prod(shape))
    return choose(
        lambda: torch.gather(x, dim, duplicates),
        lambda: x.gather(dim, unique),
        lambda: torch.scatter(x, dim, unique, random_tensor(shape=cut, low=-2, high=2,
                                                            dtype=x.dtype)),
        lambda: x.scatter(dim, unique, random(-1.0, 1.0)),
        lambda: torch.scatter_add(x, dim, duplicates, src),
        lambda: torch.scatter_reduce(x, dim, duplicates, src.abs() + 0.5,
                                     reduce=choose("sum", "prod", "mean", "amax", "amin"),
                                     include_self=random_bool() | nothing()),
        lambda: torch.index_select(x, dim, duplicates.flatten()),
        lambda: torch.take_along_dim(x, duplicates, dim=dim),
        # without dim, input and indices are taken as flattened
        lambda: torch.take_along_dim(x, random_tensor(shape=[int(random(1, 6))], dtype="int64",
                                                      low=0, high=math.prod(shape))),
        lambda: torch.take(x, flat),
    )()


@autotest(n=20, ops=["torch.masked_fill", "torch.Tensor.masked_fill", "torch.masked_select",
                     "torch.where"])
def masking(torch: Any) -> Any:
    shape = _shape()
    x = _tensor(shape)
    mask = random_tensor(shape=shape[int(random(0, len(shape) + 1)):] or [1], dtype="bool")
    value = oneof(random(-2.0, 2.0), 0, float("-inf"))
    return choose(
        lambda: torch.masked_fill(x, mask, value),
        lambda: x.masked_fill(mask, torch.tensor(float(random(-1.0, 1.0)))),
        lambda: torch.masked_select(x, mask),
        lambda: torch.where(mask, x, -x),
        lambda: x.masked_fill(x > 0, value),
    )()


@autotest(n=20, ops=["torch.Tensor.__getitem__"])
def indexing(torch: Any) -> Any:
    shape = _shape(high=6)
    ndim = len(shape)
    x = _tensor(shape)
    first = shape[0]
    count = int(random(1, 5))
    rows = random_tensor(shape=[count], dtype="int64", low=-first, high=first)
    cols = random_tensor(shape=[oneof(count, 1)], dtype="int64", low=-shape[-1], high=shape[-1])
    step = int(random(1, 4))
    return choose(
        lambda: x[int(random(-first, first))],
        lambda: x[int(random(0, first)):],
        lambda: x[::step],
        lambda: x[1:, ::2] if ndim >= 2 and first > 1 else x[-1:],
        lambda: x[..., 0],
        lambda: x[..., int(random(0, shape[-1])):, None],
        lambda: x[None, :, oneof(-1, 0)] if ndim >= 2 else x[None],
        lambda: x[rows],
        lambda: x[rows, ..., cols] if ndim >= 2 else x[rows, None],
        lambda: x[x > 0],
        lambda: x[random_tensor(shape=[first], dtype="bool")],
        lambda: x[[0, -1]],
    )()


@autotest(n=20, ops=["torch.tril", "torch.triu", "torch.diagonal", "torch.diag_embed",
                     "torch.diag"])
def triangular(torch: Any) -> Any:
    shape = _shape(min_ndim=2)
    x = _tensor(shape)
    offset = int(random(-3, 4))
    first = _axis(len(shape))
    second = (first + int(random(1, len(shape)))) % len(shape)
    return choose(
        lambda: torch.tril(x, diagonal=offset),
        lambda: x.triu(offset),
        lambda: torch.triu(x),
        lambda: torch.diagonal(x, offset=offset, dim1=first, dim2=second),
        lambda: torch.diag_embed(x, offset=offset),
        lambda: torch.diag(x[0, 0] if len(shape) > 2 else x[0], offset),
    )()


@autotest(n=20, ops=["torch.nn.functional.pad", "torch.nn.ZeroPad2d", "torch.nn.ReflectionPad1d",
                     "torch.nn.ReplicationPad2d", "torch.nn.ConstantPad1d"])
def pad(torch: Any) -> Any:
    mode = choose("constant", "reflect", "replicate", "circular")
    padded = int(random(1, 4))  # number of trailing axes padded
    if mode == "constant":
        shape = _shape(min_ndim=padded, max_ndim=4)
    else:
        # Non-constant modes pad the last 1, 2 or 3 axes of a (batched) channels-first input.
        shape = [int(random(1, 3)) for _ in range(padded + int(random(1, 3)))]
        shape[-padded:] = [int(random(2, 5)) for _ in range(padded)]
    x = _tensor(shape)
    pads: list[int] = []
    for size in reversed(shape[-padded:]):
        for _ in range(2):
            if mode == "reflect":
                pads.append(int(random(0, size)))
            elif mode == "circular":
                pads.append(int(random(0, size + 1)))
            elif mode == "constant":
                pads.append(int(random(-1 if size > 2 else 0, 3)))
            else:
                pads.append(int(random(0, 4)))
    if mode == "constant" and random_bool():
        if padded == 2 and random_bool():
            return torch.nn.ZeroPad2d(tuple(pads))(x)
        return torch.nn.functional.pad(x, pads, value=random(-2.0, 2.0) | nothing())
    if mode == "reflect" and padded == 1 and random_bool():
        return torch.nn.ReflectionPad1d(tuple(pads))(x)
    if mode == "replicate" and padded == 2 and random_bool():
        return torch.nn.ReplicationPad2d(tuple(pads))(x)
    return torch.nn.functional.pad(x, tuple(pads), mode=mode)


@autotest(n=10, backward=False, raises=True, ops=["torch.Tensor.view", "torch.reshape"])
def view_incompatible(torch: Any) -> Any:
    rows, cols = int(random(2, 5)), int(random(2, 5))
    x = random_tensor(shape=[rows, cols])
    if random_bool():
        # A transposed tensor is not contiguous: view cannot merge its axes.
        return x.t().view(rows * cols)
    return torch.reshape(x, (rows * cols + int(random(1, 4)),))


@autotest(n=10, backward=False, raises=True, ops=["torch.cat", "torch.stack"])
def cat_mismatch(torch: Any) -> Any:
    rows, cols = int(random(1, 4)), int(random(1, 4))
    other = cols + int(random(1, 3))
    a = random_tensor(shape=[rows, cols])
    if random_bool():
        return torch.cat([a, random_tensor(shape=[rows, other])], dim=0)
    return torch.stack([a, random_tensor(shape=[rows, other])])
