"""Sizes that cross a kernel's tiles and vectors (16 + 1, 32 + 1, 64 + 1 elements, one more
than a power of two), and half-precision reductions over thousands of elements, where a
kernel that accumulates in float16 or bfloat16 drifts far from one that accumulates in
float32. Inputs may be non-contiguous (transposed, strided, expanded)."""

from typing import Any

from alignbot.checks import autotest, oneof, random, random_dtype, random_tensor
from alignbot.checks.library import choose

TILES = (17, 33, 65, 16, 129)  # one past a tile first; a whole tile for contrast
LONG = (4097, 2049, 1500)
LAYOUTS = ["transposed", "strided", "broadcast"]


@autotest(n=12, ops=["torch.cumsum", "torch.sum", "torch.softmax", "torch.add", "torch.mul",
                     "torch.exp", "torch.amax", "torch.Tensor.cumsum"])
def tile_crossing(torch: Any) -> Any:
    rows = oneof(1, 3)
    x = random_tensor(shape=[rows, oneof(*TILES)], low=-2, high=2,
                      dtype=random_dtype("float32", "float16", "bfloat16", "float64"),
                      layout=LAYOUTS)
    dim = random(-2, 2)
    return choose(
        lambda: torch.cumsum(x, dim=dim),
        lambda: torch.sum(x, dim=dim),
        lambda: torch.softmax(x, dim=dim),
        lambda: torch.add(x, x.flip(-1)),
        lambda: torch.mul(x, 0.5) + torch.exp(x),
        lambda: torch.amax(x, dim=dim),
    )()


@autotest(n=10, ops=["torch.sum", "torch.mean", "torch.Tensor.sum", "torch.cumsum",
                     ])
def long_half_reductions(torch: Any) -> Any:
    # values in [0, 1): a float16 running sum of 4097 of them passes 2048, where float16's
    # step is 2, so a kernel that accumulates in float16 loses most of every addend
    dtype = random_dtype("float16", "bfloat16")
    n = oneof(*LONG)
    x = random_tensor(shape=[n], low=0, high=1, dtype=dtype, layout=["strided"])
    return choose(
        lambda: torch.sum(x),
        lambda: x.sum(),
        lambda: torch.mean(x),
        lambda: torch.sum(x.reshape(1, -1), dim=1),
        lambda: torch.cumsum(x, dim=0)[-1:],
    )()
