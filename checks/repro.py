"""Standalone repro scripts: reference vs candidate, and PyTorch alone for upstream reports.

A repro needs only the reference and the candidate installed: it holds the candidate's
prelude and nothing of alignbot. Its last output line is machine-readable::

    alignbot-repro: {"status": "mismatch", "kind": "value-mismatch", "op": "torch.topk"}

A repro counts as verified only when, run in an empty folder with the candidate's import
path, it fails in the way the finding says (same kind, same op, exit 1) and its control run
(``--control``: the reference on both sides) agrees with exit 0. The candidate always runs in
a fresh interpreter: the script's own one when the prelude runs there, else the one the script
starts with ``--python``; a process that runs PyTorch alone (the control, and the reference
side of a two-process script) is a fork of a warm interpreter (:mod:`alignbot.checks.warm`).
"""

from __future__ import annotations

import ast
import contextlib
import json
import keyword
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import warm as warm_interpreters
from .candidate import CandidateConfig
from .codegen import statements, tensor_expr
from .compare import tolerance
from .findings import Finding, Kind
from .oracle import reference_observations
from .program import BackwardPlan, Program, call_args, call_kwargs, is_step
from .report import environment
from .repro_case import starts_the_candidate
from .runtime.dtypes import DEFAULT, FLOAT_DTYPES
from .runtime.literals import ref_of, refs
from .runtime.program_types import GRAD_AFTER
from .runtime.replay import NOT_COMPUTING_CALLS, NOT_COMPUTING_METHODS, NOT_COMPUTING_PREFIXES
from .signatures import node_of

STATUS_PREFIX = "alignbot-repro: "
LINE_LIMIT = 100  # the project's ruff line length, which generated scripts keep
POSITIONAL = ("x", "y", "z")
RESERVED = {"torch", "np", "call", "device", "dtype", "case", "grads", "inner", "out",
            "grad_out", "self", "sys", "json", "low", "high", "results", "hooks", "compare",
            "main", "module", "importlib", "argparse", "subprocess", "tempfile"}
# what the engine calls a differing value, by where it was observed
GRAD_KIND, STATE_KIND, VALUE_KIND = "grad-mismatch", "state-mismatch", "value-mismatch"


@dataclass
class Repro:
    script: str
    verified: bool
    output: str
    note: str = ""  # why it is not verified (empty when it is)


def variable_names(program: Program) -> dict[str, str]:
    """Names for what the nodes are: ``x``/``weight`` for inputs (by the argument they feed),
    ``module``, ``out`` for the last call's result, ``tmp`` for results in between."""
    nodes = program["nodes"]
    used: set[str] = set()

    def take(base: str) -> str:
        if base in RESERVED or keyword.iskeyword(base) or not base.isidentifier():
            base = base + "_" if base.isidentifier() else "x"
        name, number = base, 2
        while name in used:
            name, number = f"{base}{number}", number + 1
        used.add(name)
        return name

    roles: dict[str, str] = {}
    for node in nodes:
        if not is_step(node):
            continue
        args = call_args(node)[1:] if node["op"] == "invoke" else call_args(node)
        for position, arg in enumerate(args):
            for ref in refs(arg):
                roles.setdefault(ref, POSITIONAL[position] if position < len(POSITIONAL)
                                 else f"arg{position}")
        for key, value in call_kwargs(node).items():
            for ref in refs(value):
                roles.setdefault(ref, key)
    calls = [n["id"] for n in nodes if is_step(n)]
    names: dict[str, str] = {}
    for node in nodes:
        if node["op"] == "module":
            names[node["id"]] = take("module") if "module" not in used else take("module_")
        elif node["op"] == "input":
            names[node["id"]] = take(roles.get(node["id"], "x"))
        elif node["id"] == calls[-1]:
            names[node["id"]] = "out"
        else:
            names[node["id"]] = take("tmp")
    return names


def _ref_name(names: dict[str, str], node_id: str) -> str:
    base, *indices = node_id.split(".")
    return names[base] + "".join(f"[{index}]" for index in indices)


