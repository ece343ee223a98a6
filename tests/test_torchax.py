"""A real candidate nobody here wrote: torchax 0.0.13 (PyTorch ops on JAX) in its own
interpreter beside torch 2.13, checked through `alignbot check --candidate torchax --python`.

`make test` builds that interpreter (.venv-torchax); elsewhere set ALIGNBOT_TORCHAX_PYTHON.
Each divergence asserted here was reproduced by hand in that interpreter (see
docs/benchmarks-real-candidates.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from interpreters import assert_minimized_repro_fails, candidate_python, run_check

from checks.presets import PRESETS

PYTHON, needs_torchax = candidate_python("ALIGNBOT_TORCHAX_PYTHON", "torchax")
pytestmark = [pytest.mark.torchax, needs_torchax]

DIVERGENT = "avg_pool2d_ceil_mode,avg_pool2d_backward,adaptive_max_pool1d,topk_indices"
CLEAN = "*_clean"


def _found(report: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {f["spec"].rsplit(".", 1)[-1]: (f["kind"], f["op"], f["message"])
            for f in report["findings"]}


def test_torchax_divergences_are_found_at_their_ops(tmp_path: Path) -> None:
    code, report, _ = run_check(tmp_path, "torchax", PYTHON, DIVERGENT, "--no-minimize",
                                "--jobs", "1")
    assert code == 1 and report["complete"] and report["programs_run"] == 8
    found = _found(report)
    assert len(report["findings"]) == len(found) == 4  # one finding per spec
    assert {spec: kind_op for spec, (*kind_op, _) in found.items()} == {
        "avg_pool2d_ceil_mode": ["value-mismatch", "torch.nn.functional.avg_pool2d"],
        "avg_pool2d_backward": ["candidate-error", "torch.nn.functional.avg_pool2d"],
        "adaptive_max_pool1d": ["candidate-error", "torch.nn.functional.adaptive_max_pool1d"],
        "topk_indices": ["dtype-mismatch", "torch.topk"],
    }
    assert "aten::avg_pool2d_backward has no lowering" in found["avg_pool2d_backward"][2]
    assert "aten::adaptive_max_pool2d has no lowering" in found["adaptive_max_pool1d"][2]
    assert "int64 expected, got int32" in found["topk_indices"][2]


def test_where_torchax_agrees_the_check_passes(tmp_path: Path) -> None:
    code, report, _ = run_check(tmp_path, "torchax", PYTHON, CLEAN, "--jobs", "1")
    assert (code, report["findings"], report["programs_run"]) == (0, [], 7)


def test_without_accuracy_mode_float64_is_computed_in_float32(tmp_path: Path) -> None:
    # what the preset's enable_accuracy_mode() is for: the clean float64 sum diverges
    prelude = PRESETS["torchax"].replace("torchax.enable_accuracy_mode()\n", "")
    assert prelude != PRESETS["torchax"]
    code, report, _ = run_check(tmp_path, "torchax", PYTHON, "float64_sum_clean",
                                "--no-minimize", prelude=prelude)
    assert code == 1
    assert [(f["kind"], f["op"]) for f in report["findings"]] == [
        ("dtype-mismatch", "torch.Tensor.sum")]


@pytest.mark.slow
def test_a_minimized_torchax_finding_has_a_repro_that_fails_in_its_interpreter(
        tmp_path: Path) -> None:
    assert_minimized_repro_fails(tmp_path, "torchax", PYTHON, "avg_pool2d_ceil_mode")
