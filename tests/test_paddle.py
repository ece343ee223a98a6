"""A real third-party candidate: Paddle's torch-compat mode, in its own interpreter (no torch).

`make test` builds that interpreter (.venv-paddle); elsewhere set ALIGNBOT_PADDLE_PYTHON.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from alignbot.checks import CandidateProcess, preset
from alignbot.checks.engine import check
from alignbot.checks.findings import Kind

PADDLE_PYTHON = os.environ.get("ALIGNBOT_PADDLE_PYTHON", "")

pytestmark = [
    pytest.mark.paddle,
    pytest.mark.skipif(not os.path.exists(PADDLE_PYTHON),
                       reason="set ALIGNBOT_PADDLE_PYTHON (make test does)"),
]


@pytest.fixture(scope="module")
def paddle_run(planted_specs: dict[str, Any]) -> Any:
    specs = [s for name, s in planted_specs.items()
             if name not in ("elu_crash", "selu_hang", "silu_missing")]
    with CandidateProcess(preset("paddle", python=PADDLE_PYTHON, timeout=60)) as candidate:
        result = check(specs, candidate, seed=3)
        version = candidate.version
    return result, version


@pytest.mark.slow
def test_paddle_worker_runs_paddle_without_torch(paddle_run: Any) -> None:
    _, version = paddle_run
    assert version == "3.3.1"


def test_paddle_compat_findings_are_real_and_named(paddle_run: Any) -> None:
    result, _ = paddle_run
    found = {(f.kind, f.op) for f in result.findings}
    # What Paddle 3.3.1's torch-compat mode lacks, found through the planted specs' clean ops.
    assert (Kind.MISSING_API, "torch.nn.BatchNorm2d") in found
    assert (Kind.MISSING_API, "torch.Tensor.relu") in found
    assert all(f.kind not in (Kind.CANDIDATE_CRASH, Kind.CANDIDATE_TIMEOUT)
               for f in result.findings)
    clean = {"softplus_scaled", "tanh_backward", "conv2d_clean", "leaky_relu_kwarg"}
    assert not [f for f in result.findings if f.spec.rsplit(".", 1)[-1] in clean]


@pytest.mark.slow
def test_dtypes_paddle_lacks_are_findings_and_complex_agrees() -> None:
    from alignbot.checks.spec_loading import library_specs

    specs = [s for s in library_specs()
             if s.name in ("precision.softmax_low_precision", "precision.matmul_precision")]
    with CandidateProcess(preset("paddle", python=PADDLE_PYTHON, timeout=60)) as candidate:
        result = check(specs, candidate, seed=0)
    assert result.programs_run == sum(s.n for s in specs)
    errors = [f for f in result.findings if f.kind is Kind.CANDIDATE_ERROR]
    assert errors and all(f.kind is Kind.CANDIDATE_ERROR for f in result.findings)
    # Paddle 3.3.1 registers no CPU kernel for float16/bfloat16 softmax and matmul (nor for
    # complex bmm); its complex mm and matmul agree
    kernels = [f for f in errors if "is not registered" in f.message]
    ops = {f.op for f in kernels}
    assert ops >= {"torch.softmax", "torch.bmm"} and ops & {"torch.mm", "torch.matmul"}
    assert all(f.op == "torch.bmm" or "DataType `complex" not in f.message for f in kernels)
