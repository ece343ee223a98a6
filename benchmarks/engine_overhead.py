"""Measure what the engine costs over the same calls made by hand on both sides, and peak memory.

Every drawn program is timed three ways, in rounds whose phase order rotates:

* **direct**: a hand-written differential test of that program, generated as straight-line
  Python (:func:`direct_source`; ``--print-direct`` shows them): build the inputs on the
  reference and on the candidate, make each call on both sides, copy a module's initial state
  to the candidate's module, compare every tensor a call returns (and every argument an
  in-place call mutates, every module buffer) with ``torch.testing.assert_close``, run backward
  with the same upstream gradients on both sides and compare the gradients. Both sides run in
  this process, as a hand-written test would; writing the test (code generation, ``compile``)
  is not timed.
* **calls**: the same test without its asserts: the bare work of both sides.
* **engine**: what ``alignbot.checks.engine.check`` does per program once the draw is made: trace
  the
  program on the reference (replaying its recorded choices, so without Hypothesis), send it
  to the candidate worker process, which replays and observes it and sends the observations
  back, and judge them. The worker is started and warmed up before any timing.

What Hypothesis adds per draw is measured apart, and so is a whole ``check()``, which is what
a user waits for. Each figure is a program's median over the rounds, averaged over programs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from alignbot.checks import CandidateConfig, CandidateProcess, engine, preset
from alignbot.checks.codegen import render_literal
from alignbot.checks.dsl import DrawContext
from alignbot.checks.engine import (
    Observations,
    Program,
    Stats,
    check,
    draw_programs,
    evaluate,
    finish,
)
from alignbot.checks.engine import trace_program as trace
from alignbot.checks.runtime.literals import is_ref, ref_of
from alignbot.checks.runtime.program_types import (
    BackwardPlan,
    CallNode,
    EncodedLiteral,
    Node,
    Recipe,
)
from alignbot.checks.runtime.replay import _from_numpy as from_numpy
from alignbot.checks.runtime.replay import make_input
from alignbot.checks.runtime.values import make_array
from alignbot.checks.spec import Spec
from alignbot.checks.spec_loading import library_specs

TARGET = 1.5
PER_FAMILY = 4
SIDES = {"r": "ref", "c": "cand"}


# --- the hand-written test, generated from a Program ------------------------------------------

def _var(value_id: str, side: str) -> str:
    """``v3`` -> ``r_v3``; ``v3.1`` (an element of a tuple result) -> ``r_v3[1]``."""
    head, *rest = value_id.split(".")
    return f"{side}_{head}" + "".join(f"[{int(i)}]" for i in rest)


def _param(key: str, side: str) -> str:
    """A gradient target: ``v0``, ``v3.1`` or ``v2:weight`` (a module's parameter)."""
    node_id, _, name = key.partition(":")
    return _var(node_id, side) + "".join(f".{part}" for part in name.split(".") if part)


def _api(path: str, side: str) -> str:
    """``torch.nn.functional.gelu`` -> ``ref.nn.functional.gelu``."""
    return SIDES[side] + path[len("torch"):]


def _expr(value: EncodedLiteral, side: str) -> str:
    """Python source for one Program literal."""
    return render_literal(value, lambda ref: _var(ref, side), module=SIDES[side])


def _call(node: CallNode, side: str) -> str:
    args = [_expr(a, side) for a in node["args"]]
    for key, value in node["kwargs"].items():
        args.append(f"{key}={_expr(value, side)}" if key.isidentifier()
                    else f"**{{{key!r}: {_expr(value, side)}}}")
    op = node["op"]
    if op in ("call", "module"):
        return f"{_api(node['target'], side)}({', '.join(args)})"
    if op == "invoke":
        return f"{args[0]}({', '.join(args[1:])})"
    if op == "method":
        return f"{args[0]}.{node['name']}({', '.join(args[1:])})"
    if op == "getattr":
        return f"{args[0]}.{node['name']}"
    raise ValueError(f"unknown node op {op!r}")


def _compare(value_id: str, ref: Observations) -> list[str]:
    """The assertions a test writer would make about one value, as the engine observes it."""
    obs = ref.get(value_id)
    if obs is None:
        return []
    if obs["t"] == "tensor":
        return [f"close({_var(value_id, 'c')}, {_var(value_id, 'r')})"]
    if obs["t"] == "value" and f"{value_id}.0" in ref:
        count = int(str(obs["value"]).rsplit(" ", 1)[-1])
        return [line for i in range(count) for line in _compare(f"{value_id}.{i}", ref)]
    if obs["t"] == "value":
        return [f"same({_var(value_id, 'c')}, {_var(value_id, 'r')})"]
    return []


def _node_lines(index: int, node: Node, ref: Observations) -> list[str]:
    node_id = node["id"]
    if node["op"] == "input":
        return [f"{_var(node_id, s)} = make_input({SIDES[s]}, N[{index}])" for s in SIDES]
    if node.get("raises"):
        return [line for s in SIDES
                for line in ("with expect_raise():", f"    {_var(node_id, s)} = {_call(node, s)}")]
    lines = [f"{_var(node_id, s)} = {_call(node, s)}" for s in SIDES]
    if node["op"] == "module":
        if node.get("state"):
            lines.append(f"c_{node_id}.load_state_dict(r_{node_id}.state_dict())")
        return lines
    lines += _compare(node_id, ref)
    first = (node["args"] or [None])[0]
    if node.get("inplace") and is_ref(first):
        lines.append(f"close({_var(first['ref'], 'c')}, {_var(first['ref'], 'r')})")
    if node["op"] == "invoke":
        module = ref_of(node["args"][0])
        for key in ref:
            if key.startswith(f"{node_id}!state."):
                name = key.split("!state.", 1)[1]
                lines.append(f"close({_var(module, 'c')}.get_buffer({name!r}), "
                             f"{_var(module, 'r')}.get_buffer({name!r}))")
    return lines


def _backward_lines(plan: BackwardPlan | None, ref: Observations) -> list[str]:
    """Backward as the engine runs it: seeded upstream gradients, then one ``autograd.grad``
    for the leaves and, when the plan lists them, one for the intermediates."""
    if not plan:
        return []
    groups = [plan["wrt"], *([plan["intermediates"]] if plan.get("intermediates") else [])]
    raised = "backward" in ref
    lines = []
    for s in SIDES:
        outs = ", ".join(_var(o, s) for o in plan["outputs"])
        seeds = ", ".join(f"seed_grad({SIDES[s]}, S[{i}], {_var(o, s)})"
                          for i, o in enumerate(plan["outputs"]))
        body = [f"{s}_seeds = [{seeds}]"]
        for number, keys in enumerate(groups):
            retain = ", retain_graph=True" if number + 1 < len(groups) else ""
            wrt = ", ".join(_param(k, s) for k in keys)
            body.append(f"{s}_grads{number} = {SIDES[s]}.autograd.grad([{outs}], [{wrt}], "
                        f"grad_outputs={s}_seeds, allow_unused=True{retain})")
        lines += ["with expect_raise():", *(f"    {line}" for line in body)] if raised else body
    if raised:
        return lines
    return lines + [f"close(c_grads{number}, r_grads{number})" for number in range(len(groups))]


def direct_source(program: Program, ref: Observations) -> str:
    """The program as a hand-written differential test: ``direct(ref, cand)``."""
    body: list[str] = []
    for index, node in enumerate(program["nodes"]):
        body += _node_lines(index, node, ref)
    body += _backward_lines(program.get("backward"), ref)
    body += [line for key in ref if key.startswith("final:")
             for line in _compare(key[len("final:"):], ref)]
    return "def direct(ref, cand):\n" + "".join(f"    {line}\n" for line in body)


class _ExpectRaise(contextlib.AbstractContextManager[None]):
    """``pytest.raises(Exception)`` without pytest."""

    def __exit__(self, kind: object, *rest: object) -> bool:
        if kind is None:
            raise AssertionError("expected the call to raise")
        return True


def _seed_grad(side: Any, recipe: Recipe, out: Any) -> Any:
    # The engine's own tensor builder, so that both paths build the same upstream gradient.
    return from_numpy(side, make_array(recipe, "float64", list(out.shape))).to(out.dtype)


def compile_direct(program: Program, ref: Observations, spec: Spec, compare: bool = True
                   ) -> Callable[[], None]:
    """The direct test as a function; ``compare=False`` keeps the calls and drops the asserts."""
    tolerance: dict[str, Any] = {} if spec.rtol is None else {"rtol": spec.rtol,
                                                                "atol": spec.atol}
    close: Callable[..., None] = functools.partial(torch.testing.assert_close, equal_nan=True,
                                                   **tolerance)

    def same(actual: Any, expected: Any) -> None:
        if actual != expected:
            close(actual, expected)

    def skip(actual: Any, expected: Any) -> None:
        pass

    plan = program.get("backward")
    namespace: dict[str, Any] = {
        "N": program["nodes"], "S": plan["seeds"] if plan else [], "make_input": make_input,
        "seed_grad": _seed_grad, "close": close if compare else skip,
        "same": same if compare else skip, "expect_raise": _ExpectRaise}
    code = compile(direct_source(program, ref), f"<direct {spec.name}>", "exec")
    exec(code, namespace)
    direct = namespace["direct"]
    return lambda: direct(torch, torch)


# --- measuring --------------------------------------------------------------------------------

@dataclass
class Item:
    """One drawn program, its direct test (with and without asserts) and its timings, one
    entry per round."""

    spec: Spec
    program: Program
    direct: Callable[[], None]
    calls: Callable[[], None]
    direct_s: list[float] = field(default_factory=list)
    calls_s: list[float] = field(default_factory=list)
    trace_s: list[float] = field(default_factory=list)
    candidate_s: list[float] = field(default_factory=list)
    judge_s: list[float] = field(default_factory=list)

    @property
    def engine_s(self) -> list[float]:
        return [sum(t) for t in zip(self.trace_s, self.candidate_s, self.judge_s, strict=True)]


@dataclass
class Tally:
    """What went wrong along the way (all zero when torch is checked against itself)."""

    skipped_specs: dict[str, str] = field(default_factory=dict)
    skipped_programs: int = 0
    direct_failures: int = 0
    engine_findings: int = 0


def draw(spec: Spec, n: int, seed: int) -> list[tuple[Program, Observations]]:
    drawn: list[tuple[Program, Observations]] = []
    draw_programs(spec, n, seed, lambda program, ref: drawn.append((program, ref)))
    return drawn


def collect(specs: Sequence[Spec], n: int, seed: int, tally: Tally) -> list[Item]:
    """Draw each spec's programs once, as ``check()`` would, and write their direct tests."""
    items: list[Item] = []
    for spec in specs:
        try:
            drawn = draw(spec, n, seed)
        except Exception as exc:  # a library spec being written may be broken: skip it
            tally.skipped_specs[spec.name] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        for program, ref in drawn:
            try:
                items.append(Item(spec, program, compile_direct(program, ref, spec),
                                  compile_direct(program, ref, spec, compare=False)))
            except (ValueError, SyntaxError):
                tally.skipped_programs += 1
    return items


def run_direct(test: Callable[[], None], tally: Tally) -> float:
    start = time.perf_counter()
    try:
        test()
    except AssertionError:
        tally.direct_failures += 1
    return time.perf_counter() - start


def run_engine(item: Item, candidate: CandidateProcess, tally: Tally) -> tuple[float, ...]:
    """Trace (choices replayed, no Hypothesis), candidate round trip, judge: ``evaluate``."""
    start = time.perf_counter()
    program, ref = trace(item.spec, DrawContext(choices=item.program["choices"]))
    traced = time.perf_counter() - start
    stats = Stats()
    start = time.perf_counter()
    if evaluate(item.spec, program, ref, candidate, stats):
        tally.engine_findings += 1
    evaluated = time.perf_counter() - start
    # the round trip (submit: encode and send; collect: wait and decode) is all but the judge
    return traced, evaluated - stats.judge_s, stats.judge_s


def run_pipelined(items: list[Item], candidate: CandidateProcess, tally: Tally) -> float:
    """The engine as ``check()`` runs it: one program in flight, so the worker replays
    program k while this process judges k-1 and traces k+1. Mean seconds per program."""
    start = time.perf_counter()
    pending: tuple[Spec, Program, Observations] | None = None
    for item in items:
        program, ref = trace(item.spec, DrawContext(choices=item.program["choices"]))
        if pending is not None and finish(*pending, candidate):
            tally.engine_findings += 1
        candidate.submit(program)
        pending = (item.spec, program, ref)
    if pending is not None and finish(*pending, candidate):
        tally.engine_findings += 1
    return (time.perf_counter() - start) / max(len(items), 1)


def _phases(items: list[Item], candidate: CandidateProcess, tally: Tally,
            pipelined: list[float]) -> list[Callable[[], None]]:
    def direct() -> None:
        for item in items:
            item.direct_s.append(run_direct(item.direct, tally))

    def calls() -> None:
        for item in items:
            item.calls_s.append(run_direct(item.calls, tally))

    def engine() -> None:
        for item in items:
            timings = run_engine(item, candidate, tally)
            for store, value in zip((item.trace_s, item.candidate_s, item.judge_s), timings,
                                    strict=True):
                store.append(value)
        pipelined.append(run_pipelined(items, candidate, tally))

    return [direct, engine, calls]


def run_rounds(items: list[Item], candidate: CandidateProcess, repeat: int, tally: Tally,
               pipelined: list[float]) -> None:
    """An untimed warm-up, then ``repeat`` rounds of three phases (direct, engine, calls only)
    whose order rotates. Phases, not program-by-program alternation: right after a worker
    round trip the worker's OpenMP threads still spin and would slow the direct calls down,
    a cost no hand-written test pays."""
    for item in items:
        item.direct()
        item.calls()
        run_engine(item, candidate, Tally())
    phases = _phases(items, candidate, tally, pipelined)
    for round_ in range(repeat):
        for phase in phases[round_ % 3:] + phases[:round_ % 3]:
            phase()


def time_draws(specs: Sequence[Spec], n: int, seed: int, repeat: int) -> tuple[float, float]:
    """Median seconds per program that drawing with Hypothesis adds around ``trace_program``,
    and the trace itself there (timed in the same pass by wrapping the engine's reference to
    it): under Hypothesis the trace runs with a deeper stack than when choices are replayed."""
    overheads, traces = [], []
    spent, drawn = [0.0], [0]

    def timed_trace(spec: Spec, ctx: DrawContext,
                    explorer: Any = None) -> tuple[Program, Observations]:
        start = time.perf_counter()
        try:
            return trace(spec, ctx, explorer)
        finally:
            spent[0] += time.perf_counter() - start
            drawn[0] += 1

    with _patched(engine, "trace_program", timed_trace):
        for _ in range(repeat):
            spent[0], drawn[0] = 0.0, 0
            start = time.perf_counter()
            for spec in specs:
                draw_programs(spec, n, seed, lambda p, r: None)
            overheads.append((time.perf_counter() - start - spent[0]) / max(drawn[0], 1))
            traces.append(spent[0] / max(drawn[0], 1))
    return statistics.median(overheads), statistics.median(traces)


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)


