"""examples/preludes/: the example prelude of each kind of candidate (a kernel library, a
framework used as `torch`, a `torch.compile` backend), run by `alignbot check --prelude-file`
as docs/candidates.md shows, on a few specs, for what each must find or not find; and every
hook the worker reads has its row in docs/candidates.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.cli import main

ROOT = Path(__file__).resolve().parent.parent
PRELUDES = ROOT / "examples" / "preludes"
ALIGNBOT = str(Path(sys.executable).parent / "alignbot")
PADDLE_PYTHON = os.environ.get("ALIGNBOT_PADDLE_PYTHON", "")


def check(prelude: str, ops: str, tmp_path: Path, *extra: str, cwd: Path = ROOT
          ) -> tuple[int, dict[str, Any], str]:
    """``alignbot check --prelude-file examples/preludes/PRELUDE`` as a user runs it, as
    drawn (no minimizing): exit status, JSON report, stderr."""
    report = tmp_path / f"{prelude}.json"
    proc = subprocess.run(
        [ALIGNBOT, "check", "--prelude-file", str(PRELUDES / prelude), "--ops", ops,
         "--n", "4", "--jobs", "1", "--no-minimize", "--no-progress", "--json", str(report),
         *extra], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(report.read_text()), proc.stderr


def found(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(f["kind"], f["op"]) for f in report["findings"]}


@pytest.mark.slow
def test_the_kernel_library_agrees_and_its_pull_request_does_not(tmp_path: Path) -> None:
    # the library's main branch (examples/fastops) agrees with PyTorch on its two ops
    code, report, _ = check("kernel_library.py", "softplus,mish", tmp_path,
                            cwd=ROOT / "examples" / "fastops")
    assert code == 0 and report["findings"] == []
    # by default the library's specs of the two ops and PyTorch's OpInfo specs of them
    assert {s.split(".")[0] for s in report["specs"]} == {"activations", "opinfo"}
    assert report["programs_run"] == 4 * len(report["specs"])
    assert report["candidate"] == (PRELUDES / "kernel_library.py").read_text()
    # the pull request's fastops (examples/pull-request) breaks softplus' backward
    code, report, _ = check("kernel_library.py", "softplus,mish", tmp_path,
                            cwd=ROOT / "examples" / "pull-request")
    assert code == 1 and found(report) == {("grad-mismatch", "torch.nn.functional.softplus")}


@pytest.mark.slow
def test_the_compile_backend_compiles_each_program_as_one_region(tmp_path: Path) -> None:
    code, report, stderr = check("compile_backend.py", "relu,tanh", tmp_path, "--n", "2")
    assert code == 0 and report["findings"] == [], stderr
    (line,) = [ln for ln in stderr.splitlines() if "as one region or call by call" in ln]
    assert " region" in line.rsplit(":", 1)[-1]  # programs went through the backend


@pytest.mark.slow
@pytest.mark.paddle
@pytest.mark.skipif(not os.path.exists(PADDLE_PYTHON),
                    reason="set ALIGNBOT_PADDLE_PYTHON (make test does)")
def test_the_framework_is_paddle_and_diverges_where_paddle_does(tmp_path: Path) -> None:
    code, report, _ = check("framework.py", "activations.relu,shape_ops.join_split", tmp_path,
                            "--python", PADDLE_PYTHON)
    assert report["candidate_packages"]["paddle"] == "3.3.1"
    assert code == 1 and {f["spec"] for f in report["findings"]} == {"shape_ops.join_split"}
    assert ("candidate-error", "torch.split") in found(report)  # relu agrees, split does not


def test_a_prelude_file_that_cannot_be_read_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--prelude-file", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--prelude-file {tmp_path / 'missing.py'}: No such file or directory")
    assert main(["check", "--candidate", "torch", "--prelude-file", "x.py"]) == 2
    assert "not allowed with argument --candidate" in capsys.readouterr().err


def test_every_hook_the_worker_reads_is_documented_with_an_example() -> None:
    worker = (ROOT / "checks" / "runtime" / "worker.py").read_text()
    hooks = set(re.findall(r'namespace\.get\("(alignbot_\w+)"', worker))
    assert {"alignbot_overrides", "alignbot_program", "alignbot_capabilities"} <= hooks
    page = (ROOT / "docs" / "candidates.md").read_text()
    rows = {line.split("`")[1].split("(")[0]: line for line in page.splitlines()
            if line.startswith("| `alignbot_")}
    assert hooks <= set(rows), hooks - set(rows)
    for hook in hooks:  # its example column shows it in use
        assert hook in rows[hook].rsplit("|", 2)[-2], rows[hook]
