"""Max, average, adaptive and power-average pooling in 1, 2 and 3 spatial dimensions."""

from typing import Any

from alignbot.checks import autotest, nothing, random, random_bool, random_tensor
from alignbot.checks.library import choose


def _compact(values: list[Any]) -> Any:
    if len(set(values)) == 1 and random_bool():
        return values[0]
    return tuple(values)


def _pooled_size(size: int, kernel: int, stride: int, padding: int, dilation: int,
                 ceil_mode: bool) -> int:
    """The output length torch computes for one axis."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1  # the last window must start inside the input or the left padding
    return out


def _every_window_touches_input(size: int, kernel: int, stride: int, padding: int,
                                dilation: int, ceil_mode: bool) -> bool:
    """Whether each window has a tap on a real element. A dilated window can fall wholly in
    the padding; torch 2.13 then returns -inf with an out-of-range index, and max pooling's
    backward writes out of bounds and corrupts the heap."""
    for window in range(_pooled_size(size, kernel, stride, padding, dilation, ceil_mode)):
        start = window * stride - padding
        if not any(0 <= start + tap * dilation < size for tap in range(kernel)):
            return False
    return True


def _windows(dims: int, dilated: bool, pad_first: bool = False
             ) -> tuple[dict[str, Any], list[int]]:
    """Pooling keyword arguments (padding at most half the kernel, as torch requires) and an
    input size whose every window holds at least one input element. ``pad_first`` makes the
    widest padding the first choice (the draw's lower bound)."""
    kernel = [int(random(1, 4)) for _ in range(dims)]
    given_stride = bool(random_bool())
    stride = [int(random(1, 4)) for _ in range(dims)] if given_stride else kernel
    padding = [k // 2 - int(random(0, k // 2 + 1)) if pad_first else int(random(0, k // 2 + 1))
               for k in kernel]
    dilation = [int(random(1, 3)) if dilated else 1 for _ in range(dims)]
    ceil_mode = bool(random_bool())
    sizes = [max(1, d * (k - 1) + 1 - 2 * p) + int(random(0, 3))
             for k, d, p in zip(kernel, dilation, padding, strict=True)]
    for axis in range(dims):
        # Undilated windows always touch the input; fall back to that where needed.
        if not _every_window_touches_input(sizes[axis], kernel[axis], stride[axis],
                                           padding[axis], dilation[axis], ceil_mode):
            dilation[axis] = 1
            sizes[axis] = max(sizes[axis], kernel[axis] - 2 * padding[axis])
    kwargs: dict[str, Any] = {"kernel_size": _compact(kernel),
                              "stride": _compact(stride) if given_stride else nothing(),
                              "padding": _compact(padding) if any(padding) else nothing(),
                              "ceil_mode": ceil_mode if ceil_mode or random_bool() else nothing()}
    if dilated and any(d > 1 for d in dilation):
        kwargs["dilation"] = _compact(dilation)
    return kwargs, sizes


def _input(dims: int, sizes: list[int], low: float = -3.0, high: float = 3.0) -> Any:
    # Batched inputs, the common form, in two draws of three (3-d pooling always has one).
    batched = dims == 3 or int(random(0, 3)) < 2
    batch = [int(random(1, 3))] if batched else []
    return random_tensor(shape=[*batch, int(random(1, 3)), *sizes], low=low, high=high)


@autotest(n=20, ops=["torch.nn.functional.max_pool1d", "torch.nn.functional.max_pool2d",
                     "torch.nn.functional.max_pool3d", "torch.nn.MaxPool1d", "torch.nn.MaxPool2d",
                     "torch.nn.MaxPool3d"])
def max_pool(torch: Any) -> Any:
    dims = int(random(1, 4))
    kwargs, sizes = _windows(dims, dilated=True)
    x = _input(dims, sizes)
    indices = random_bool()
    if random_bool():
        module = getattr(torch.nn, f"MaxPool{dims}d")(return_indices=indices, **kwargs)
        out = module(x)
    else:
        pool = getattr(torch.nn.functional, f"max_pool{dims}d")
        out = pool(x, return_indices=indices, **kwargs)
    return tuple(out) if indices else out


@autotest(n=10, ops=["torch.nn.functional.max_unpool2d", "torch.nn.MaxUnpool2d"])
def max_unpool(torch: Any) -> Any:
    kernel = int(random(1, 4))
    stride = int(random(1, kernel + 1))
    sizes = [kernel + int(random(0, 4)) for _ in range(2)]
    shape = [int(random(1, 3)), int(random(1, 3)), *sizes]
    x = random_tensor(shape=shape, low=-3, high=3)
    pooled, indices = torch.nn.functional.max_pool2d(x, kernel, stride, return_indices=True)
    if random_bool():
        return torch.nn.MaxUnpool2d(kernel, stride)(pooled, indices, output_size=shape)
    return torch.nn.functional.max_unpool2d(pooled, indices, kernel, stride=stride,
                                            output_size=sizes)


def _register_avg_pool(dims: int) -> None:
    """One spec per dimensionality, so each is drawn on every run."""

    def spec(torch: Any) -> Any:
        # Padded windows first: count_include_pad and divisor_override decide their divisor.
        kwargs, sizes = _windows(dims, dilated=False, pad_first=True)
        if dims == 3:
            # avg_pool3d, unlike 1d/2d, wants the unpadded input to hold a whole kernel.
            kernel = kwargs["kernel_size"]
            sizes = [max(s, k) for s, k in zip(sizes, [kernel] * 3 if isinstance(kernel, int)
                                                  else kernel, strict=True)]
        kwargs["count_include_pad"] = nothing() | random_bool()
        if dims > 1:
            kwargs["divisor_override"] = random(1, 5) | nothing()
        x = _input(dims, sizes)
        if random_bool():
            return getattr(torch.nn, f"AvgPool{dims}d")(**kwargs)(x)
        return getattr(torch.nn.functional, f"avg_pool{dims}d")(x, **kwargs)

    spec.__name__ = spec.__qualname__ = f"avg_pool{dims}d"
    autotest(n=14, ops=[f"torch.nn.functional.avg_pool{dims}d", f"torch.nn.AvgPool{dims}d"])(spec)


for _dims in (1, 2, 3):
    _register_avg_pool(_dims)


def _adaptive_output(dims: int, sizes: list[int]) -> Any:
    """Output sizes that divide the input, that do not, and that exceed it; None keeps an
    axis."""
    out: list[int | None] = [choose(s, max(1, s // 2), int(random(1, s + 2))) for s in sizes]
    if dims > 1 and random_bool():
        out[int(random(0, dims))] = None
    return out[0] if dims == 1 else _compact(out) if None not in out else tuple(out)


@autotest(n=20, ops=["torch.nn.functional.adaptive_avg_pool1d",
                     "torch.nn.functional.adaptive_avg_pool2d",
                     "torch.nn.functional.adaptive_avg_pool3d",
                     "torch.nn.functional.adaptive_max_pool1d",
                     "torch.nn.functional.adaptive_max_pool2d", "torch.nn.AdaptiveAvgPool2d",
                     "torch.nn.AdaptiveMaxPool2d"])
def adaptive_pool(torch: Any) -> Any:
    dims = int(random(1, 4))
    sizes = [int(random(1, 7 if dims < 3 else 5)) for _ in range(dims)]
    output_size = _adaptive_output(dims, sizes)
    x = _input(dims, sizes)
    use_max = dims < 3 and random_bool()
    if not use_max:
        if random_bool():
            return getattr(torch.nn, f"AdaptiveAvgPool{dims}d")(output_size)(x)
        return getattr(torch.nn.functional, f"adaptive_avg_pool{dims}d")(x, output_size)
    indices = random_bool()
    if random_bool():
        result = getattr(torch.nn, f"AdaptiveMaxPool{dims}d")(output_size,
                                                              return_indices=indices)(x)
    else:
        pool = getattr(torch.nn.functional, f"adaptive_max_pool{dims}d")
        result = pool(x, output_size, return_indices=indices)
    return tuple(result) if indices else result


def _register_adaptive_max(dims: int) -> None:
    """Adaptive max pooling with and without indices, one spec per dimensionality."""

    def spec(torch: Any) -> Any:
        sizes = [int(random(1, 7)) for _ in range(dims)]
        output_size = _adaptive_output(dims, sizes)
        x = _input(dims, sizes)
        if random_bool():
            module = getattr(torch.nn, f"AdaptiveMaxPool{dims}d")
            values = module(output_size)(x)
            pooled, indices = module(output_size, return_indices=True)(x)
        else:
            pool = getattr(torch.nn.functional, f"adaptive_max_pool{dims}d")
            values = pool(x, output_size)
            pooled, indices = pool(x, output_size, return_indices=True)
        return values, pooled, indices

    spec.__name__ = spec.__qualname__ = f"adaptive_max_pool{dims}d"
    autotest(n=10, ops=[f"torch.nn.functional.adaptive_max_pool{dims}d",
                        f"torch.nn.AdaptiveMaxPool{dims}d"])(spec)


for _dims in (1, 2):
    _register_adaptive_max(_dims)


@autotest(n=14, ops=["torch.nn.functional.lp_pool1d", "torch.nn.functional.lp_pool2d",
                     "torch.nn.LPPool2d"])
def lp_pool(torch: Any) -> Any:
    dims = int(random(1, 3))
    kernel = [int(random(1, 4)) for _ in range(dims)]
    sizes = [k + int(random(0, 3)) for k in kernel]
    # Positive inputs: the p-th root's gradient is undefined at a zero window sum.
    x = _input(dims, sizes, low=0.2, high=2.0)
    norm = choose(1, 2, 3, 1.5)
    stride = _compact([int(random(1, 3)) for _ in range(dims)]) if random_bool() else nothing()
    kernel_size = kernel[0] if dims == 1 else _compact(kernel)
    ceil_mode = random_bool() | nothing()
    if dims == 2 and random_bool():
        return torch.nn.LPPool2d(norm, kernel_size, stride=stride, ceil_mode=ceil_mode)(x)
    pool = getattr(torch.nn.functional, f"lp_pool{dims}d")
    return pool(x, norm, kernel_size, stride=stride, ceil_mode=ceil_mode)
