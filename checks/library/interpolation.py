"""Resampling: F.interpolate and nn.Upsample in every mode, by size or by (non-integer) scale
factor, and pixel (un)shuffle."""

from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose

# Mode -> the spatial dimensions it accepts.
MODES: dict[str, tuple[int, ...]] = {
    "nearest": (1, 2, 3), "nearest-exact": (1, 2, 3), "area": (1, 2, 3),
    "linear": (1,), "bilinear": (2,), "bicubic": (2,), "trilinear": (3,),
}
LINEAR_FAMILY = ("linear", "bilinear", "bicubic", "trilinear")


def _resize_arguments(dims: int, sizes: list[int]) -> dict[str, Any]:
    """Either size= or scale_factor= (with recompute_scale_factor); one value or one per axis.
    Inputs are at least 2 wide, so a scale of 0.6 still leaves one output element."""
    per_axis = dims > 1 and random_bool()
    if random_bool():
        targets = [int(random(1, 2 * s + 2)) for s in sizes]
        return {"size": tuple(targets) if per_axis else targets[0] if dims == 1 else
                oneof(targets[0], tuple(targets))}
    scales = [choose(random(0.6, 2.5), float(int(random(1, 4))), 0.5 * int(random(2, 6)))
              for _ in range(dims)]
    return {"scale_factor": tuple(scales) if per_axis else scales[0],
            "recompute_scale_factor": oneof(True, False, None) | nothing()}


def _image(dims: int, low: float = -2.0, high: float = 2.0) -> tuple[Any, list[int]]:
    sizes = [int(random(2, 6 if dims < 3 else 4)) for _ in range(dims)]
    shape = [int(random(1, 3)), int(random(1, 3)), *sizes]
    return random_tensor(shape=shape, low=low, high=high), sizes


@autotest(n=16, ops=["torch.nn.functional.interpolate"])
def interpolate_nearest(torch: Any) -> Any:
    mode = choose("nearest", "nearest-exact", "area")
    dims = int(random(1, 4))
    x, sizes = _image(dims)
    kwargs = _resize_arguments(dims, sizes)
    if mode != "nearest" or random_bool():
        kwargs["mode"] = mode
    return torch.nn.functional.interpolate(x, **kwargs)


@autotest(n=20, ops=["torch.nn.functional.interpolate"])
def interpolate_linear(torch: Any) -> Any:
    mode = choose(*LINEAR_FAMILY)
    dims = MODES[mode][0]
    x, sizes = _image(dims)
    kwargs = _resize_arguments(dims, sizes)
    kwargs["align_corners"] = random_bool() | nothing()
    if mode in ("bilinear", "bicubic") and random_bool():
        kwargs["antialias"] = True
    return torch.nn.functional.interpolate(x, mode=mode, **kwargs)


@autotest(n=14, ops=["torch.nn.Upsample", "torch.nn.UpsamplingNearest2d",
                     "torch.nn.UpsamplingBilinear2d"])
def upsample_module(torch: Any) -> Any:
    which = int(random(0, 3))
    if which == 0:
        mode = choose("nearest", "linear", "bilinear", "bicubic", "trilinear")
        dims = choose(*MODES[mode])
        x, sizes = _image(dims)
        kwargs = _resize_arguments(dims, sizes)
        if mode in LINEAR_FAMILY:
            kwargs["align_corners"] = random_bool() | nothing()
        return torch.nn.Upsample(mode=mode, **kwargs)(x)
    x, sizes = _image(2)
    kwargs = ({"size": tuple(int(random(1, 2 * s + 2)) for s in sizes)} if random_bool()
              else {"scale_factor": oneof(2, 3, 1.5)})
    if which == 1:
        return torch.nn.UpsamplingNearest2d(**kwargs)(x)
    return torch.nn.UpsamplingBilinear2d(**kwargs)(x)


@autotest(n=12, ops=["torch.nn.functional.pixel_shuffle", "torch.nn.functional.pixel_unshuffle",
                     "torch.nn.PixelShuffle", "torch.nn.PixelUnshuffle"])
def pixel_shuffle(torch: Any) -> Any:
    r, c = int(random(1, 4)), int(random(1, 3))
    h, w = int(random(1, 4)), int(random(1, 4))
    batch = [int(random(1, 3)) for _ in range(int(random(0, 3)))]
    if random_bool():
        x = random_tensor(shape=[*batch, c * r * r, h, w], low=-2, high=2)
        if random_bool():
            return torch.nn.PixelShuffle(r)(x)
        return torch.nn.functional.pixel_shuffle(x, r)
    x = random_tensor(shape=[*batch, c, h * r, w * r], low=-2, high=2)
    if random_bool():
        return torch.nn.PixelUnshuffle(r)(x)
    return torch.nn.functional.pixel_unshuffle(x, r)