def _returns(program: Program, finding: Finding, names: dict[str, str],
             float_dtype: str | None = None, device: bool = False) -> tuple[list[str], str]:
    """The lines that compute and return what diverged (the call's output, the mutated
    tensor, a module buffer, or gradients), and what a differing value there is called."""
    nodes = {n["id"]: n for n in program["nodes"]}
    key = finding.key
    plan = program.get("backward")
    if GRAD_AFTER in key:  # a leaf's .grad just after the program's own backward
        base, _, attr = key.split(GRAD_AFTER, 1)[1].partition(":")
        expr = (f"{names[base]}.{attr}" if attr else _ref_name(names, base)) + ".grad"
        return [f"return {{{expr!r}: {expr}}}"], GRAD_KIND
    if (finding.kind is Kind.GRAD or key == "backward") and plan:
        return _grad_lines(program, plan, names, float_dtype, device), GRAD_KIND
    if "!self" in key:
        node = nodes[node_of(key)]
        target = names[ref_of(call_args(node)[1 if node["op"] == "invoke" else 0])]
        return [f"return {{{target + ' after the call'!r}: {target}}}"], STATE_KIND
    if "!" in key and "!state." not in key:  # an argument the call wrote into (``!arg1``)
        node, where = nodes[node_of(key)], key.split("!", 1)[1]
        position = where[3:]
        value = call_args(node)[int(position)] if where.startswith("arg") and \
            position.isdigit() else call_kwargs(node)[where]
        target = names[ref_of(value)]
        return [f"return {{{target + ' after the call'!r}: {target}}}"], STATE_KIND
    if "!state." in key:
        module = names[ref_of(call_args(nodes[node_of(key)])[0])]
        buffer = key.split("!state.", 1)[1]
        return [f"return {{{module + '.' + buffer!r}: {module}.{buffer}}}"], STATE_KIND
    if key.startswith("final:"):
        name = names.get(key[len("final:"):], "out")
        return [f"return {{{name!r}: {name}}}"], STATE_KIND
    node_id = finding.node if finding.node in names else program["nodes"][-1]["id"]
    if "." in key and "!" not in key and not key.startswith("grad:") \
            and node_of(key) in names:
        expr = _ref_name(names, key)
        return [f"return {{{expr!r}: {expr}}}"], VALUE_KIND
    name = names[node_id]
    return [f"return {{{name!r}: {name}}}"], VALUE_KIND


def _grad_lines(program: Program, plan: BackwardPlan, names: dict[str, str],
                float_dtype: str | None, device: bool) -> list[str]:
    ref = reference_observations(program)
    outs = [_ref_name(names, out_id) for out_id in plan["outputs"]]
    lines, seeds = [], []
    for number, (out_id, seed) in enumerate(zip(plan["outputs"], plan["seeds"], strict=True)):
        obs = ref.get(out_id) or {}
        seed_name = "grad_out" if len(outs) == 1 else f"grad_out{number}"
        expr = tensor_expr(seed, obs.get("dtype", DEFAULT), obs.get("shape", []), False,
                           float_dtype)
        lines.append(f"{seed_name} = {expr}" + (".to(device)" if device else ""))
        seeds.append(seed_name)

    def leaf(key: str) -> str:
        base, _, attr = key.partition(":")
        return f"{names[base]}.{attr}" if attr else _ref_name(names, base)

    wrt = [leaf(k) for k in plan["wrt"]]
    inner = [leaf(k) for k in plan.get("intermediates") or []]
    retain = ", retain_graph=True" if inner else ""
    lines.append(f"grads = torch.autograd.grad([{', '.join(outs)}], [{', '.join(wrt)}], "
                 f"[{', '.join(seeds)}], allow_unused=True{retain})")
    pairs = [f"{'grad ' + w!r}: grads[{i}]" for i, w in enumerate(wrt)]
    if inner:
        lines.append(f"inner = torch.autograd.grad([{', '.join(outs)}], [{', '.join(inner)}],"
                     f" [{', '.join(seeds)}], allow_unused=True)")
        pairs += [f"{'grad ' + w!r}: inner[{i}]" for i, w in enumerate(inner)]
    lines.append("return {" + ", ".join(pairs) + "}")
    return lines


def body(program: Program, finding: Finding, hooked: bool = False, device: bool = False,
         float_dtype: str | None = None) -> tuple[list[str], str]:
    """The lines of ``case()``: the inputs, the call (the backward call with its upstream
    gradient for gradient findings) and what it returns; and the kind of a differing value."""
    program = through_finding(program, finding)
    names = variable_names(program)
    lines = list(statements(program, wrap=hooked, float_dtype=float_dtype, names=names,
                            device=device))
    returns, value_kind = _returns(program, finding, names, float_dtype, device)
    assigned = re.match(r"^(\w+) = (.*)$", lines[-1]) if lines else None
    if assigned and not any(re.search(rf"\b{assigned[1]}\b", r) for r in returns):
        # the result is not what is compared (an in-place call's): call, do not name it
        lines[-1:] = [] if assigned[2].isidentifier() else [assigned[2]]
    return [piece for line in lines + returns for piece in fold(line, LINE_LIMIT - 4)], \
        value_kind


