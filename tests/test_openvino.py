"""A real candidate nobody here wrote: OpenVINO 2026.4.1's torch.compile backend in its own
interpreter beside torch 2.13, checked through `alignbot check --candidate openvino --python`.

`make test` builds that interpreter (.venv-openvino); elsewhere set ALIGNBOT_OPENVINO_PYTHON.
Each divergence asserted here was reproduced by hand in that interpreter (see
docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from interpreters import assert_minimized_repro_fails, candidate_python, run_check

from alignbot.checks.presets import PRESETS

PYTHON, needs_openvino = candidate_python("ALIGNBOT_OPENVINO_PYTHON", "openvino")
pytestmark = [pytest.mark.openvino, needs_openvino]

DIVERGENT = ("conv1d_backward", "conv2d_weight_grad")
CLEAN = ("tanh_clean", "matmul_clean", "float64_sum_clean")


def _cpu_has_bfloat16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


@pytest.mark.slow
def test_openvino_diverges_where_it_was_seen_to_and_agrees_elsewhere(tmp_path: Path) -> None:
    code, report, _ = run_check(tmp_path, "openvino", PYTHON, ",".join([*DIVERGENT, *CLEAN]),
                                "--no-minimize", "--jobs", "1")
    assert code == 1 and report["complete"] and report["programs_run"] == 4 + 7
    found = {f["spec"].rsplit(".", 1)[-1]: f for f in report["findings"]}
    assert len(found) == len(report["findings"])  # one finding per divergent spec, no more
    assert set(found) == set(DIVERGENT)  # and none where OpenVINO agrees: the clean specs
    conv1d, conv2d = found["conv1d_backward"], found["conv2d_weight_grad"]
    # its convolution_backward decomposition is conv_transpose2d at every rank: a 1-D
    # convolution that needs a gradient does not compile
    assert (conv1d["kind"], conv1d["op"]) == ("candidate-error", "torch.nn.functional.conv1d")
    assert "BackendCompilerFailed" in conv1d["message"]
    assert "Expected 3-dimensional input" in conv1d["message"]
    # and its weight gradient never reads the gradient that arrives
    assert (conv2d["kind"], conv2d["op"]) == ("grad-mismatch", "torch.nn.functional.conv2d")
    assert conv2d["observation"] == "grad:v1"  # the weight, not the input (v0)


def _without(option: str) -> str:
    prelude = PRESETS["openvino"].replace(option, "")
    assert prelude != PRESETS["openvino"]
    return prelude


@pytest.mark.slow
def test_without_aot_autograd_outputs_carry_no_gradient(tmp_path: Path) -> None:
    # what the preset's aot_autograd option is for
    prelude = _without('"aot_autograd": True, ')
    code, report, _ = run_check(tmp_path, "openvino", PYTHON, "tanh_clean", "--no-minimize",
                                "--n", "1", prelude=prelude)
    assert code == 1
    (finding,) = report["findings"]
    # the output is detached: the finding names torch.tanh, whose result has no grad_fn
    assert finding["op"] == "torch.tanh", finding
    assert "has no grad_fn in the candidate's run" in finding["message"]


@pytest.mark.slow
@pytest.mark.skipif(not _cpu_has_bfloat16(), reason="this CPU computes no bfloat16: OpenVINO "
                    "keeps float32 without the hint")
def test_without_the_f32_hint_float32_is_computed_in_bfloat16(tmp_path: Path) -> None:
    # what the preset's INFERENCE_PRECISION_HINT is for, on a CPU with bfloat16 units: the
    # compiled backward of a float32 matmul computes in bfloat16 (its forward stays float32)
    prelude = _without(', "config": {"INFERENCE_PRECISION_HINT": "f32"}')
    code, report, _ = run_check(tmp_path, "openvino", PYTHON, "matmul_clean", "--no-minimize",
                                "--n", "1", prelude=prelude)
    assert code == 1
    assert [(f["kind"], f["op"]) for f in report["findings"]] == [
        ("grad-mismatch", "torch.matmul")]


@pytest.mark.slow
def test_a_minimized_openvino_finding_has_a_repro_that_fails_in_its_interpreter(
        tmp_path: Path) -> None:
    assert_minimized_repro_fails(tmp_path, "openvino", PYTHON, "conv2d_weight_grad")
