"""Standalone repro scripts: reference vs candidate, and PyTorch alone for upstream reports.

A repro needs only the reference and the candidate installed: it holds the candidate's
prelude and nothing of alignbot. Before it is reported it is run in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .candidate import CandidateConfig
from .codegen import statements, tensor_expr
from .compare import tolerance
from .engine import Program
from .findings import Finding, Kind, node_of
from .oracle import reference_observations
from .report import environment


@dataclass
class Repro:
    script: str
    verified: bool
    output: str


def _names(program: Program) -> dict[str, str]:
    return {n["id"]: ("m" + n["id"][1:] if n["op"] == "module" else n["id"])
            for n in program["nodes"]}


def _returns(program: Program, finding: Finding, float_dtype: str | None = None
             ) -> list[str]:
    """The lines that compute and return what diverged (the call's output, the mutated
    tensor, a module buffer, or gradients)."""
    names = _names(program)
    nodes = {n["id"]: n for n in program["nodes"]}
    key = finding.key
    if finding.kind is Kind.GRAD and program.get("backward"):
        return _grad_lines(program, names, float_dtype)
    if "!self" in key:
        node = nodes[node_of(key)]
        target = node["args"][1 if node["op"] == "invoke" else 0]["ref"]
        return [f"return {{{names[target] + ' after the call'!r}: {names[target]}}}"]
    if "!state." in key:
        module = nodes[node_of(key)]["args"][0]["ref"]
        buffer = key.split("!state.", 1)[1]
        return [f"return {{{names[module] + '.' + buffer!r}: {names[module]}.{buffer}}}"]
    node_id = finding.node or program["nodes"][-1]["id"]
    if key.startswith("final:"):
        node_id = key[len("final:"):]
    name = names.get(node_id, node_id)
    if "." in key and not key.startswith(("grad:", "final:")) and "!" not in key:
        index = key.split(".", 1)[1]
        return [f"return {{{key!r}: {name}[{index}]}}"]
    return [f"return {{{node_id!r}: {name}}}"]


def _grad_lines(program: Program, names: dict[str, str], float_dtype: str | None) -> list[str]:
    plan = program["backward"]
    ref = reference_observations(program)
    outs = []
    for out_id in plan["outputs"]:
        base, _, index = out_id.partition(".")
        outs.append(f"{names[base]}[{index}]" if index else names[base])
    seeds = []
    for out_id, seed in zip(plan["outputs"], plan["seeds"], strict=True):
        obs = ref[out_id]
        seeds.append(tensor_expr(seed, obs["dtype"], obs["shape"], False, float_dtype))
    wrt = []
    for key in plan["wrt"]:
        base, _, attr = key.partition(":")
        wrt.append(f"{names[base]}.{attr}" if attr else names[base])
    labels = [f"grad {w}" for w in wrt]
    return [f"return dict(zip({labels!r}, torch.autograd.grad([{', '.join(outs)}], "
            f"[{', '.join(wrt)}], [{', '.join(seeds)}])))"]


def _body(program: Program, finding: Finding, wrap: bool = False,
          float_dtype: str | None = None) -> list[str]:
    lines = list(statements(program, wrap=wrap, float_dtype=float_dtype))
    returns = _returns(program, finding, float_dtype)
    last = lines[-1] if lines else ""
    simple = (len(returns) == 1 and returns[0].startswith("return {") and " = " in last
              and not last.startswith(" ") and finding.kind is not Kind.GRAD)
    if simple:
        # return the divergent call itself instead of naming it first: one line shorter
        name, expr = last.split(" = ", 1)
        if returns[0] == f"return {{{name!r}: {name}}}":
            return [*lines[:-1], f"return {{{name!r}: {expr}}}"]
    if any("float('nan')" in line or "nan" in line.split("#")[0] for line in lines):
        lines.insert(0, "nan, inf = float('nan'), float('inf')")
    return lines + returns


def _prelude_with_overrides(config: CandidateConfig) -> str:
    lines = [config.prelude.rstrip()]
    for api, target in sorted(config.overrides.items()):
        module, _, attr = target.partition(":")
        owner, _, name = api.rpartition(".")
        lines.append(f"import importlib as _il; {owner}.{name} = "
                     f"_il.import_module({module!r}).{attr}")
    return "\n".join(lines) + "\n"


def render(program: Program, finding: Finding, config: CandidateConfig,
           rtol: float, atol: float) -> str:
    wrap = "alignbot_wrap" in config.prelude
    body = _body(program, finding, wrap=wrap)
    python = "sys.executable" if config.python == sys.executable else repr(config.python)
    return environment().get_template("repro.py.j2").render(
        fingerprint=finding.fingerprint, kind=finding.kind.value, op=finding.op,
        prelude=repr(_prelude_with_overrides(config)), python=python, rtol=rtol, atol=atol,
        timeout=max(int(config.timeout), 5), wrap=wrap, body=body)


def tolerances(program: Program, finding: Finding, rtol: float | None, atol: float | None
               ) -> tuple[float, float]:
    ref = reference_observations(program)
    obs = ref.get(finding.key) or {}
    return tolerance(obs.get("dtype", "float32"), rtol, atol)


def render_reference_only(program: Program, finding: Finding, mode: str, claim: str,
                          rtol: float, atol: float, dtype: str = "float32") -> str:
    """PyTorch alone: ``numeric`` compares the call with its float64 self, ``raises`` shows
    the reference rejecting an input it should accept, ``accepts`` the opposite."""
    body = _body(program, finding, float_dtype="dtype")
    return environment().get_template("repro_reference.py.j2").render(
        op=finding.op, claim=claim, body=body, mode=mode, rtol=rtol, atol=atol, dtype=dtype)


def run_script(script: str, python: str = sys.executable, timeout: float = 600.0
               ) -> tuple[int, str]:
    """Run a script in a fresh interpreter; its exit status and output."""
    with tempfile.TemporaryDirectory(prefix="alignbot-repro-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(script)
        try:
            proc = subprocess.run([python, str(path)], capture_output=True, text=True,
                                  timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            return -1, f"the repro did not finish within {timeout:g} s"
    return proc.returncode, (proc.stdout + proc.stderr)[-4000:]


def verify(script: str, timeout: float) -> Repro:
    """A repro counts as verified when a fresh interpreter exits 1 (the bug is present)."""
    code, output = run_script(script, timeout=timeout)
    return Repro(script=script, verified=code == 1 and "MISMATCH" in output, output=output)


def describe(value: Any) -> str:
    return str(value)