def through_finding(program: Program, finding: Finding) -> Program:
    """The program up to the call where the finding's value is read when that value is
    the ``.grad`` a backward call leaves (a later ``zero_grad()`` would clear it), else the
    program as it is."""
    if GRAD_AFTER not in finding.key:
        return program
    at = node_of(finding.key)
    index = next((i for i, n in enumerate(program["nodes"]) if n["id"] == at), None)
    if index is None:
        return program
    return {**program, "nodes": program["nodes"][:index + 1]}


def fold(line: str, limit: int) -> list[str]:
    """``line`` broken after commas inside brackets (never inside a string) into lines of at
    most ``limit`` characters where it can be; continuation lines are indented 4 more."""
    if len(line) <= limit:
        return [line]
    pieces: list[str] = []
    start, cut, depth, quote = 0, -1, 0, ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote and line[index - 1] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char == "#":  # a comment: nothing after it may be broken
            break
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth > 0:
            cut = index + 1
        width = index - start + (4 if pieces else 0)
        if width >= limit and cut > start:
            pieces.append(line[start:cut].rstrip())
            start, cut = cut, -1
            while start < len(line) and line[start] == " ":
                start += 1
    pieces.append(line[start:])
    return [pieces[0]] + ["    " + piece for piece in pieces[1:]]


HOOKS = ("alignbot_overrides", "alignbot_wrap", "alignbot_device", "alignbot_program",
         "alignbot_wrap_also")


def _in_prelude(prelude: str, name: str) -> bool:
    return re.search(rf"\b{name}\b", prelude) is not None


def _prelude_lines(prelude: str) -> list[str]:
    """The prelude as the body of a function (one that declares ``global torch``); a prelude
    that cannot be a function body (``import *``, ``global``) runs through ``exec``."""
    source = textwrap.dedent(prelude).strip("\n")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    blocked = tree is None or any(
        isinstance(n, (ast.Global, ast.Nonlocal)) or
        (isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names))
        for n in ast.walk(tree))
    if not blocked and source:
        wrapped = "def f():\n" + textwrap.indent(source, "    ") + "\n"
        try:
            inner = ast.parse(wrapped).body[0]
            assert isinstance(inner, ast.FunctionDef) and tree is not None
            blocked = ast.dump(ast.Module(body=inner.body, type_ignores=[])) != ast.dump(tree)
        except SyntaxError:
            blocked = True
    if blocked:  # the hooks it defines are named here too, so that linters see them
        return [f"    exec(compile({source!r}, '<prelude>', 'exec'), globals())"] + [
            f"    {name} = globals().get({name!r})" for name in HOOKS if _in_prelude(source, name)]
    lines = textwrap.indent(source, "    ").splitlines()
    return ["    # the candidate's prelude, as given to alignbot", *lines]


def needs_two_processes(config: CandidateConfig, finding: Finding) -> bool:
    """Another interpreter, or a candidate that may kill or hang the process it runs in."""
    return config.python != sys.executable or finding.kind in (
        Kind.CANDIDATE_CRASH, Kind.CANDIDATE_TIMEOUT)


