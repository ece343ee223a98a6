"""fastops: a tiny kernel library that replaces a few torch ops (the demo's candidate).

``fastops.enable()`` swaps ``torch.nn.functional.softplus`` and ``torch.nn.functional.mish``
for hand-written versions with custom backward passes. This version is the demo's pull
request: "speed up the softplus backward", which forgets ``beta`` in the gradient, so values
agree while gradients do not whenever ``beta != 1``.
"""

from __future__ import annotations

from typing import Any

import torch

_ORIGINAL: dict[str, Any] = {}


class _Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, beta: float, threshold: float) -> torch.Tensor:
        scaled = x * beta
        out = torch.where(scaled > threshold, x, torch.log1p(torch.exp(scaled)) / beta)
        ctx.save_for_backward(x)
        ctx.beta, ctx.threshold = beta, threshold
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (x,) = ctx.saved_tensors
        scaled = x * ctx.beta
        sig = torch.sigmoid(x)  # the planted bug: should be sigmoid(x * beta)
        return torch.where(scaled > ctx.threshold, grad, grad * sig), None, None


def softplus(x: torch.Tensor, beta: float = 1.0, threshold: float = 20.0) -> torch.Tensor:
    return _Softplus.apply(x, beta, threshold)


def mish(x: torch.Tensor, inplace: bool = False) -> torch.Tensor:
    return x * torch.tanh(torch.nn.functional.softplus(x))


def enable() -> None:
    functional = torch.nn.functional
    _ORIGINAL.update(softplus=functional.softplus, mish=functional.mish)
    functional.softplus = softplus
    functional.mish = mish
