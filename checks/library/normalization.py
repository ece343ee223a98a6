"""Normalization layers: batch, instance, layer, group and RMS norm (running statistics
included), local response norm and F.normalize."""

import math
from typing import Any

from alignbot.checks import autotest, nothing, oneof, random, random_bool, random_tensor
from alignbot.checks.library import choose

# Each normalized group holds at least this many values. With one or two the normalized
# output is (nearly) constant and its gradient is rounding noise, not a property of the op.
MIN_GROUP = 3


def _spatial(dims: int, low: int = 1, high: int = 4) -> list[int]:
    return [int(random(low, high)) for _ in range(dims)]


def _batch_for(spatial: list[int], low: int = 1, high: int = 4) -> int:
    """A batch size that gives each channel at least MIN_GROUP values."""
    return max(int(random(low, high)), -(-MIN_GROUP // math.prod(spatial)))


@autotest(n=16, ops=["torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d"])
def batch_norm(torch: Any) -> Any:
    """Two training steps (running statistics and num_batches_tracked are compared after each),
    then one evaluation step."""
    dims = int(random(1, 4))
    channels = random(1, 4)
    spatial = _spatial(int(random(0, 2)) if dims == 1 else dims, high=4 if dims < 3 else 3)
    shape = [_batch_for(spatial), channels, *spatial]
    track = random_bool() | nothing()
    norm = getattr(torch.nn, f"BatchNorm{dims}d")(
        channels, eps=oneof(1e-5, 1e-3, 0.1) | nothing(),
        momentum=oneof(0.1, 0.5, None) | nothing(), affine=random_bool() | nothing(),
        track_running_stats=track)
    first = norm(random_tensor(shape=shape, low=-2, high=3))
    second = norm(random_tensor(shape=shape, low=-1, high=1) * 2 + 1)
    norm.eval()
    third = norm(random_tensor(shape=shape, low=-2, high=2))
    return first, second, third


@autotest(n=12, ops=["torch.nn.functional.batch_norm"])
def batch_norm_functional(torch: Any) -> Any:
    channels = random(1, 4)
    spatial = _spatial(int(random(0, 3)))
    shape = [_batch_for(spatial), channels, *spatial]
    x = random_tensor(shape=shape, low=-2, high=2)
    mean = random_tensor(shape=[channels], low=-0.5, high=0.5, requires_grad=False)
    var = random_tensor(shape=[channels], low=0.5, high=2, requires_grad=False)
    weight = oneof(random_tensor(shape=[channels], low=0.5, high=1.5), None) | nothing()
    bias = oneof(random_tensor(shape=[channels], low=-1, high=1), None) | nothing()
    out = torch.nn.functional.batch_norm(
        x, mean, var, weight=weight, bias=bias, training=random_bool() | nothing(),
        momentum=random(0.0, 1.0) | nothing(), eps=oneof(1e-5, 0.01) | nothing())
    # Training updates the running statistics in place: read them back so they are compared.
    return out, mean * 1, var * 1


@autotest(n=16, ops=["torch.nn.LayerNorm", "torch.nn.functional.layer_norm"])
def layer_norm(torch: Any) -> Any:
    shape = _spatial(int(random(1, 4)), low=1, high=5)
    normalized = shape[len(shape) - int(random(1, len(shape) + 1)):]
    if math.prod(normalized) < MIN_GROUP:
        shape, normalized = [*shape, MIN_GROUP], [*normalized, MIN_GROUP]
    x = random_tensor(shape=shape, low=-2, high=3)
    eps = oneof(1e-5, 1e-3, 0.5) | nothing()
    if random_bool():
        weight = oneof(random_tensor(shape=normalized, low=0.5, high=1.5), None) | nothing()
        bias = oneof(random_tensor(shape=normalized, low=-1, high=1), None) | nothing()
        return torch.nn.functional.layer_norm(x, normalized, weight=weight, bias=bias, eps=eps)
    norm = torch.nn.LayerNorm(normalized if len(normalized) > 1 or random_bool()
                              else normalized[0], eps=eps,
                              elementwise_affine=random_bool() | nothing(),
                              bias=random_bool() | nothing())
    return norm(x)


@autotest(n=14, ops=["torch.nn.GroupNorm", "torch.nn.functional.group_norm"])
def group_norm(torch: Any) -> Any:
    groups = int(random(1, 4))
    channels = groups * int(random(1, 3))
    batch, spatial = int(random(1, 3)), _spatial(int(random(0, 3)))
    if (channels // groups) * math.prod(spatial) < MIN_GROUP:
        spatial.append(MIN_GROUP)
    x = random_tensor(shape=[batch, channels, *spatial], low=-2, high=3)
    eps = oneof(1e-5, 0.01) | nothing()
    if random_bool():
        # Weight and bias together or not at all: torch 2.13's backward fails ("tensor does
        # not have a device") for a bias without a weight.
        if random_bool():
            return torch.nn.functional.group_norm(x, groups, eps=eps)
        weight = random_tensor(shape=[channels], low=0.5, high=1.5)
        bias = random_tensor(shape=[channels], low=-1, high=1)
        return torch.nn.functional.group_norm(x, groups, weight, bias, eps=eps)
    return torch.nn.GroupNorm(groups, channels, eps=eps, affine=random_bool() | nothing())(x)


@autotest(n=14, ops=["torch.nn.InstanceNorm1d", "torch.nn.InstanceNorm2d",
                     "torch.nn.functional.instance_norm"])
def instance_norm(torch: Any) -> Any:
    dims = int(random(1, 3))
    channels = random(1, 4)
    spatial = [int(random(MIN_GROUP, 5)), *_spatial(dims - 1)]
    batch = [int(random(1, 3))] if random_bool() else []
    shape = [*batch, channels, *spatial]
    if random_bool():
        x = random_tensor(shape=[2, *shape[-dims - 1:]], low=-2, high=2)
        return torch.nn.functional.instance_norm(x, eps=oneof(1e-5, 0.1) | nothing())
    norm = getattr(torch.nn, f"InstanceNorm{dims}d")(
        channels, eps=oneof(1e-5, 0.1) | nothing(), momentum=oneof(0.1, 0.7) | nothing(),
        affine=random_bool() | nothing(), track_running_stats=random_bool() | nothing())
    first = norm(random_tensor(shape=shape, low=-2, high=3))
    second = norm(random_tensor(shape=shape, low=-1, high=1))
    norm.eval()
    return first, second, norm(random_tensor(shape=shape, low=-2, high=2))


@autotest(n=12, ops=["torch.nn.RMSNorm", "torch.nn.functional.rms_norm"])
def rms_norm(torch: Any) -> Any:
    shape = _spatial(int(random(1, 4)), low=1, high=5)
    normalized = shape[len(shape) - int(random(1, len(shape) + 1)):]
    x = random_tensor(shape=shape, low=-2, high=2)
    eps = oneof(1e-6, 0.01, None) | nothing()
    if random_bool():
        weight = oneof(random_tensor(shape=normalized, low=0.5, high=1.5), None) | nothing()
        return torch.nn.functional.rms_norm(x, normalized, weight=weight, eps=eps)
    return torch.nn.RMSNorm(normalized, eps=eps, elementwise_affine=random_bool() | nothing())(x)


@autotest(n=14, ops=["torch.nn.functional.normalize", "torch.nn.LocalResponseNorm",
                     "torch.nn.functional.local_response_norm"])
def normalize(torch: Any) -> Any:
    shape = _spatial(int(random(1, 5)), low=1, high=5)
    # Bounded away from zero: the norm's gradient is undefined there.
    x = random_tensor(shape=shape, low=0.2, high=2) * choose(1, -1)
    if len(shape) >= 3 and random_bool():
        size = random(1, 5)
        alpha, beta, k = random(1e-4, 1.0), random(0.5, 1.0), random(0.5, 2.0)
        if random_bool():
            return torch.nn.LocalResponseNorm(size, alpha=alpha, beta=beta, k=k)(x)
        return torch.nn.functional.local_response_norm(x, size, alpha=alpha, beta=beta, k=k)
    # The default dim is 1, out of range for 1-d input.
    dim = random(-len(shape), len(shape)) | (nothing() if len(shape) > 1 else 0)
    return torch.nn.functional.normalize(x, p=oneof(1.0, 2.0, 3.0, float("inf")) | nothing(),
                                         dim=dim, eps=oneof(1e-12, 0.5) | nothing())