def render(program: Program, finding: Finding, config: CandidateConfig, rtol: float,
           atol: float, two_process: bool | None = None) -> str:
    """The repro script. ``two_process`` None chooses: one interpreter unless it must not."""
    if two_process is None:
        two_process = needs_two_processes(config, finding)
    prelude = config.prelude
    wrap, device = _in_prelude(prelude, "alignbot_wrap"), _in_prelude(prelude, "alignbot_device")
    has_overrides = _in_prelude(prelude, "alignbot_overrides") or bool(config.overrides)
    hooked = wrap or has_overrides
    lines, value_kind = body(program, finding, hooked=hooked, device=device)
    setup = []
    if hooked:
        setup.append("overrides = " + ("dict(alignbot_overrides)"
                                       if _in_prelude(prelude, "alignbot_overrides") else "{}"))
        for api, target in sorted(config.overrides.items()):
            module, _, attr = target.partition(":")
            setup.append(f"# --override {api}={target}")
            line = f"overrides[{api!r}] = importlib.import_module({module!r}).{attr}"
            if len(line) > LINE_LIMIT - 4:
                setup.append(f"imported = importlib.import_module({module!r})")
                line = f"overrides[{api!r}] = imported.{attr}"
            setup.append(line)
    also = ", alignbot_wrap_also" if _in_prelude(prelude, "alignbot_wrap_also") else ""
    hook_args = (", hooks(overrides, " + ("alignbot_wrap" if wrap else "None") + also + ")"
                 if hooked else "") + (", alignbot_device" if device else "")
    reference_args = (", hooks({}, None)" if hooked else "") + (', "cpu"' if device else "")
    prelude_lines = _prelude_lines(prelude)
    script = environment().get_template("repro.py.j2").render(
        fingerprint=finding.fingerprint, kind=finding.kind.value, op=finding.op,
        rtol=rtol, atol=atol, value_kind=value_kind, timeout=f"{config.timeout:g}",
        start=f"{config.start_timeout:g}",
        body=lines, hooked=hooked, device=device, two_process=two_process,
        prelude=prelude_lines, setup=setup, hook_args=hook_args,
        reference_args=reference_args, overrides=bool(config.overrides),
        program=_in_prelude(prelude, "alignbot_program"),
        uses_numpy=any("np." in line for line in lines),
        long_prelude=any(len(line) > LINE_LIMIT for line in prelude_lines),
        not_computing_prefixes=list(NOT_COMPUTING_PREFIXES),
        not_computing_calls=sorted(NOT_COMPUTING_CALLS),
        not_computing_methods=sorted(NOT_COMPUTING_METHODS))
    return script


def tolerances(program: Program, finding: Finding, rtol: float | None, atol: float | None
               ) -> tuple[float, float]:
    ref = reference_observations(program)
    obs = ref.get(finding.key) or {}
    return tolerance(obs.get("dtype", DEFAULT), rtol, atol)


def candidate_env(config: CandidateConfig) -> dict[str, str]:
    """The environment a user running the repro has: the candidate's environment, with the
    folders the candidate imports from on PYTHONPATH (the worker puts them on sys.path)."""
    env = dict(config.env if config.env is not None else os.environ)
    paths = [os.path.abspath(p) for p in config.sys_path]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_script(script: str, python: str = sys.executable, timeout: float = 600.0,
               args: list[str] | None = None, env: dict[str, str] | None = None,
               warm: bool = False) -> tuple[int, str]:
    """Run a script in a fresh interpreter in an empty folder; its exit status and output
    (stdout, then stderr). It runs in a session of its own, killed whole when it times out
    or this process is stopped: the candidate side a repro starts goes with it. ``warm``:
    a script that needs PyTorch alone runs in a fork of a warm interpreter started with the
    same ``env`` instead (:mod:`alignbot.checks.warm`), unless ``ALIGNBOT_FRESH_ORACLES`` asks for
    fresh ones."""
    with tempfile.TemporaryDirectory(prefix="alignbot-repro-") as tmp:
        path = Path(tmp) / "repro.py"
        path.write_text(script)
        if warm and not warm_interpreters.fresh_only():
            interpreter = warm_interpreters.shared(python, env)
            code, output = interpreter.run(path, list(args or []), timeout)
            return code, _in_folder(output, tmp)
        with subprocess.Popen([python, str(path), *(args or [])], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp, env=env,
                              start_new_session=True) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                return -1, f"the repro did not finish within {timeout:g} s"
            finally:  # also what the script left running, and when this process is stopped
                _kill_session(proc)
    return proc.returncode, _in_folder(stdout, tmp)[-3000:] + _in_folder(stderr, tmp)[-3000:]


def _in_folder(output: str, folder: str) -> str:
    """The output as it reads from the script's folder (``repro.py:28: UserWarning``): the
    throwaway folder's name differs each run, and a report says the same for the same seed."""
    for name in {os.path.realpath(folder), folder}:
        output = output.replace(name + os.sep, "")
    return output


