"""``--jobs N``: specs, then findings, spread over N worker processes, each with its own
candidate; results are merged in spec order, so the report is the same whatever N is."""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TextIO

from . import warm
from .candidate import CandidateConfig, CandidateProcess, CandidateStartError
from .capabilities import Capabilities, CapabilityError, of_candidate
from .engine import CheckResult, Interrupted, Merger, Stats, run_spec
from .explore import Exploration
from .findings import Finding
from .minimize import MinimizeOptions, merge_same_bugs, minimize_all
from .oracle import SHRINK_CALLS, SHRINK_SECONDS
from .spec import Spec
from .spec_loading import SpecSource
from .stopping import worker_signals
from .upstream import DEFAULT_TRACKER

# What a worker reports while a task runs: ("program", fingerprints), ("finding", None),
# ("call", calls) or ("note", text); the parent passes them on with the task's index.
OnEvent = Callable[[str, int, Any], None]
EXIT_GRACE = 10.0  # seconds a worker gets to close its candidates when told to stop


class WorkerDied(Exception):
    """A worker process died (the reference itself crashed, or it was killed)."""


class WorkerError(Exception):
    """A worker raised something that cannot be sent back as it is: its traceback."""


@dataclass(frozen=True)
class Shrinking:
    """How the workers minimize findings: the options of ``alignbot check``."""

    max_calls: int = SHRINK_CALLS
    max_seconds: float = SHRINK_SECONDS
    tracker: str = DEFAULT_TRACKER
    thirds: tuple[str, ...] = ()  # preludes of third frameworks used as triage oracles
    third_python: str = sys.executable
    timings: bool = True


@dataclass(frozen=True)
class Setup:
    """What every worker is started with (pickled once, when it starts)."""

    config: CandidateConfig
    source: SpecSource
    seed: int = 0
    n: int | None = None
    tolerances: tuple[float, float] | None = None  # (rtol, atol) for every spec
    shrinking: Shrinking = field(default_factory=Shrinking)
    gradients: bool | None = None  # --gradients / --no-gradients; None: as the prelude says
    precision: str | None = None  # --precision

    def specs(self) -> dict[str, Spec]:
        specs = {spec.name: spec for spec in self.source.load()}
        if self.tolerances is not None:
            rtol, atol = self.tolerances
            specs = {name: dataclasses.replace(spec, rtol=rtol, atol=atol)
                     for name, spec in specs.items()}
        return specs


@dataclass
class SpecRun:
    """One spec's draws, judged in one worker: its findings merged in draw order."""

    programs: int = 0
    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    exploration: Exploration | None = None  # None: cut short


@dataclass
class _Worker:
    process: BaseProcess
    tasks: Connection
    results: Connection
    task: int | None = None  # the index of the task it runs


