"""The PyTorch-alone repro of a call that disagrees with its documented formula: PyTorch in
float64 against a NumPy implementation of the formula, written into the script.

For a finding whose verdict rests on the documented formula (checks/formulas), a
comparison of PyTorch with its own float64 run would agree with itself; this script shows
the maintainer the formula it is measured against, as plain code they can read and run.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Any

from .codegen import render_literal
from .findings import Finding
from .formulas import MODULES, lookup
from .formulas.evaluate import module_class
from .formulas.registry import AFFINE, Formula
from .formulas.source import standalone, summary
from .program import Node, Program, is_call
from .report import environment
from .repro import body, run_script, status_line, variable_names
from .runtime.literals import is_ref, ref_of


def _ref_name(names: dict[str, str], node_id: str) -> str:
    base, *indices = node_id.split(".")
    return names[base] + "".join(f"[{index}]" for index in indices)


def _call_source(program: Program, node: Node, names: dict[str, str]
                 ) -> tuple[Formula, str] | None:
    """The formula that stands for the call, and the source that calls it on the call's
    arguments as NumPy arrays (a module's constructor arguments by name)."""
    if not is_call(node):
        return None

    def literal(value: Any) -> str:
        return render_literal(value, lambda ref: f"as_numpy({_ref_name(names, ref)})")

    if node["op"] == "call":
        formula = lookup(node["target"])
        if formula is None:
            return None
        args = [literal(a) for a in node["args"]]
        args += [f"{k}={literal(v)}" for k, v in node["kwargs"].items()]
        return formula, f"{formula.name}({', '.join(args)})"
    if node["op"] != "invoke" or not is_ref(node["args"][0]):
        return None
    spec = MODULES.get(node["target"])
    module = next((n for n in program["nodes"] if n["id"] == ref_of(node["args"][0])), None)
    if spec is None or spec.stateful or module is None or not is_call(module):
        return None
    given = inspect.signature(module_class(module["target"])).bind(
        *module["args"], **module["kwargs"]).arguments
    accepts = inspect.signature(spec.formula.fn).parameters
    options = {name: literal(value) for name, value in given.items() if name in accepts}
    for name, value in _defaults(module["target"]).items():
        if name in accepts and name not in options:
            options[name] = repr(value)
    options.update({name: repr(value) for name, value in spec.fixed.items()})
    state = module.get("state", {})
    for name in AFFINE.get(node["target"], ()):
        options[name] = f"as_numpy({names[module['id']]}.{name})" if name in state else "None"
    args = [literal(a) for a in node["args"][1:]]
    args += [f"{k}={literal(v)}" for k, v in node["kwargs"].items()]
    args += [f"{k}={v}" for k, v in options.items()]
    return spec.formula, f"{spec.formula.name}({', '.join(args)})"


def _defaults(target: str) -> dict[str, Any]:
    parameters = inspect.signature(module_class(target)).parameters
    return {name: p.default for name, p in parameters.items()
            if p.default is not inspect.Parameter.empty}


def _returned(lines: list[str], finding: Finding) -> list[str] | None:
    """The body with its last line, ``return {label: value}``, returning the formula's value
    under the same label too."""
    try:
        tree = ast.parse(lines[-1].strip())
    except SyntaxError:
        return None
    stmt = tree.body[0] if tree.body else None
    if not isinstance(stmt, ast.Return) or not isinstance(stmt.value, ast.Dict) \
            or len(stmt.value.keys) != 1 or not isinstance(stmt.value.keys[0], ast.Constant):
        return None
    label = stmt.value.keys[0].value
    index = "".join(f"[{part}]" for part in finding.key.split(".")[1:])
    return [*lines[:-1],
            f"return {lines[-1].strip()[len('return '):]}, {{{label!r}: expected{index}}}"]


def formula_script(program: Program, finding: Finding, rtol: float, atol: float,
                   measured: str | None = None) -> str | None:
    """The script, or None where the finding is not a value of a call with a formula (a
    gradient, a module's buffer, a stateful module)."""
    if "!" in finding.key or finding.key.startswith(("grad:", "final:")) \
            or finding.key.split(".")[0] != finding.node:
        return None
    node = next((n for n in program["nodes"] if n["id"] == finding.node), None)
    names = variable_names(program)
    made = _call_source(program, node, names) if node is not None else None
    if made is None:
        return None
    formula, call = made
    lines, _ = body(program, finding, float_dtype="dtype")
    returned = _returned(lines, finding)
    if returned is None:
        return None
    lines = [*returned[:-1], f"expected = {call}", returned[-1]]
    imports, definitions = standalone(formula.module.__name__, formula.name)
    imports = sorted({*imports, "import json", "import sys", "import numpy as np",
                      "import torch"})
    doc = textwrap.fill(summary(formula.module.__name__, formula.name), 88,
                        initial_indent="    ", subsequent_indent="    ")
    return environment().get_template("upstream_formula_repro.py.j2").render(
        op=finding.op, doc=doc, rtol=rtol, atol=atol, measured=measured, body=lines,
        imports=_imports(imports), formula=definitions.strip())


def _imports(lines: list[str]) -> str:
    """The standard library's imports, then the others', each group sorted by module."""
    def module(line: str) -> str:
        return line.split()[1].split(".")[0]

    stdlib = [line for line in lines if module(line) in sys.stdlib_module_names]
    others = [line for line in lines if module(line) not in sys.stdlib_module_names]
    return "\n".join(sorted(stdlib, key=module)) + "\n\n" + "\n".join(
        sorted(others, key=module))


def formula_repro(program: Program, finding: Finding, rtol: float, atol: float,
                  timeout: float = 120.0) -> tuple[str, int, str] | None:
    """The script with what one run of it measured in its header, its exit status and
    output; None where :func:`formula_script` gives none."""
    script = formula_script(program, finding, rtol, atol)
    if script is None:
        return None
    code, output = run_script(script, timeout=timeout, warm=True)
    status = status_line(output)
    measured = f"exit status {code}: {status.get('result')}" if status is not None else \
        f"exit status {code} (the script did not finish its check)"
    final = formula_script(program, finding, rtol, atol, measured)
    assert final is not None
    return final, code, output
