"""checks/layout.py: a view's shape and strides rebuilt from a contiguous literal."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
import torch

from alignbot.checks.layout import plan_layout


def rebuild(view: torch.Tensor) -> torch.Tensor | None:
    layout = plan_layout(list(view.shape), list(view.stride()))
    if layout is None:
        return None
    out = torch.from_numpy(layout.base_array(view.detach().numpy()))
    for name, args in layout.steps:
        out = getattr(out, name)(*args)
    return out


def same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape and strides, but for dimensions of size one (no kernel may read those)."""
    return a.shape == b.shape and all(
        x == y for x, y, n in zip(a.stride(), b.stride(), a.shape, strict=True) if n != 1)


X = torch.arange(4 * 5 * 6, dtype=torch.float32).reshape(4, 5, 6)
VIEWS: dict[str, Any] = {
    "transpose": lambda: X.transpose(0, 2),
    "narrow": lambda: X[:, 1:3],
    "steps": lambda: X[:, ::2, 1::3],
    "steps and a transpose": lambda: X.transpose(0, 1)[1:4, ::2, 2:],
    "select": lambda: X[:, 2],
    "permute then step": lambda: X.permute(2, 0, 1)[::2],
    "new axis": lambda: X[:, None, 1:4].transpose(0, 3),
    "expand": lambda: torch.randn(5, 1).expand(5, 4),
    "a scalar expanded": lambda: torch.tensor(2.0).expand(3, 2),
    "expand and transpose": lambda: torch.randn(3, 1, 4).expand(3, 5, 4).transpose(0, 2),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).contiguous(
        memory_format=torch.channels_last),
    "diagonal": lambda: torch.randn(4, 4).diagonal(),
    "column": lambda: torch.randn(4, 4)[:, 1],
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_view_is_rebuilt_with_its_values_and_strides(name: str) -> None:
    view = VIEWS[name]()
    assert not view.is_contiguous()
    rebuilt = rebuild(view)
    assert rebuilt is not None
    assert torch.equal(rebuilt, view)
    assert same_layout(rebuilt, view), (rebuilt.stride(), view.stride())
    assert rebuilt.is_contiguous() is False


@pytest.mark.parametrize("view", [
    torch.randn(3, 4), torch.randn(3, 1, 4)[:, :, :], torch.randn(1, 4).t(), torch.randn(0, 3).t(),
    torch.randn(5)[2:], torch.tensor(1.0),
])
def test_contiguous_and_empty_tensors_need_no_layout(view: torch.Tensor) -> None:
    assert plan_layout(list(view.shape), list(view.stride())) is None


def test_overlapping_windows_are_left_to_a_plain_literal() -> None:
    windows = torch.randn(10).unfold(0, 3, 2)  # each element read by two windows
    assert plan_layout(list(windows.shape), list(windows.stride())) is None


def test_random_slicings_of_random_blocks() -> None:
    rng = random.Random(0)
    checked = 0
    for _ in range(300):
        rank = rng.randint(1, 4)
        block = torch.randn([rng.randint(1, 6) for _ in range(rank)])
        index = tuple(slice(rng.randint(0, 1), None, rng.randint(1, 3)) for _ in range(rank))
        view = block[index]
        order = list(range(rank))
        rng.shuffle(order)
        view = view.permute(order)
        if rng.random() < 0.3:
            view = view.unsqueeze(rng.randint(0, rank))
            sizes = [n if n != 1 else rng.randint(1, 3) for n in view.shape]
            view = view.expand(sizes)
        if view.is_contiguous() or view.numel() == 0:
            assert plan_layout(list(view.shape), list(view.stride())) is None
            continue
        rebuilt = rebuild(view)
        assert rebuilt is not None, (view.shape, view.stride())
        assert torch.equal(rebuilt, view) and same_layout(rebuilt, view)
        checked += 1
    assert checked > 150


def test_gaps_in_the_base_are_zeros() -> None:
    view = torch.ones(4, 6)[:, ::3]
    layout = plan_layout(list(view.shape), list(view.stride()))
    assert layout is not None
    base = layout.base_array(view.numpy())
    assert base.sum() == view.numel() and base.size > view.numel()
    assert list(itertools.chain.from_iterable(base.tolist())).count(0.0) == base.size - 8
