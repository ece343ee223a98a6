"""checks/opinfo/seeding.py: the databases' inputs drawn from the CPU generator alone."""

from __future__ import annotations

import traceback
import unittest
from typing import Any

import pytest
import torch

from alignbot.checks.opinfo.seeding import cpu_seeded, running_test


def test_the_block_draws_what_a_manual_seed_draws_and_the_caller_keeps_its_stream() -> None:
    torch.manual_seed(123)
    expected_outside = torch.rand(4)
    torch.manual_seed(7)
    expected_inside = torch.rand(3), torch.rand(2)
    torch.manual_seed(5)
    expected_reseeded = torch.rand(2)

    torch.manual_seed(123)
    with cpu_seeded(torch, 7):
        inside = torch.rand(3), torch.rand(2)
        torch.manual_seed(5)  # as the databases' iterators call it before every sample
        reseeded = torch.rand(2)
    outside = torch.rand(4)
    assert all(torch.equal(a, b) for a, b in zip(inside, expected_inside, strict=True))
    assert torch.equal(reseeded, expected_reseeded)
    assert torch.equal(outside, expected_outside)


def test_seeding_within_formats_no_stack_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """What makes it worth having: torch.manual_seed formats stack traces for the devices
    it queues the seed for (three a call before CUDA, XPU and MTIA start)."""
    calls: list[int] = []
    real = traceback.format_stack

    def counted(*args: Any, **kwargs: Any) -> list[str]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(traceback, "format_stack", counted)
    torch.manual_seed(1)
    outside = len(calls)
    with cpu_seeded(torch, 0):
        for seed in range(10):
            torch.manual_seed(seed)
    assert len(calls) == outside, "seeding within the block formatted stack traces"


def test_manual_seed_and_the_state_are_restored_when_the_block_raises() -> None:
    original = torch.manual_seed
    torch.manual_seed(11)
    expected = torch.rand(2)
    torch.manual_seed(11)
    with pytest.raises(ValueError), cpu_seeded(torch, 3):
        torch.rand(5)
        raise ValueError("a sample generator failed")
    assert torch.manual_seed is original
    assert torch.equal(torch.rand(2), expected)


class SeededInputs(unittest.TestCase):
    """A unittest test, as PyTorch's own OpInfo tests are: the databases seed by its name."""

    __test__ = False  # run by the test below, not collected

    def test_inputs(self) -> None:
        from torch.testing._internal import common_utils

        self.found = common_utils.extract_test_fn(), running_test()


def test_the_running_test_is_the_one_torch_finds() -> None:
    from torch.testing._internal import common_utils

    case = SeededInputs("test_inputs")
    case.run()
    assert case.found[0] is SeededInputs.test_inputs and case.found[1] is case.found[0]
    assert common_utils.extract_test_fn() is None and running_test() is None
    with cpu_seeded(torch, 0):
        assert common_utils.extract_test_fn is running_test
    assert common_utils.extract_test_fn is not running_test