def time_check(specs: Sequence[Spec], candidate: CandidateProcess, n: int, seed: int,
               repeat: int) -> tuple[float, int]:
    """Median seconds of a whole ``check()`` over the specs, and the programs it ran."""
    totals, programs = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = check(list(specs), candidate, seed=seed, n=n)
        totals.append(time.perf_counter() - start)
        programs = result.programs_run
    return statistics.median(totals), programs


def peak_rss_mib() -> float:
    """This process's peak resident set (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_peak_mib(candidate: CandidateProcess) -> float:
    """The worker's peak resident set, read before it exits (VmHWM)."""
    proc = candidate._proc
    if proc is None:
        return 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


# --- figures ----------------------------------------------------------------------------------

PARTS = ("direct", "calls", "engine", "trace", "candidate", "judge")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 4)


def _medians(items: list[Item], attr: str) -> list[float]:
    return [statistics.median(getattr(item, attr)) for item in items]


def _mean_ms(items: list[Item]) -> dict[str, float]:
    """Each program's median over the rounds, averaged over the programs, in ms."""
    return {part: _ms(sum(_medians(items, f"{part}_s")) / len(items)) for part in PARTS}


def per_spec(items: list[Item]) -> list[dict[str, Any]]:
    rows = []
    for name in sorted({item.spec.name for item in items}):
        mine = [item for item in items if item.spec.name == name]
        ms = _mean_ms(mine)
        rows.append({"spec": name, "programs": len(mine), **{f"{k}_ms": v for k, v in ms.items()},
                     "ratio": round(ms["engine"] / ms["direct"], 2)})
    return rows


