"""Upstream drafts: PyTorch's template, escaped text, links that fit."""

from __future__ import annotations

import subprocess
import sys
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from alignbot.checks.findings import Finding, Kind
from alignbot.checks.upstream import (
    URL_LIMIT,
    Alone,
    draft,
    gradcheck_repro,
    gradcheck_script,
    new_issue_url,
    reference_alone,
)


def _finding(message: str) -> dict[str, Any]:
    return {"op": "torch.nn.functional.conv1d", "verdict_reason": message,
            "evidence": {"claim": "accepts an input that another implementation rejects",
                         "expected": "an error for this input",
                         "oracles": {"third:paddle": "candidate"},
                         "spec_declares_invalid_input": True,
                         "third_frameworks_raise": [True]}}


def test_draft_follows_pytorchs_bug_template() -> None:
    issue = draft(_finding("the spec declares this input invalid"), "import torch\n",
                  "tensor([1.])", "paddle", versions="PyTorch version: 2.13.0")
    body = issue.body
    assert body.index("### 🐛 Describe the bug") < body.index("### Versions")
    assert "```python\nimport torch\n```" in body
    assert "PyTorch version: 2.13.0" in body
    assert issue.title.startswith("torch.nn.functional.conv1d: accepts an input")


def test_hostile_text_cannot_ping_or_break_the_markdown() -> None:
    hostile = "@pytorch/maintainers see #123 ```\n# Heading [link](http://x) <img src=x>"
    issue = draft(_finding(hostile), "print('@octocat')\n```\n", "@everyone ```", "cand",
                  versions="v")
    body = issue.body
    assert "@pytorch" not in body and "@\u200bpytorch" in body
    assert "#123" not in body
    assert "<img" not in body.replace("\\<", "") and "\\[link\\]" in body
    # the script and its output stay inside their fences
    assert "````python\nprint('@octocat')\n```\n````" in body


def test_new_issue_url_is_prefilled_and_fits() -> None:
    url = new_issue_url("pytorch/pytorch", "t", "body text")
    parsed = urlparse(url)
    assert parsed.netloc == "github.com" and parsed.path == "/pytorch/pytorch/issues/new"
    assert parse_qs(parsed.query) == {"title": ["t"], "body": ["body text"]}
    long_url = new_issue_url("pytorch/pytorch", "t", "x" * 50_000)
    assert len(long_url) <= URL_LIMIT
    assert "full text is in the alignbot report" in parse_qs(urlparse(long_url).query)["body"][0]


def _grad_program(wrt: str) -> dict[str, Any]:
    return {"seed": 0, "nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [2, 2], "requires_grad": True,
         "recipe": {"kind": "pattern", "pattern": "arange"}},
        {"id": "v1", "op": "call", "target": "torch.sigmoid", "args": [{"ref": "v0"}],
         "kwargs": {}}],
        "backward": {"outputs": ["v1"], "wrt": [wrt], "intermediates": [],
                     "seeds": [{"kind": "pattern", "pattern": "ones"}]}}


@pytest.mark.slow
def test_gradcheck_script_agrees_on_a_correct_backward() -> None:
    program = _grad_program("v0")
    finding = Finding(Kind.GRAD, "torch.sigmoid", "t.spec", "m", program, key="grad:v0")
    result = gradcheck_repro(program, finding)
    assert result is not None
    script, code, output = result
    assert "x = nudge('x', x)" in script
    assert code == 0 and "autograd and finite differences agree" in output, output
    # gradients of module parameters are not nudged by the script: no gradcheck for them
    assert gradcheck_script(_grad_program("v0:weight"), finding) is None


def _nearest_doubled() -> tuple[dict[str, Any], Finding]:
    """Eager PyTorch's gradient of nearest interpolation where the forward doubles a size
    exactly (2 * 2.2153 rounds down to 4) but the backward maps through 1 / 2.2153: as a
    drawn program leaves it, with its output among the intermediates and an input literal
    long enough to be folded over several lines."""
    program: dict[str, Any] = {"seed": 0, "nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [1, 1, 2, 2, 2],
         "requires_grad": True, "recipe": {"kind": "uniform", "seed": 3, "low": -2.0,
                                           "high": 2.0}},
        {"id": "v1", "op": "call", "target": "torch.nn.functional.interpolate",
         "args": [{"ref": "v0"}], "kwargs": {"scale_factor": 2.215302591688361}}],
        "backward": {"outputs": ["v1"], "wrt": ["v0"], "intermediates": ["v1"],
                     "seeds": [{"kind": "uniform", "seed": 4, "low": -1.0, "high": 1.0}]}}
    finding = Finding(Kind.GRAD, "torch.nn.functional.interpolate", "t.spec", "m", program,
                      key="grad:v0", node="v1")
    return program, finding


@pytest.mark.slow
def test_a_gradient_wrong_by_finite_differences_gets_a_gradcheck_that_fails() -> None:
    program, finding = _nearest_doubled()
    result = gradcheck_repro(program, finding)
    assert result is not None
    script, code, output = result
    assert code == 1 and "autograd and finite differences disagree" in output, output
    body = script[script.index("def case(dtype):"):script.index("def numerical(")]
    assert body.count("x = nudge('x', x)") == 1 and "inner = " not in body
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "-"],
                          input=script, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


@pytest.mark.slow
def test_the_repro_for_the_draft_is_what_the_verdict_rests_on() -> None:
    program, finding = _nearest_doubled()
    default = Alone("print()", 0, "agree", "claim", "expected")
    by_fd = reference_alone(program, finding, {"oracles": {},
                                               "measured_against": "finite-differences"},
                            default, 1.3e-6, 1e-5)
    assert by_fd.code == 1 and by_fd.claim.startswith("the gradient disagrees")
    assert reference_alone(program, finding, {"oracles": {},
                                              "measured_against": "reference-float64"},
                           default, 1.3e-6, 1e-5) is default
    pooled: dict[str, Any] = {"seed": 0, "nodes": [
        {"id": "v0", "op": "input", "dtype": "float32", "shape": [1, 1, 3, 3],
         "requires_grad": False, "recipe": {"kind": "pattern", "pattern": "ones"}},
        {"id": "v1", "op": "call", "target": "torch.nn.functional.lp_pool2d",
         "args": [{"ref": "v0"}, 1, 2], "kwargs": {"stride": 2, "ceil_mode": True}}]}
    value = Finding(Kind.VALUE, "torch.nn.functional.lp_pool2d", "t.spec", "m", pooled,
                    key="v1", node="v1")
    by_formula = reference_alone(pooled, value, {"oracles": {}, "measured_against": "formula"},
                                 default, 1.3e-6, 1e-5)
    assert by_formula.code == 1 and "documented formula disagree" in by_formula.output
    assert "exit status 1: PyTorch and the documented formula disagree" in by_formula.script