def _kill_session(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def status_line(output: str) -> dict[str, Any] | None:
    """The machine-readable status the script printed last, if it got that far."""
    for line in reversed(output.splitlines()):
        if line.startswith(STATUS_PREFIX):
            try:
                status: dict[str, Any] = json.loads(line[len(STATUS_PREFIX):])
                return status
            except json.JSONDecodeError:
                return None
    return None


def verify(script: str, finding: Finding, config: CandidateConfig, timeout: float) -> Repro:
    """Run the repro as a user would (empty folder, the candidate's interpreter and import
    path, the candidate in a fresh interpreter): verified when it fails with the finding's
    kind at the finding's op, and its control run agrees."""
    two_process = starts_the_candidate(script)
    args = ["--python", config.python] if two_process else []
    env = candidate_env(config)
    if two_process:
        # The script's own process runs the reference alone, as the control does: both
        # start from a warm fork; the candidate's interpreter, which the script starts
        # itself, is always fresh.
        control_code, control = run_script(script, timeout=timeout, args=[*args, "--control"],
                                           env=env, warm=True)
        code, output = run_script(script, timeout=timeout, args=args, env=env, warm=True)
    else:
        with ThreadPoolExecutor(1) as pool:
            # The control run needs the reference alone: a warm fork, while the
            # candidate's run, the one a user sees, gets its fresh interpreter.
            control_run = pool.submit(run_script, script, timeout=timeout,
                                      args=[*args, "--control"], env=env, warm=True)
            code, output = run_script(script, timeout=timeout, args=args, env=env)
            control_code, control = control_run.result()
    status = status_line(output)
    expected = {"status": "mismatch", "kind": finding.kind.value, "op": finding.op}
    if status is None:
        note = f"the repro exited with status {code} without a result line"
    elif status != expected or code != 1:
        note = (f"the repro reported {json.dumps(status)} with exit status {code}; "
                f"expected {json.dumps(expected)} with exit status 1")
    else:
        control_status = status_line(control)
        if control_code == 0 and control_status is not None \
                and control_status.get("status") == "agree":
            return Repro(script, True, output)
        note = (f"the control run (--control) did not agree: exit status {control_code}, "
                f"{json.dumps(control_status)}")
        output = output + "\n--- control ---\n" + control
    return Repro(script, False, output, note)


def make(program: Program, finding: Finding, config: CandidateConfig, rtol: float,
         atol: float, timeout: float) -> Repro:
    """The repro for a finding, verified: one interpreter when that reproduces it, else the
    two-process form; an unverified repro keeps the reason."""
    two = needs_two_processes(config, finding)
    first = verify(render(program, finding, config, rtol, atol, two), finding, config, timeout)
    if first.verified or two:
        return first
    second = verify(render(program, finding, config, rtol, atol, True), finding, config,
                    timeout)
    if second.verified:
        return second
    first.note = f"{first.note}; in two processes: {second.note}"
    return first


def render_reference_only(program: Program, finding: Finding, mode: str, claim: str,
                          rtol: float, atol: float, dtype: str = DEFAULT,
                          declared_invalid: bool = False, measured: str | None = None) -> str:
    """PyTorch alone: ``numeric`` compares the call with its float64 self (floating results
    within tolerance, integer and boolean results exactly); ``raises`` shows the reference
    raising; ``accepts`` shows it accepting an input the spec declares invalid (without that
    declaration the script only runs the call: there is nothing it can check). ``measured``
    is what a run of the script printed last: the header says only that."""
    if mode == "accepts" and not declared_invalid:
        mode = "runs"
    lines, _ = body(program, finding, float_dtype="dtype" if mode == "numeric" else None)
    checks = {
        "numeric": f"whether {finding.op} in {dtype} agrees with the same call in float64 "
                   "(floating results within rtol/atol, integer and boolean results exactly)",
        "raises": f"whether {finding.op} raises on this input",
        "accepts": f"whether {finding.op} raises on this input, which the spec declares "
                   "invalid",
        "runs": f"nothing: it runs {finding.op} and prints the result",
    }[mode]
    return environment().get_template("repro_reference.py.j2").render(
        op=finding.op, checks=checks, body=lines, mode=mode, rtol=rtol, atol=atol,
        dtype=dtype if dtype in FLOAT_DTYPES else DEFAULT, measured=measured,
        uses_numpy=any("np." in line for line in lines))


def reference_only(program: Program, finding: Finding, mode: str, claim: str, rtol: float,
                   atol: float, dtype: str = DEFAULT, declared_invalid: bool = False,
                   timeout: float = 120.0) -> tuple[str, int, str]:
    """The PyTorch-alone script with its header stating what one run of it measured; the
    script, that run's exit status and output."""
    script = render_reference_only(program, finding, mode, claim, rtol, atol, dtype,
                                   declared_invalid)
    code, output = run_script(script, timeout=timeout, warm=True)
    status = status_line(output)
    if status is not None:
        measured = f"exit status {code}: {status.get('result')}"
    else:
        measured = f"exit status {code} (the script did not finish its check)"
    script = render_reference_only(program, finding, mode, claim, rtol, atol, dtype,
                                   declared_invalid, measured)
    return script, code, output


def describe(value: Any) -> str:
    return str(value)
