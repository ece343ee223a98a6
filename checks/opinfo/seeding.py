"""Seeding torch's CPU generator while PyTorch's testing databases make inputs.

``torch.manual_seed`` seeds every device; before a device's runtime is started it queues
the seed for it with a formatted stack trace (CUDA, XPU and MTIA: three traces a call), and
the databases' sample iterators reseed before every sample. Measured on 40 OpInfo specs
(2026-12-05): 5.4 s of 8.5 s drawing them went to those traces. The inputs are made on the
CPU, so seeding the CPU generator is all that the call does for them; the caller's CPU random
state is restored afterwards, as ``torch.random.fork_rng`` does, and no device is seeded."""

from __future__ import annotations

from collections.abc import Iterator
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

    state = generator.get_state()
    torch.manual_seed = manual_seed
    try:
        generator.manual_seed(seed)
        yield
    finally:
        torch.manual_seed = original
        generator.set_state(state)
