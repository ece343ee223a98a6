"""Seeding torch's CPU generator while PyTorch's testing databases make inputs.

``torch.manual_seed`` seeds every device; before a device's runtime is started it queues
the seed for it with a formatted stack trace (CUDA, XPU and MTIA: three traces a call), and
the databases' sample iterators reseed before every sample. Measured on 40 OpInfo specs
(2026-12-05): 5.4 s of 8.5 s drawing them went to those traces. The inputs are made on the
CPU, so seeding the CPU generator is all that the call does for them; the caller's CPU random
state is restored afterwards, as ``torch.random.fork_rng`` does, and no device is seeded.

Each iterator also picks its seed from the unittest test running it, found by
``inspect.stack()``, which reads the source lines of every frame (1.0 s of the 2.8 s left);
within the block the same search walks the frames without reading any source."""

from __future__ import annotations

import sys
import unittest
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def cpu_seeded(torch: Any, seed: int) -> Iterator[None]:
    """Within the block torch's CPU generator starts from ``seed`` and ``torch.manual_seed``
    (also as the databases call it) seeds that generator alone; both are restored after."""
    original = torch.manual_seed
    generator = torch.default_generator

    def manual_seed(value: Any) -> Any:
        return generator.manual_seed(int(value))

    from torch.testing._internal import common_utils

    state = generator.get_state()
    searching = common_utils.extract_test_fn
    torch.manual_seed, common_utils.extract_test_fn = manual_seed, running_test
    try:
        generator.manual_seed(seed)
        yield
    finally:
        torch.manual_seed, common_utils.extract_test_fn = original, searching
        generator.set_state(state)


def running_test() -> Callable[..., Any] | None:
    """The test method of the innermost unittest test on the stack whose id names it, as
    ``common_utils.extract_test_fn`` finds it, or None."""
    frame: Any = sys._getframe(1)
    try:
        while frame is not None:
            test = frame.f_locals.get("self")
            if isinstance(test, unittest.TestCase):
                *_, cls_name, test_name = test.id().rsplit(".", 2)
                if cls_name == type(test).__name__ and test_name.startswith("test"):
                    found: Callable[..., Any] = getattr(test, test_name).__func__
                    return found
            frame = frame.f_back
    except Exception:  # as the original: a stack it cannot read holds no test
        pass
    return None