class Workers:
    """``count`` worker processes (spawned: a fresh interpreter, not a fork of one that holds
    torch's thread pools), each with its own candidate. :meth:`run` gives each idle worker
    the next task in order and returns the results in task order, so the order in which
    workers finish never shows."""

    def __init__(self, setup: Setup, count: int) -> None:
        self.setup, self.count = setup, count
        self.version = ""  # the candidate's
        self.packages: dict[str, str] = {}  # what the candidate's prelude imported
        self.reference = ""  # torch's
        self.capabilities = Capabilities()  # what the candidate declared, as resolved
        self._workers: list[_Worker] = []

    def __enter__(self) -> Workers:
        context = multiprocessing.get_context("spawn")
        try:
            for _ in range(self.count):
                tasks_read, tasks_write = context.Pipe(duplex=False)
                results_read, results_write = context.Pipe(duplex=False)
                process = context.Process(target=serve, daemon=True, name="alignbot-worker",
                                          args=(self.setup, tasks_read, results_write))
                process.start()
                tasks_read.close()
                results_write.close()
                self._workers.append(_Worker(process, tasks_write, results_read))
            for worker in self._workers:
                kind, _, payload = self._receive(worker, "starting")
                while kind == "note":  # a warning while loading the specs
                    sys.stderr.write(payload)
                    kind, _, payload = self._receive(worker, "starting")
                if kind == "failed":
                    raise payload
                self.version, self.reference, self.packages, self.capabilities = payload
        except BaseException:
            self.stop(force=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(force=exc[0] is not None)

    def stop(self, force: bool = False) -> None:
        """Let every worker close its candidates and exit; ``force``: interrupt what they
        run first (SIGTERM: they kill their candidates)."""
        for worker in self._workers:
            if force and worker.process.is_alive():
                worker.process.terminate()
            with contextlib.suppress(OSError):
                worker.tasks.send(None)
        for worker in self._workers:
            worker.process.join(EXIT_GRACE)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.tasks.close()
            worker.results.close()
        self._workers = []

    def interrupt(self, done: dict[int, Any], partial: dict[int, Any]) -> None:
        """Stop every worker (SIGTERM) and keep what they still send: results of finished
        tasks in ``done``, what an unfinished task had judged in ``partial``."""
        for worker in self._workers:
            if worker.process.is_alive():
                worker.process.terminate()
        for worker in self._workers:
            with contextlib.suppress(Exception):  # a message cut short by Ctrl-C, EOF
                while worker.results.poll(EXIT_GRACE):
                    what, index, payload = worker.results.recv()
                    if what in ("done", "partial"):
                        (done if what == "done" else partial)[index] = payload
        self.stop(force=True)

    def run(self, kind: str, payloads: list[Any], labels: list[str], on_event: OnEvent,
            done: dict[int, Any]) -> list[Any]:
        """Run every task; ``done`` fills up with the results as they come (what a caller
        interrupted by Ctrl-C still has). A task that raised stops the handing out of
        further tasks; once those in flight are over, the first in task order is raised,
        as one worker running them in order would raise it."""
        failures: dict[int, BaseException] = {}
        upcoming = iter(range(len(payloads)))

        def hand_out(worker: _Worker) -> None:
            index = next(upcoming, None) if not failures else None
            if index is not None:
                worker.tasks.send((kind, index, payloads[index]))
            worker.task = index

        for worker in self._workers:
            hand_out(worker)
        while any(worker.task is not None for worker in self._workers):
            busy = [worker for worker in self._workers if worker.task is not None]
            wait([worker.results for worker in busy])
            for worker in busy:
                while worker.task is not None and worker.results.poll():
                    what, index, payload = self._receive(worker, labels[worker.task])
                    if what == "done":
                        done[index] = payload
                    elif what == "failed":
                        failures[index] = payload
                    else:
                        on_event(what, index, payload)
                        continue
                    hand_out(worker)
        if failures:
            raise failures[min(failures)]
        return [done[index] for index in range(len(payloads))]

    def _receive(self, worker: _Worker, doing: str) -> tuple[str, int, Any]:
        try:
            message: tuple[str, int, Any] = worker.results.recv()
        except (EOFError, OSError):
            worker.process.join(EXIT_GRACE)
            code = worker.process.exitcode
            how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                   else f"exit status {code}")
            raise WorkerDied(f"a check worker died ({how}) while {doing}") from None
        return message


def check(workers: Workers, specs: list[Spec], on_program: Callable[[int, int], None],
          on_note: Callable[[str], None]) -> CheckResult:
    """:func:`alignbot.checks.engine.check` over the workers, one spec per task. Ctrl-C raises
    :class:`alignbot.checks.engine.Interrupted` with what was judged so far: the specs finished, and
    the programs judged of those cut short."""
    setup = workers.setup
    result = CheckResult(reference=workers.reference, candidate=setup.config.name,
                         seed=setup.seed, packages=dict(workers.packages),
                         capabilities=workers.capabilities)
    seen: set[str] = set()
    done: dict[int, SpecRun] = {}
    partial: dict[int, SpecRun] = {}  # specs that Ctrl-C cut short

    def on_event(kind: str, index: int, payload: Any) -> None:
        if kind == "note":
            on_note(payload)
        elif kind == "program":
            result.programs_run += 1
            seen.update(payload)
            on_program(result.programs_run, len(seen))

    def merged() -> CheckResult:
        merger = Merger()
        result.programs_run = 0
        runs = {**partial, **done}
        for index in sorted(runs):
            run = runs[index]
            if index in done:
                result.specs_run.append(specs[index].name)
            if index in done and run.exploration is not None:
                result.exploration.append(run.exploration)
            result.programs_run += run.programs
            for finding in run.findings:
                merger.add(finding)
            for name in ("trace_s", "candidate_s", "judge_s"):
                setattr(result.stats, name,
                        getattr(result.stats, name) + getattr(run.stats, name))
            for mode, count in run.stats.regions.items():
                result.stats.regions[mode] = result.stats.regions.get(mode, 0) + count
        result.stats.trace_s -= result.stats.candidate_s + result.stats.judge_s
        result.stats.worker_starts = workers.count + sum(
            run.stats.worker_starts for run in runs.values())
        result.findings = merger.collected()
        return result

    try:
        workers.run("spec", [spec.name for spec in specs], [f"checking {spec.name}"
                    for spec in specs], on_event, done)
    except KeyboardInterrupt as exc:
        workers.interrupt(done, partial)
        merged().complete = False
        raise Interrupted(result) from exc
    return merged()


def minimize(workers: Workers, findings: list[Finding],
             on_progress: Callable[[int, int, str, int], None],
             on_note: Callable[[str], None]) -> None:
    """:func:`alignbot.checks.minimize.minimize_all` over the workers, one finding per task; Ctrl-C
    keeps the findings minimized so far."""
    done: dict[int, Finding] = {}

    def on_event(kind: str, index: int, payload: Any) -> None:
        if kind == "note":
            on_note(payload)
        elif kind in ("finding", "call"):
            on_progress(index + 1, len(findings), findings[index].op, payload or 0)

    try:
        workers.run("minimize", findings, [f"minimizing {f.fingerprint} ({f.op})"
                    for f in findings], on_event, done)
    finally:
        for index, finding in done.items():
            findings[index] = finding
        merge_same_bugs(findings)


