"""Draw programs from specs, replay them on the candidate, judge every observation."""

from __future__ import annotations

import hashlib
import math
import random
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from .calls import judge_program, outcome_finding
from .candidate import CandidateProcess
from .capabilities import Capabilities
from .dsl import DrawContext
from .explore import Exploration, Explorer
from .findings import Finding, ancestors_of
from .hypothesis_compat import seed_only_draws
from .program import Observations, Program
from .runtime.region import PROGRAM_KEY
from .runtime.replay import seed as seed_reference
from .spec import Spec
from .trace import SpecError, TorchProxy, Tracer

__all__ = ["CheckResult", "Interrupted", "Merger", "Observations", "Program", "Stats", "check",
           "draw_programs", "evaluate", "finish", "outcome_finding", "run_spec",
           "trace_program"]


@dataclass
class Stats:
    """Where the time went; kept out of the JSON report so that it stays byte-identical."""

    trace_s: float = 0.0
    candidate_s: float = 0.0
    judge_s: float = 0.0
    worker_starts: int = 0
    # how a candidate with a program hook ran the programs: "region", or "eager: <why>"
    regions: dict[str, int] = field(default_factory=dict)

    def count_region(self, observations: Observations | None) -> None:
        note = (observations or {}).get(PROGRAM_KEY)
        if isinstance(note, dict):
            mode = str(note.get("mode"))
            key = f"{mode}: {note.get('reason')}" if note.get("reason") else mode
            self.regions[key] = self.regions.get(key, 0) + 1


