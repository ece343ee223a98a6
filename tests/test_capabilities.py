"""Candidates that are not full PyTorch: a prelude (or the command line) declares no gradients
or a lower precision, and the check compares accordingly, saying so in its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from alignbot.checks.capabilities import CapabilityError, resolve
from alignbot.checks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
PLANTED = str(FIXTURES / "planted_specs.py")
# planted: tanh's backward is off by half, softplus's value by 1% (within bfloat16's 1.6%)
DECLARED = ('\nalignbot_capabilities = {"gradients": False}\n'
            'alignbot_precision = "bfloat16"\n')


def _check(folder: Path, prelude: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    report = folder / "r.json"
    code = main(["check", "--prelude", prelude, "--spec-file", PLANTED, "--ops",
                 "tanh_backward,softplus_scaled", "--n", "3", "--no-minimize", "--jobs", "1",
                 "--no-progress", "--json", str(report), "--markdown", str(folder / "r.md"),
                 *extra])
    return code, json.loads(report.read_text()), (folder / "r.md").read_text()


@pytest.mark.slow
def test_a_declared_candidate_is_checked_as_it_declares(tmp_path: Path) -> None:
    prelude = (FIXTURES / "planted_prelude.py").read_text() + DECLARED
    code, report, markdown = _check(tmp_path, prelude, "--jobs", "2")
    assert code == 0 and report["findings"] == []
    assert report["capabilities"] == {
        "gradients": False, "precision": "bfloat16",
        "declared_by": {"gradients": "prelude", "precision": "prelude"}}
    assert "**Gradients not compared**" in markdown and "**Precision `bfloat16`**" in markdown


@pytest.mark.slow
def test_the_command_line_wins_over_the_prelude(tmp_path: Path) -> None:
    prelude = (FIXTURES / "planted_prelude.py").read_text() + DECLARED
    code, report, markdown = _check(tmp_path, prelude, "--jobs", "1", "--gradients",
                                    "--precision", "float32")
    assert code == 1
    assert {(f["op"], f["kind"]) for f in report["findings"]} == {
        ("torch.tanh", "grad-mismatch"), ("torch.nn.functional.softplus", "value-mismatch")}
    assert report["capabilities"]["declared_by"] == {"gradients": "command line",
                                                     "precision": "command line"}
    assert "Gradients not compared" not in markdown


@pytest.mark.parametrize(("declared", "precision", "message"), [
    ({"gradient": False}, None, "alignbot_capabilities {'gradient': False}: expected a dict"),
    ({"gradients": "no"}, None, "expected a dict"),
    (None, "int8", "alignbot_precision 'int8': expected one of float16, bfloat16"),
])
def test_a_declaration_alignbot_does_not_know_is_refused(declared: Any, precision: Any,
                                                         message: str) -> None:
    with pytest.raises(CapabilityError, match=message):
        resolve(declared, precision)


@pytest.mark.slow
def test_a_bad_declaration_in_the_prelude_exits_2_with_one_line(capsys: Any) -> None:
    code = main(["check", "--prelude", "import torch\nalignbot_precision = 'half'",
                 "--spec-file", PLANTED, "--ops", "matmul_clean", "--n", "1", "--jobs", "1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["alignbot: error: alignbot_precision 'half': expected one of float16, "
                   "bfloat16, float32, float64"]