def serve(setup: Setup, tasks: Connection, results: Connection) -> None:
    """A worker: start the candidate, then run tasks until told to stop (None, or the
    parent gone). SIGTERM kills its candidates, never leaving one behind; Ctrl-C and a
    hangup are the parent's to act on (:func:`alignbot.checks.stopping.worker_signals`)."""
    worker_signals()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_routed_warnings(results))
        candidate = CandidateProcess(setup.config)
        stack.callback(candidate.close)
        thirds: list[CandidateProcess] = []
        try:
            with ThreadPoolExecutor(1) as pool:
                # the reference is imported while the candidate imports its own framework
                starting = pool.submit(candidate.start)
                try:
                    import torch
                    specs = setup.specs()
                finally:
                    wait_for([starting])
            try:
                version = starting.result()
                capabilities = of_candidate(candidate.declared, setup.gradients,
                                            setup.precision)
            except (CandidateStartError, CapabilityError) as exc:
                results.send(("failed", -1, exc))
                return
            specs = {name: capabilities.apply(spec) for name, spec in specs.items()}
            results.send(("ready", -1, (version, str(torch.__version__), candidate.packages,
                                        capabilities)))
            for kind, index, payload in _tasks(tasks):
                try:
                    if kind == "spec":
                        reply: Any = _spec(specs[payload], candidate, setup, index, results)
                    else:
                        if not thirds:
                            thirds += _start_thirds(setup, stack)
                        reply = _minimized(payload, specs, candidate, thirds, setup, index,
                                           results)
                except Exception as exc:
                    results.send(("failed", index, _portable(exc)))
                else:
                    results.send(("done", index, reply))
        except KeyboardInterrupt:
            for process in (candidate, *thirds):  # a program may be in flight: no waiting
                process.kill()
            warm.close_all()  # and a repro's control run
    # Its candidates are closed: tearing down an interpreter that holds torch takes seconds
    # and keeps nothing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _tasks(tasks: Connection) -> Iterator[tuple[str, int, Any]]:
    while True:
        try:
            task = tasks.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        yield task


def _spec(spec: Spec, candidate: CandidateProcess, setup: Setup, index: int,
          results: Connection) -> SpecRun:
    run = SpecRun()
    merger = Merger()

    def record(found: list[Finding]) -> None:
        run.programs += 1
        for finding in found:
            merger.add(finding)
        results.send(("program", index, [finding.fingerprint for finding in found]))

    starts = candidate.starts
    try:
        run.exploration = run_spec(spec, candidate, setup.seed, setup.n, record, run.stats)
    except KeyboardInterrupt:  # told to stop: what was judged goes to the partial report
        candidate.kill()
        run.findings = merger.findings()
        results.send(("partial", index, run))
        raise
    run.stats.worker_starts = candidate.starts - starts
    run.findings = merger.findings()
    return run


def _start_thirds(setup: Setup, stack: contextlib.ExitStack) -> list[CandidateProcess]:
    return [stack.enter_context(CandidateProcess(CandidateConfig(
        name=f"third-{i}", prelude=code, python=setup.shrinking.third_python,
        timeout=setup.config.timeout))) for i, code in enumerate(setup.shrinking.thirds)]


def _minimized(finding: Finding, specs: dict[str, Spec], candidate: CandidateProcess,
               thirds: list[CandidateProcess], setup: Setup, index: int,
               results: Connection) -> Finding:
    shrinking = setup.shrinking
    options = MinimizeOptions(shrinking.max_calls, shrinking.max_seconds, shrinking.tracker,
                              thirds, on_call=lambda calls: results.send(("call", index, calls)))
    minimize_all([finding], [specs[finding.spec]], candidate, setup.config, options,
                 timings=shrinking.timings,
                 on_finding=lambda _, __: results.send(("finding", index, 0)))
    return finding


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling (SpecError, CandidateStartError…), else its traceback."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return WorkerError("".join(traceback.format_exception(exc)))
    if type(exc).__module__.startswith("alignbot.checks."):
        return exc
    return WorkerError("".join(traceback.format_exception(exc)))


@contextlib.contextmanager
def _routed_warnings(results: Connection) -> Iterator[None]:
    """Warnings (torch's UserWarnings) go to the parent, which shows them below its progress
    line instead of in the middle of it."""
    with warnings.catch_warnings():
        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            results.send(("note", -1, warnings.formatwarning(message, category, filename,
                                                             lineno, line)))

        warnings.showwarning = show
        yield