@dataclass
class CheckResult:
    reference: str
    candidate: str
    seed: int
    specs_run: list[str] = field(default_factory=list)
    programs_run: int = 0
    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    complete: bool = True  # False: the run was interrupted and holds the findings so far
    packages: dict[str, str] = field(default_factory=dict)  # the prelude's, with versions
    exploration: list[Exploration] = field(default_factory=list)  # per spec run, in order
    # what the candidate declared it cannot do; the specs were checked accordingly
    capabilities: Capabilities = field(default_factory=Capabilities)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check`; ``result`` holds what was judged until then."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__("interrupted")
        self.result = result


def trace_program(spec: Spec, ctx: DrawContext,
                  explorer: Explorer | None = None) -> tuple[Program, Observations]:
    """Run the spec on the reference, recording a Program and the reference's observations;
    ``explorer`` steers the draw's choice points and sees which were drawn."""
    import torch

    program_seed = ctx.draw_int(0, 2**31 - 1)
    if explorer is not None:
        steering = explorer.steering(program_seed)
        ctx.steer, ctx.path = steering.plan, steering.path
        if steering.free:
            ctx.free = random.Random(program_seed)
    seed_reference(torch, program_seed)
    tracer = Tracer(torch, ctx)
    with ctx:
        try:
            outputs = spec.fn(TorchProxy(tracer, "torch", torch))
        except SpecError:
            raise
        except Exception as exc:
            if exc is not tracer.raised:
                where = spec_frame(exc)
                raise SpecError(f"spec {spec.name} raised on the reference: "
                                f"{type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
                                ) from exc
            outputs = None
        plan = tracer.finish(outputs, spec.backward, program_seed)
    program: Program = {"version": 1, "spec": spec.name, "seed": program_seed,
                        "choices": list(ctx.choices), "nodes": tracer.nodes, "backward": plan,
                        "expect_raise": spec.raises}
    if explorer is not None:
        explorer.record(ctx.points, ctx.choices)
    return program, tracer.observations


_ENGINE = Path(__file__).resolve().parent
_LIBRARY = _ENGINE / "library"  # the built-in specs: a spec's own lines, as a user's are
_INSTALLED = tuple({Path(p).resolve() for p in (sys.prefix, sys.base_prefix,
                                                sysconfig.get_paths()["stdlib"])})


def spec_frame(exc: BaseException) -> traceback.FrameSummary:
    """The line of the spec's own code that raised ``exc``: the innermost frame outside the
    engine and outside installed packages (torch, NumPy, the standard library), so a misuse
    of the DSL names the spec's line, not ``checks/dsl.py``; the innermost frame when there is
    none (the spec's code is all installed)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(_LIBRARY):
            return frame
        if not path.is_relative_to(_ENGINE) \
                and not any(path.is_relative_to(root) for root in _INSTALLED):
            return frame
    return frames[-1]


def evaluate(spec: Spec, program: Program, ref: Observations, candidate: CandidateProcess,
             stats: Stats | None = None, want: Finding | None = None) -> list[Finding]:
    candidate.submit(program)
    return finish(spec, program, ref, candidate, stats, want)


def finish(spec: Spec, program: Program, ref: Observations, candidate: CandidateProcess,
           stats: Stats | None = None, want: Finding | None = None) -> list[Finding]:
    """Collect the submitted program's outcome and judge it: every bug it shows
    (:func:`alignbot.checks.calls.judge_program`)."""
    stats = stats or Stats()
    start = time.perf_counter()
    outcome = candidate.collect()
    stats.candidate_s += time.perf_counter() - start
    stats.count_region(outcome.observations)
    start = time.perf_counter()
    found = judge_program(spec, program, ref, outcome, candidate, want)
    stats.judge_s += time.perf_counter() - start
    return found


def _spec_seed(seed: int, spec: Spec) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{spec.name}".encode()).digest()[:4], "big")


def draw_programs(spec: Spec, n: int, seed: int, visit: Callable[[Program, Observations], None],
                  steer: bool = True) -> Exploration:
    """Let Hypothesis draw up to ``n`` programs from one seed; ``visit`` sees each one. The
    first draws are steered to every alternative of the spec's choice points
    (:class:`alignbot.checks.explore.Explorer`; ``steer`` False: only watched)."""
    explorer = Explorer(n, steer)

    @hypothesis_seed(_spec_seed(seed, spec))
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
              report_multiple_bugs=False, print_blob=False)
    @given(st.data())
    def run(data: Any) -> None:
        program, ref = trace_program(spec, DrawContext(data=data), explorer)
        visit(program, ref)

    with seed_only_draws():
        run()
    return explorer.summary(spec.name)


def input_elements(program: Program) -> int:
    """How many input elements a program draws: the size a smaller repro is judged by."""
    return sum(math.prod(node["shape"]) for node in program["nodes"] if node["op"] == "input")


def _size(program: Program) -> tuple[int, int]:
    return input_elements(program), len(program["nodes"])


class Merger:
    """Findings with one fingerprint become one: the first of the smallest programs in draw
    order, the total count, the first few distinct messages, ``downstream_of`` only if every
    draw was downstream. Merging is associative: merging each spec's findings apart and then
    the results in spec order gives what one merge over every draw in order gives, which is
    what lets ``--jobs N`` report exactly what one worker reports."""

    def __init__(self) -> None:
        self._merged: dict[str, Finding] = {}

    def __len__(self) -> int:
        return len(self._merged)

    def add(self, finding: Finding) -> None:
        known = self._merged.get(finding.fingerprint)
        if known is None:
            self._merged[finding.fingerprint] = finding
        elif _size(finding.program) < _size(known.program):
            known.merge(finding)
            finding.count, finding.examples = known.count, known.examples
            if "downstream_of" not in known.extra:
                finding.extra.pop("downstream_of", None)
            self._merged[finding.fingerprint] = finding
        else:
            known.merge(finding)

    def findings(self) -> list[Finding]:
        """In the order they were first seen."""
        return list(self._merged.values())

    def collected(self) -> list[Finding]:
        """The report's order: root causes first, a finding seen only downstream of another
        after them."""
        return sorted(self._merged.values(), key=report_order)


def report_order(finding: Finding) -> tuple[object, ...]:
    """The report's order of findings: root causes first, then by spec, op, kind."""
    return (bool(finding.extra.get("downstream_of")), finding.spec, finding.op,
            finding.kind.value, finding.signature, finding.key)


def run_spec(spec: Spec, candidate: CandidateProcess, seed: int, n: int | None,
             record: Callable[[list[Finding]], None], stats: Stats) -> Exploration:
    """Draw and judge one spec's programs; ``record(found)`` gets each program's findings in
    draw order; returns what the draws exercised. One program in flight: while the worker
    replays program k, the engine judges k-1 and Hypothesis draws and traces k+1."""
    pending: list[tuple[Spec, Program, Observations]] = []
    covered: set[tuple[str, str]] = set()

    def visit(program: Program, ref: Observations) -> None:
        covered.update(coverage(spec, program))
        previous = pending.pop() if pending else None
        found = finish(*previous, candidate, stats) if previous else []
        candidate.submit(program)
        pending.append((spec, program, ref))
        if previous:
            record(found)

    start = time.perf_counter()
    try:
        exploration = draw_programs(spec, n or spec.n, seed, visit)
    except KeyboardInterrupt:
        raise
    except BaseException:
        if candidate.pending:
            candidate.collect()
        raise
    if pending:
        record(finish(*pending.pop(), candidate, stats))
    stats.trace_s += time.perf_counter() - start
    exploration.covered = sorted(covered)
    return exploration


def coverage(spec: Spec, program: Program) -> set[tuple[str, str]]:
    """(op, dtype) of each call of ``program`` to one of the spec's ops (every call when it
    names none): the dtypes of the inputs the call was computed from, as a finding at that
    call is filed (``alignbot.checks.causes.member_dtype``), ``-`` for a call on no input."""
    nodes = program["nodes"]
    dtypes = {node["id"]: node["dtype"] for node in nodes if node["op"] == "input"}
    feeding = ancestors_of(program)
    found: set[tuple[str, str]] = set()
    for node in nodes:
        if node["op"] == "input" or (spec.ops and node["target"] not in spec.ops):
            continue
        inputs = sorted(feeding.get(node["id"], set()) & dtypes.keys())
        for dtype in dict.fromkeys(dtypes[i] for i in inputs) or ("-",):
            found.add((node["target"], dtype))
    return found


def check(specs: list[Spec], candidate: CandidateProcess, seed: int = 0, n: int | None = None,
          on_spec: Callable[[Spec, int], None] | None = None,
          on_program: Callable[[int, int], None] | None = None) -> CheckResult:
    """Check every spec in order; findings with one fingerprint are merged (:class:`Merger`).
    ``on_program(judged, findings)`` runs after each program is judged. Ctrl-C raises
    :class:`Interrupted` with the findings so far (``complete`` False)."""
    import torch

    result = CheckResult(reference=str(torch.__version__), candidate=candidate.config.name,
                         seed=seed, packages=dict(candidate.packages))
    merger = Merger()

    def record(found: list[Finding]) -> None:
        result.programs_run += 1
        for finding in found:
            merger.add(finding)
        if on_program is not None:
            on_program(result.programs_run, len(merger))

    try:
        for position, spec in enumerate(specs):
            if on_spec is not None:
                on_spec(spec, position)
            result.exploration.append(run_spec(spec, candidate, seed, n, record,
                                               result.stats))
            result.specs_run.append(spec.name)
    except KeyboardInterrupt as exc:
        candidate.kill()  # a program may be in flight: do not wait for it
        result.complete = False  # what was submitted but not judged does not count
        result.findings = merger.collected()
        raise Interrupted(result) from exc
    result.stats.trace_s -= result.stats.candidate_s + result.stats.judge_s
    result.stats.worker_starts = candidate.starts
    result.findings = merger.collected()
    return result
