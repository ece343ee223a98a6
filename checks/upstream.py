"""Upstream issue drafts for findings where the reference looks wrong (PyTorch's template)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from urllib.parse import urlencode

from .findings import Finding, Kind
from .formula_repro import formula_repro
from .markdown import inline
from .oracle import FD_ATOL, FD_EPS, FD_RTOL
from .program import Program
from .report import environment
from .report_types import Evidence, FindingEntry
from .repro import body, run_script, variable_names
from .vocab import DEFAULT_TRACKER as DEFAULT_TRACKER

URL_LIMIT = 8000


@dataclass
class Draft:
    title: str
    body: str
    url: str


@functools.lru_cache(maxsize=1)
def collect_env(python: str = sys.executable) -> str:
    """``python -m torch.utils.collect_env``, once per process; a short fallback if it fails."""
    try:
        proc = subprocess.run([python, "-m", "torch.utils.collect_env"], capture_output=True,
                              text=True, timeout=180)
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    import platform

    import torch

    return (f"PyTorch version: {torch.__version__}\nPython version: {platform.python_version()}"
            f"\nOS: {platform.platform()}\n(torch.utils.collect_env did not run)")


def new_issue_url(tracker: str, title: str, body: str) -> str:
    """A prefilled new-issue link; a body too long for a URL is cut with a note."""
    base = f"https://github.com/{tracker}/issues/new?"
    url = base + urlencode({"title": title, "body": body})
    if len(url) <= URL_LIMIT:
        return url
    note = "\n\n(The draft was cut to fit in a link; the full text is in the alignbot report.)"
    keep = len(body)
    while keep > 0 and len(url) > URL_LIMIT:
        keep = int(keep * 0.8)
        url = base + urlencode({"title": title, "body": body[:keep] + note})
    return url


def draft(finding: FindingEntry, reference_only: str, output: str, candidate: str,
          tracker: str = DEFAULT_TRACKER, versions: str | None = None) -> Draft:
    """Render the draft from templates/; text from the program is escaped there."""
    claim = finding["evidence"].get("claim") or finding["verdict_reason"]
    title = f"{finding['op']}: {claim}"[:200]
    body = environment().get_template("upstream_issue.md.j2").render(
        finding=finding, reference_only=reference_only, output=output.strip(),
        candidate=candidate, versions=versions if versions is not None else collect_env(),
        evidence=finding["evidence"])
    return Draft(title=inline(title, 200), body=body, url=new_issue_url(tracker, title, body))


GRADCHECK = '''"""{op}: the gradient disagrees with finite differences, on PyTorch alone.

