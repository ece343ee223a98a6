"""A real candidate nobody here wrote: torchax 0.0.13 (PyTorch ops on JAX) in its own
interpreter beside torch 2.13, checked through `alignbot check --candidate torchax --python`.

`make test` builds that interpreter (.venv-torchax); elsewhere set ALIGNBOT_TORCHAX_PYTHON.
Each divergence asserted here was reproduced by hand in that interpreter (see
docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from interpreters import assert_minimized_repro_fails, candidate_python, run_check

from alignbot.checks.presets import PRESETS

PYTHON, needs_torchax = candidate_python("ALIGNBOT_TORCHAX_PYTHON", "torchax")
pytestmark = [pytest.mark.torchax, needs_torchax]

DIVERGENT = {  # spec: the kind and op of its finding, and what its message says
    "avg_pool2d_ceil_mode": ("value-mismatch", "torch.nn.functional.avg_pool2d",
                             "Mismatched elements: 2 / 4"),  # the windows over the edge
    "avg_pool2d_backward": ("candidate-error", "torch.nn.functional.avg_pool2d",
                            "aten::avg_pool2d_backward has no lowering"),
    "adaptive_max_pool1d": ("candidate-error", "torch.nn.functional.adaptive_max_pool1d",
                            "aten::adaptive_max_pool2d has no lowering"),
    "topk_indices": ("dtype-mismatch", "torch.topk", "int64 expected, got int32"),
}
CLEAN = ("tanh_clean", "matmul_clean", "float64_sum_clean")


@pytest.mark.slow
def test_torchax_diverges_where_it_was_seen_to_and_agrees_elsewhere(tmp_path: Path) -> None:
    code, report, _ = run_check(tmp_path, "torchax", PYTHON, ",".join([*DIVERGENT, *CLEAN]),
                                "--no-minimize", "--jobs", "1")
    assert code == 1 and report["complete"] and report["programs_run"] == 8 + 7
    found = {f["spec"].rsplit(".", 1)[-1]: f for f in report["findings"]}
    assert len(found) == len(report["findings"])  # one finding per divergent spec, no more
    assert set(found) == set(DIVERGENT)  # and none where torchax agrees: the clean specs
    for spec, (kind, op, message) in DIVERGENT.items():
        assert (found[spec]["kind"], found[spec]["op"]) == (kind, op), spec
        assert message in found[spec]["message"], spec


@pytest.mark.slow
def test_without_accuracy_mode_float64_is_computed_in_float32(tmp_path: Path) -> None:
    # what the preset's enable_accuracy_mode() is for: the clean float64 input and its sum
    # come out in float32
    prelude = PRESETS["torchax"].replace("torchax.enable_accuracy_mode()\n", "")
    assert prelude != PRESETS["torchax"]
    code, report, _ = run_check(tmp_path, "torchax", PYTHON, "float64_sum_clean",
                                "--no-minimize", prelude=prelude)
    assert code == 1
    (finding,) = report["findings"]
    assert finding["kind"] == "dtype-mismatch"
    assert "dtype float64 expected, got float32" in finding["message"]


@pytest.mark.slow
def test_a_minimized_torchax_finding_has_a_repro_that_fails_in_its_interpreter(
        tmp_path: Path) -> None:
    assert_minimized_repro_fails(tmp_path, "torchax", PYTHON, "avg_pool2d_ceil_mode")