def figures(items: list[Item], draws: tuple[float, float], check_s: float, check_programs: int,
            pipelined: list[float]) -> dict[str, Any]:
    ms = _mean_ms(items)
    ms["pipelined"] = _ms(statistics.median(pipelined))
    ratios = [e / d for e, d in zip(_medians(items, "engine_s"), _medians(items, "direct_s"),
                                    strict=True)]
    check_ms = _ms(check_s / max(check_programs, 1))
    return {
        "per_program_ms": {**ms, "draw_overhead": _ms(draws[0]),
                           "trace_in_draw": _ms(draws[1]),
                           "hypothesis": round(_ms(draws[0] + draws[1]) - ms["trace"], 4),
                           "check": check_ms},
        "ratio": {
            "pipelined_over_direct": round(ms["pipelined"] / ms["direct"], 2),
            "engine_over_direct": round(ms["engine"] / ms["direct"], 2),
            "median_program_ratio": round(statistics.median(ratios), 2),
            "engine_over_calls": round(ms["engine"] / ms["calls"], 2),
            "check_over_direct": round(check_ms / ms["direct"], 2),
            "target": TARGET,
            "meets_target": ms["pipelined"] / ms["direct"] <= TARGET,
        },
        "check_programs": check_programs,
    }


def render(data: dict[str, Any]) -> str:
    ms, ratio, rss = data["per_program_ms"], data["ratio"], data["peak_rss_mib"]
    rows = [
        ("direct: reference + candidate calls, assert_close", ms["direct"]),
        ("  the same calls without assert_close", ms["calls"]),
        ("engine, as check() runs it (one program in flight)", ms["pipelined"]),
        ("engine, one program at a time: trace + worker + judge", ms["engine"]),
        ("  trace on the reference", ms["trace"]),
        ("  candidate worker (IPC + replay)", ms["candidate"]),
        ("  judge", ms["judge"]),
        ("Hypothesis (not in engine): in all", ms["hypothesis"]),
        ("  around each draw", ms["draw_overhead"]),
        ("  the trace, choices drawn live (cf. trace above)", ms["trace_in_draw"]),
        ("whole check() per program", ms["check"]),
    ]
    lines = [f"{data['programs']} programs from {len(data['specs'])} specs, "
             f"{data['settings']['repeat']} rounds, torch threads: "
             f"{data['settings']['threads'] or 'default'}; ms per program "
             f"(median over rounds, mean over programs)"]
    lines += [f"  {label:52} {value:9.3f}" for label, value in rows]
    lines += [
        f"ratio engine/direct {ratio['pipelined_over_direct']:.2f}x (target <= {TARGET}x: "
        f"{'met' if ratio['meets_target'] else 'NOT met'}); one program at a time "
        f"{ratio['engine_over_direct']:.2f}x (median program "
        f"{ratio['median_program_ratio']:.2f}x); engine/calls {ratio['engine_over_calls']:.2f}x;"
        f" check()/direct {ratio['check_over_direct']:.2f}x",
        f"peak RSS: engine process {rss['engine_process']:.0f} MiB "
        f"({rss['engine_process_after_imports']:.0f} after imports), "
        f"worker {rss['worker']:.0f} MiB ({rss['worker_after_start']:.0f} after start)",
        "",
        f"  {'spec':36} {'n':>3} {'direct':>8} {'engine':>8} {'trace':>7} {'worker':>7} "
        f"{'judge':>6} {'ratio':>6}",
    ]
    lines += [f"  {r['spec'][:36]:36} {r['programs']:3d} {r['direct_ms']:8.3f} "
              f"{r['engine_ms']:8.3f} {r['trace_ms']:7.3f} {r['candidate_ms']:7.3f} "
              f"{r['judge_ms']:6.3f} {r['ratio']:5.1f}x" for r in data["by_spec"]]
    problems = data["problems"]
    if any(problems.values()):
        lines.append(f"problems: {json.dumps(problems)}")
    return "\n".join(lines)