This script computes the gradient of {op} in float64 with autograd and with central
differences (step {eps:g}, as torch.autograd.gradcheck does) and compares them
(rtol={rtol:g}, atol={atol:g}).
The last line of output is machine-readable: alignbot-repro: {{"status": ..., "result": ...}}
"""

import json
import sys

import torch

EPS = {eps!r}
NUDGE = {{}}  # variable name -> (flat index, step) for the finite differences
LOSS = [0.0]


def nudge(name, t):
    if name in NUDGE:
        index, step = NUDGE[name]
        with torch.no_grad():
            t = t.detach().clone()
            t.view(-1)[index] += step
        t.requires_grad_()
    return t


def case(dtype):
{body}


def numerical(name, size):
    out = torch.zeros(size, dtype=torch.float64)
    for index in range(size):
        values = []
        for step in (EPS, -EPS):
            NUDGE.clear()
            NUDGE[name] = (index, step)
            case(torch.float64)
            values.append(LOSS[0])
        out[index] = (values[0] - values[1]) / (2 * EPS)
    NUDGE.clear()
    return out


def main():
    analytic = case(torch.float64)
    problems = []
    for name in {leaves!r}:
        grad = analytic["grad " + name].detach().double()
        numeric = numerical(name, grad.numel()).reshape(grad.shape)
        print(f"grad {{name}} (autograd):", grad, f"grad {{name}} (finite differences):",
              numeric, sep="\\n")
        try:
            torch.testing.assert_close(grad, numeric, rtol={rtol!r}, atol={atol!r})
        except AssertionError as exc:
            problems.append(f"grad {{name}}: autograd and finite differences disagree: {{exc}}")
    for problem in problems:
        print(problem)
    result = ("autograd and finite differences disagree" if problems
              else "autograd and finite differences agree")
    print("alignbot-repro:", json.dumps({{"status": "mismatch" if problems else "agree",
                                         "result": result}}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
'''
_GRAD_CALL = re.compile(r"^grads = torch\.autograd\.grad\(\[(.*?)\], \[(.*?)\], \[(.*?)\]")


def gradcheck_script(program: Program, finding: Finding, eps: float = FD_EPS,
                     rtol: float = FD_RTOL, atol: float = FD_ATOL) -> str | None:
    """PyTorch alone, in float64: autograd's gradient of the finding's leaf against central
    differences of ``sum(output * grad_out)`` (the program's other leaves and its
    intermediates left out); None where that leaf is not an input (a module parameter, an
    intermediate) or the backward is not one autograd call."""
    plan = program.get("backward")
    leaf = finding.key[len("grad:"):] if finding.key.startswith("grad:") else ""
    if not plan or leaf not in plan["wrt"] or ":" in leaf:
        return None
    plan = {**plan, "wrt": [leaf], "intermediates": []}
    program = {**program, "backward": plan}
    names = variable_names(program)
    leaves = [names[key] for key in plan["wrt"] if key in names]
    lines, _ = body(program, finding, float_dtype="dtype")
    groups = statements(lines)
    calls = [i for i, group in enumerate(groups) if _GRAD_CALL.match(" ".join(group))]
    if len(leaves) != len(plan["wrt"]) or len(calls) != 1:
        return None
    match = _GRAD_CALL.match(" ".join(groups[calls[0]]))
    assert match is not None
    loss = ["LOSS[0] = sum(float((o.detach().double() * g.double()).sum())",
            f"              for o, g in zip([{match[1]}], [{match[3]}]))"]
    out: list[str] = []
    for index, group in enumerate(groups):
        if index == calls[0]:
            out.extend(loss)
        out.extend(group)
        assigned = re.match(r"^(\w+) = ", group[0])
        if assigned and assigned[1] in leaves:  # after the whole (folded) statement
            out.append(f"{assigned[1]} = nudge({assigned[1]!r}, {assigned[1]})")
    return GRADCHECK.format(op=finding.op, eps=eps, rtol=rtol, atol=atol, leaves=leaves,
                            body="\n".join("    " + line for line in out))


def statements(lines: list[str]) -> list[list[str]]:
    """The lines of a function body grouped into whole statements: a statement folded over
    several lines is one group (the lines of an indented block each stand alone)."""
    groups: list[list[str]] = []
    pending: list[str] = []
    for line in lines:
        if not pending and line[:1].isspace():
            groups.append([line])
            continue
        pending.append(line)
        try:
            ast.parse("def case():\n" + "\n".join("    " + text for text in pending))
        except SyntaxError:
            continue
        groups.append(pending)
        pending = []
    return groups + ([pending] if pending else [])


def gradcheck_repro(program: Program, finding: Finding, timeout: float = 120.0
                    ) -> tuple[str, int, str] | None:
    """The gradcheck script, the exit status and output of one run in a fresh interpreter."""
    script = gradcheck_script(program, finding)
    if script is None:
        return None
    code, output = run_script(script, timeout=timeout, warm=True)
    return script, code, output


FORMULA_CLAIM = "disagrees with the formula in PyTorch's documentation"
FORMULA_EXPECTED = ("the documented formula's value (a NumPy implementation of it is in the "
                    "script), which the other implementation matches")
GRADCHECK_CLAIM = "the gradient disagrees with finite differences (as gradcheck computes them)"
GRADCHECK_EXPECTED = "the finite-difference gradient, which the other implementation matches"


@dataclass
class Alone:
    """A PyTorch-alone repro: the script, one run's exit status and output, and what it
    claims and expects (for the draft)."""
    script: str
    code: int
    output: str
    claim: str
    expected: str


def reference_alone(program: Program, finding: Finding, evidence: Evidence, default: Alone,
                    rtol: float, atol: float) -> Alone:
    """The PyTorch-alone repro that shows what the verdict rests on: against the documented
    formula where that decided (for a gradient, the forward's formula when PyTorch's
    backward agrees with its own forward), a float64 gradcheck where finite differences
    decided; ``default`` (PyTorch against its own float64 run) otherwise."""
    measured = evidence.get("measured_against")
    if measured in ("finite-differences", "formula-finite-differences"):
        checked = gradcheck_repro(program, finding)
        if checked is not None and (checked[1] == 1 or measured == "finite-differences"):
            return Alone(*checked, GRADCHECK_CLAIM, GRADCHECK_EXPECTED)
    if measured in ("formula", "formula-finite-differences"):
        value = finding if measured == "formula" else _forward_of(finding)
        made = formula_repro(program, value, rtol, atol)
        if made is not None:
            claim = FORMULA_CLAIM if measured == "formula" else (
                f"the forward {FORMULA_CLAIM}, and the gradient follows the forward")
            return Alone(*made, claim, FORMULA_EXPECTED)
    return default


def _forward_of(finding: Finding) -> Finding:
    """The value finding of the call whose gradient diverged."""
    return dataclasses.replace(finding, kind=Kind.VALUE, key=finding.node)
