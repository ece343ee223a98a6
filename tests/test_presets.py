"""Built-in candidates agree with the reference on specs they have no reason to disagree on."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from checks import CandidateProcess, preset
from checks.engine import check
from checks.presets import PRESETS, NoCandidate, UnknownPreset, candidate

SAFE = ("matmul_clean", "batchnorm_clean", "conv2d_clean", "softplus_scaled", "tanh_backward",
        "sum_dtype", "mean_keepdim", "add_inplace", "leaky_relu_kwarg")


def _specs(planted_specs: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    return [planted_specs[name] for name in names]


@pytest.mark.parametrize("name", ["torch-no-mkldnn", "torch-float64"])
def test_preset_agrees_with_the_reference(name: str, planted_specs: dict[str, Any]) -> None:
    with CandidateProcess(preset(name)) as candidate:
        result = check(_specs(planted_specs, SAFE), candidate, seed=2)
    assert result.findings == []
    assert result.programs_run > 40


def test_float64_preset_really_computes_in_float64(make_candidate: Any) -> None:
    # 1e8 + 1 - 1e8 is 0 in float32 and 1 in float64.
    from checks.spec import Spec

    def spec(torch: Any) -> Any:
        return torch.tensor([1e8, 1.0, -1e8]).sum()

    candidate = make_candidate(PRESETS["torch-float64"])
    findings = check([Spec(name="f64.sum", fn=spec, n=1)], candidate, seed=0).findings
    assert [(f.kind.value, f.op) for f in findings] == [("value-mismatch", "torch.Tensor.sum")]


@pytest.mark.slow
def test_compile_preset_agrees_on_a_few_ops(planted_specs: dict[str, Any]) -> None:
    with CandidateProcess(preset("torch-compile", timeout=300)) as candidate:
        result = check(_specs(planted_specs, ("matmul_clean", "softplus_scaled",
                                              "add_inplace")), candidate, seed=1, n=2)
    assert result.findings == []
    assert result.programs_run == 6


@pytest.mark.slow
def test_compile_program_preset_compiles_a_whole_program_and_agrees() -> None:
    # one tiny draw of mul, add, softmax and a scale: compiled as one region, and once more
    # with probes for the intermediates' gradients; everything agrees with eager
    from pathlib import Path

    from checks.spec import load_file

    specs = load_file(Path(__file__).parent / "fixtures" / "fusion_specs.py")
    with CandidateProcess(preset("torch-compile-program", timeout=300)) as candidate:
        result = check(specs, candidate, seed=0, n=1)
    assert result.findings == []
    assert result.stats.regions == {"region": 1}


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(UnknownPreset, match="torch-compile"):
        preset("oneflow")


def test_a_candidate_is_a_preset_or_a_prelude_with_the_run_settings() -> None:
    config = candidate("torch-float64", None, python="/opt/py", timeout=7.0,
                       overrides={"torch.add": "m:add"})
    assert (config.name, config.prelude, config.python, config.timeout, config.overrides) == (
        "torch-float64", PRESETS["torch-float64"], "/opt/py", 7.0, {"torch.add": "m:add"})
    own = candidate(None, "import torch\n", timeout=3.0, sys_path=("/repo",))
    assert (own.name, own.prelude, own.sys_path, own.python) == (
        "prelude", "import torch\n", ("/repo",), sys.executable)
    assert candidate("torch", None).sys_path == preset("torch").sys_path


@pytest.mark.parametrize(("name", "prelude", "message"), [
    (None, None, "say what to check"),
    ("torch-fast", None, "unknown candidate preset 'torch-fast'"),
])
def test_a_candidate_that_is_not_said_rightly_is_one_error(
        name: str | None, prelude: str | None, message: str) -> None:
    with pytest.raises(NoCandidate, match=message):
        candidate(name, prelude)
