"""Built-in candidates agree with the reference on specs they have no reason to disagree on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks import CandidateProcess, preset
from alignbot.checks.cli import main
from alignbot.checks.engine import check
from alignbot.checks.presets import (
    OWN_INTERPRETER,
    PRESETS,
    REQUIREMENTS,
    MissingPackage,
    NoCandidate,
    UnknownPreset,
    candidate,
    missing_packages,
)

SAFE = ("matmul_clean", "batchnorm_clean", "conv2d_clean", "softplus_scaled", "tanh_backward",
        "sum_dtype", "mean_keepdim", "add_inplace", "leaky_relu_kwarg")


def _specs(planted_specs: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    return [planted_specs[name] for name in names]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["torch-no-mkldnn", "torch-float64"])
def test_preset_agrees_with_the_reference(name: str, planted_specs: dict[str, Any]) -> None:
    with CandidateProcess(preset(name)) as candidate:
        result = check(_specs(planted_specs, SAFE), candidate, seed=2)
    assert result.findings == []
    assert result.programs_run > 40


@pytest.mark.slow
def test_float64_preset_really_computes_in_float64(make_candidate: Any) -> None:
    # 1e8 + 1 - 1e8 is 0 in float32 and 1 in float64.
    from alignbot.checks.spec import Spec

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

    from alignbot.checks.spec_loading import load_file

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


def test_every_preset_says_what_its_prelude_imports() -> None:
    assert set(REQUIREMENTS) == set(PRESETS)
    for name, needs in REQUIREMENTS.items():
        top = {line.split()[1].split(".")[0] for line in map(str.strip, PRESETS[name].splitlines())
               if line.startswith("import ")}
        assert top <= set(needs) | {"torch"}, name
        assert set(needs) <= top, name
    assert {"paddle", "torchax", "openvino"} == OWN_INTERPRETER


@pytest.mark.parametrize(("name", "install"), [
    ("paddle", "pip install paddlepaddle==3.3.1"),
    ("torchax", "pip install 'torchax[cpu]==0.0.13'"),
    ("openvino", "pip install openvino==2026.4.1"),
])
def test_a_preset_whose_interpreter_lacks_its_package_says_what_to_install(
        name: str, install: str, capsys: pytest.CaptureFixture[str]) -> None:
    # alignbot's own interpreter has torch but none of these
    with pytest.raises(MissingPackage, match=re.escape(install)):
        candidate(name, None)
    assert main(["check", "--candidate", name, "--ops", "softplus", "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (f"alignbot: error: --candidate {name}: {sys.executable} has no {name}; "
                    f"install it there ({install}) or point --python at an interpreter that "
                    f"has it")


def test_an_interpreter_without_torch_is_told_to_install_the_cpu_build(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    python = str(tmp_path / "bare" / "bin" / "python")
    # an interpreter that talks as it starts (a .pth file runs at every start)
    (site,) = (tmp_path / "bare" / "lib").glob("python3*/site-packages")
    (site / "noisy.pth").write_text("import sys; print('torch torchax openvino ready')\n")
    with pytest.raises(MissingPackage, match=re.escape(
            f"--candidate torchax: {python} has no torch or torchax; install them there (pip "
            f"install torch==2.13.0+cpu 'torchax[cpu]==0.0.13' --extra-index-url "
            f"https://download.pytorch.org/whl/cpu)")):
        candidate("torchax", None, python=python)
    with pytest.raises(MissingPackage, match=re.escape(
            "(pip install torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu)")):
        candidate("torch-compile", None, python=python)
    # a prelude of the user's own is the user's to get right: the worker says what failed
    assert candidate(None, "import torchax\n", python=python).python == python


def test_an_interpreter_that_does_not_run_is_left_to_the_worker_to_report() -> None:
    assert missing_packages("torchax", "/no/such/python") is None
    assert candidate("paddle", None, python="/no/such/python").python == "/no/such/python"