# --- command line -----------------------------------------------------------------------------

def default_specs(per_family: int = PER_FAMILY) -> list[Spec]:
    """A mix that stays the same size as the library grows: from every family of the built-in
    library, ``per_family`` specs spread evenly over its sorted names."""
    families: dict[str, list[Spec]] = {}
    for spec in library_specs():
        families.setdefault(spec.name.split(".")[0], []).append(spec)
    chosen = []
    for specs in families.values():
        step = max(len(specs) / per_family, 1.0)
        chosen += [specs[int(i * step)] for i in range(min(per_family, len(specs)))]
    return sorted(chosen, key=lambda spec: spec.name)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="", metavar="GLOB,…",
                        help=f"specs to draw from (default: {PER_FAMILY} specs from every "
                             "family of the library; '*' for all)")
    parser.add_argument("--n", type=int, default=5, help="programs per spec (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds (default 7)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads in each process (default 1; 0: torch's choice)")
    parser.add_argument("--print-direct", action="store_true",
                        help="print the direct test written for each program, and stop")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the figures here")
    return parser.parse_args(argv)


def candidate_config(threads: int) -> CandidateConfig:
    config = preset("torch")
    if not threads:
        return config
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    return dataclasses.replace(config, env=env)


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """This process's torch threads for the duration (restored: tests call ``main``)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure(args: argparse.Namespace, specs: list[Spec]) -> dict[str, Any]:
    rss_imports = peak_rss_mib()
    tally = Tally()
    with torch_threads(args.threads), CandidateProcess(candidate_config(args.threads)) as candidate:
        worker_start = worker_peak_mib(candidate)
        items = collect(specs, args.n, args.seed, tally)
        if not items:
            raise SystemExit("no program could be drawn: " + json.dumps(tally.skipped_specs))
        specs = [s for s in specs if s.name not in tally.skipped_specs]
        pipelined: list[float] = []
        run_rounds(items, candidate, args.repeat, tally, pipelined)
        draws = time_draws(specs, args.n, args.seed, args.repeat)
        check_s, check_programs = time_check(specs, candidate, args.n, args.seed,
                                             max(1, min(args.repeat, 3)))
        worker_peak = worker_peak_mib(candidate)
    return {
        "specs": [s.name for s in specs], "programs": len(items),
        **figures(items, draws, check_s, check_programs, pipelined),
        "peak_rss_mib": {"engine_process": round(peak_rss_mib(), 1),
                         "engine_process_after_imports": round(rss_imports, 1),
                         "worker": round(worker_peak, 1),
                         "worker_after_start": round(worker_start, 1)},
        "by_spec": per_spec(items),
        "problems": {"skipped_specs": tally.skipped_specs,
                     "skipped_programs": tally.skipped_programs,
                     "direct_failures": tally.direct_failures,
                     "engine_findings": tally.engine_findings},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    patterns = [p for p in args.ops.split(",") if p]
    specs = ([s for s in library_specs() if s.matches(patterns)] if patterns
             else default_specs())
    if not specs:
        print(f"no spec matches {args.ops}", file=sys.stderr)
        return 2
    if args.print_direct:
        for spec in specs:
            for program, ref in draw(spec, args.n, args.seed):
                print(f"# {spec.name}\n{direct_source(program, ref)}")
        return 0
    data = {
        "command": ["benchmarks/engine_overhead.py",
                    *(sys.argv[1:] if argv is None else argv)],
        "settings": {"ops": patterns or "default", "n": args.n, "seed": args.seed,
                     "repeat": args.repeat, "threads": args.threads},
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "cpus": os.cpu_count(), "torch_default_threads": torch.get_num_threads()},
        **measure(args, specs),
    }
    print(render(data))
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
