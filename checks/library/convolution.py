"""Convolutions and transposed convolutions, as modules and functions, in 1, 2 and 3 spatial
dimensions, with every padding form and padding mode."""

from dataclasses import dataclass
from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose


@dataclass
class Geometry:
    """Per-axis kernel, stride, dilation and padding of one convolution, and an input size
    that keeps every window inside the (padded) input."""

    kernel: list[int]
    stride: list[int]
    dilation: list[int]
    padding: Any
    sizes: list[int]

    @staticmethod
    def compact(values: list[int]) -> Any:
        """An int when every axis agrees (sometimes), else a tuple: both spellings are API."""
        if len(set(values)) == 1 and random_bool():
            return values[0]
        return tuple(values)


def _conv_geometry(dims: int, mode: str = "zeros", max_kernel: int = 4) -> Geometry:
    kernel = [int(random(1, max_kernel)) for _ in range(dims)]
    dilation = [int(random(1, 3)) for _ in range(dims)]
    effective = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    style = choose("int", "same", "valid")
    stride = [1] * dims if style == "same" else [int(random(1, 3)) for _ in range(dims)]
    if style == "int":
        pads = [int(random(0, k // 2 + 2)) for k in effective]
        padding: Any = Geometry.compact(pads)
        needed = [max(1, e - 2 * p) for e, p in zip(effective, pads, strict=True)]
        widest = pads
    else:
        padding = style
        needed = [1] * dims if style == "same" else effective
        # "same" pads (e - 1) in total, the larger half on the right.
        widest = [(e - 1) - (e - 1) // 2 if style == "same" else 0 for e in effective]
    if mode == "reflect":
        needed = [max(n, w + 1) for n, w in zip(needed, widest, strict=True)]
    elif mode == "circular":
        needed = [max(n, w) for n, w in zip(needed, widest, strict=True)]
    sizes = [n + int(random(0, 3)) for n in needed]
    return Geometry(kernel, stride, dilation, padding, sizes)


def _channels(max_per_group: int = 3) -> tuple[int, int, int]:
    groups = int(random(1, 3))
    return (groups, groups * int(random(1, max_per_group)),
            groups * int(random(1, max_per_group)))


def _conv_module(torch: Any, dims: int, max_kernel: int, max_per_group: int) -> Any:
    mode = choose("zeros", "reflect", "replicate", "circular")
    geo = _conv_geometry(dims, mode, max_kernel)
    groups, c_in, c_out = _channels(max_per_group)
    conv = getattr(torch.nn, f"Conv{dims}d")(
        c_in, c_out, Geometry.compact(geo.kernel), stride=Geometry.compact(geo.stride),
        padding=geo.padding, dilation=Geometry.compact(geo.dilation),
        groups=groups if groups > 1 else oneof(1, nothing()),
        bias=random_bool() | nothing(), padding_mode=mode if mode != "zeros" else nothing())
    batch = [int(random(1, 3))] if dims == 3 or random_bool() else []
    x = random_tensor(shape=[*batch, c_in, *geo.sizes], low=-2, high=2)
    return conv(x)


@autotest(n=16, ops=["torch.nn.Conv1d"])
def conv1d_module(torch: Any) -> Any:
    return _conv_module(torch, 1, max_kernel=5, max_per_group=4)


@autotest(n=16, ops=["torch.nn.Conv2d"])
def conv2d_module(torch: Any) -> Any:
    return _conv_module(torch, 2, max_kernel=4, max_per_group=3)


@autotest(n=10, ops=["torch.nn.Conv3d"])
def conv3d_module(torch: Any) -> Any:
    return _conv_module(torch, 3, max_kernel=3, max_per_group=2)


@autotest(n=16, ops=["torch.nn.functional.conv1d", "torch.nn.functional.conv2d",
                     "torch.nn.functional.conv3d"])
def conv_functional(torch: Any) -> Any:
    dims = int(random(1, 4))
    geo = _conv_geometry(dims, max_kernel=4 if dims < 3 else 3)
    groups, c_in, c_out = _channels(3 if dims < 3 else 2)
    x = random_tensor(shape=[int(random(1, 3)), c_in, *geo.sizes], low=-2, high=2)
    weight = random_tensor(shape=[c_out, c_in // groups, *geo.kernel], low=-1, high=1)
    bias = oneof(random_tensor(shape=[c_out], low=-1, high=1), None) | nothing()
    conv = getattr(torch.nn.functional, f"conv{dims}d")
    return conv(x, weight, bias=bias, stride=Geometry.compact(geo.stride), padding=geo.padding,
                dilation=Geometry.compact(geo.dilation), groups=groups)


def _transpose_geometry(dims: int, max_kernel: int) -> tuple[dict[str, Any], list[int]]:
    """ConvTranspose keyword arguments and an input size whose output is not empty."""
    kernel = [int(random(1, max_kernel)) for _ in range(dims)]
    stride = [int(random(1, 4)) for _ in range(dims)]
    dilation = [int(random(1, 3)) for _ in range(dims)]
    padding = [int(random(0, 3)) for _ in range(dims)]
    # output_padding must stay below stride or dilation.
    extra = [int(random(0, max(s, d))) for s, d in zip(stride, dilation, strict=True)]
    sizes = []
    for k, s, d, p, o in zip(kernel, stride, dilation, padding, extra, strict=True):
        shortfall = 2 * p - d * (k - 1) - o  # output is (L - 1) * s - shortfall + 1
        sizes.append(max(1, 1 + -(-shortfall // s)) + int(random(0, 2)))
    kwargs = {"stride": Geometry.compact(stride), "padding": Geometry.compact(padding),
              "output_padding": Geometry.compact(extra), "dilation": Geometry.compact(dilation)}
    return {"kernel_size": Geometry.compact(kernel), **kwargs}, sizes


@autotest(n=16, ops=["torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d",
                     "torch.nn.ConvTranspose3d"])
def conv_transpose_module(torch: Any) -> Any:
    dims = int(random(1, 4))
    kwargs, sizes = _transpose_geometry(dims, max_kernel=4 if dims < 3 else 3)
    groups, c_in, c_out = _channels(3 if dims < 3 else 2)
    conv = getattr(torch.nn, f"ConvTranspose{dims}d")(
        c_in, c_out, kwargs.pop("kernel_size"), groups=groups, bias=random_bool() | nothing(),
        **kwargs)
    batch = [int(random(1, 3))] if dims == 3 or random_bool() else []
    return conv(random_tensor(shape=[*batch, c_in, *sizes], low=-2, high=2))


@autotest(n=14, ops=["torch.nn.functional.conv_transpose1d",
                     "torch.nn.functional.conv_transpose2d",
                     "torch.nn.functional.conv_transpose3d"])
def conv_transpose_functional(torch: Any) -> Any:
    dims = int(random(1, 4))
    kwargs, sizes = _transpose_geometry(dims, max_kernel=4 if dims < 3 else 3)
    kernel = kwargs.pop("kernel_size")
    kernel = [kernel] * dims if isinstance(kernel, int) else list(kernel)
    groups, c_in, c_out = _channels(3 if dims < 3 else 2)
    x = random_tensor(shape=[int(random(1, 3)), c_in, *sizes], low=-2, high=2)
    weight = random_tensor(shape=[c_in, c_out // groups, *kernel], low=-1, high=1)
    bias = oneof(random_tensor(shape=[c_out], low=-1, high=1), None) | nothing()
    conv = getattr(torch.nn.functional, f"conv_transpose{dims}d")
    return conv(x, weight, bias=bias, groups=groups, **kwargs)


@autotest(n=10, backward=False, raises=True, ops=["torch.nn.functional.conv1d",
                                                  "torch.nn.functional.conv2d",
                                                  "torch.nn.Conv2d"])
def conv_kernel_too_big(torch: Any) -> Any:
    dims = int(random(1, 3))
    padding = int(random(0, 2))
    sizes = [int(random(1, 4)) for _ in range(dims)]
    # One axis whose kernel is wider than the padded input.
    axis = int(random(0, dims))
    kernel = [int(random(1, s + 2 * padding + 1)) for s in sizes]
    kernel[axis] = sizes[axis] + 2 * padding + int(random(1, 3))
    x = random_tensor(shape=[1, 2, *sizes], low=-1, high=1)
    if dims == 2 and random_bool():
        return torch.nn.Conv2d(2, 3, tuple(kernel), padding=padding)(x)
    weight = random_tensor(shape=[3, 2, *kernel], low=-1, high=1)
    return getattr(torch.nn.functional, f"conv{dims}d")(x, weight, padding=padding)


@autotest(n=10, backward=False, raises=True, ops=["torch.nn.Conv1d", "torch.nn.Conv2d",
                                                  "torch.nn.functional.conv2d"])
def conv_groups_mismatch(torch: Any) -> Any:
    groups = int(random(2, 4))
    good = groups * int(random(1, 3))
    bad = good + int(random(1, groups))
    which = int(random(0, 3))
    if which == 0:
        return torch.nn.Conv1d(bad, good, 1, groups=groups)
    if which == 1:
        return torch.nn.Conv2d(good, bad, 1, groups=groups)
    # The input's channels disagree with weight channels times groups.
    x = random_tensor(shape=[1, bad, 3, 3], low=-1, high=1)
    weight = random_tensor(shape=[good, 1, 1, 1], low=-1, high=1)
    return torch.nn.functional.conv2d(x, weight, groups=groups)
