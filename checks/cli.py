"""The engine's commands (``check``, ``specs``, ``repro``, ``upstream``): thin commands over
the engine; bad input exits 2 with one line. ``python -m alignbot.checks.cli`` runs them with
nothing
of the App installed; the ``alignbot`` console script (``bot/cli.py``) adds the App's commands."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, NoReturn, TextIO, TypeAlias

from . import catalog, jobs, presets, shards, warm
from . import report as reports
from .baseline import BaselineError, BaselineFindings, recheck
from .candidate import CandidateConfig, CandidateProcess, CandidateStartError
from .capabilities import PRECISIONS, CapabilityError, of_candidate
from .dsl import DslError
from .engine import CheckResult, Interrupted, check, report_order
from .findings import Finding
from .internal_errors import report as report_internal_error
from .known import KnownFile, KnownFileError, read_known, write_known
from .minimize import MinimizeOptions, minimize_all
from .opinfo import OPINFO_DRAWS, OpInfoChanged
from .options import OptionError, check_numbers
from .oracle import SHRINK_CALLS, SHRINK_SECONDS
from .presets import PRESETS, NoCandidate
from .progress import Progress
from .report_files import (
    OutputError,
    check_output,
    output_path,
    stdout_for_reports,
    summary,
    write_reports,
)
from .report_types import FindingEntry, KnownMark, Rechecked
from .spec import Spec
from .spec_loading import SpecFileError, SpecSource
from .stopping import exit_status, stop_on_signals
from .trace import SpecError
from .upstream import DEFAULT_TRACKER
from .vocab import relative_interpreter

TRACKER = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
# The exit statuses: a finding, bad usage; 0 is none, 128 + N a stop signal (checks/stopping.py)
# and INTERNAL_ERROR alignbot's own failure (checks/internal_errors.py).
FINDINGS, USAGE = 1, 2
# How the options of `check` are named to alignbot.checks.options.check_numbers
FLAGS = {"timeout": "--timeout", "draws": "--n", "jobs": "--jobs",
         "opinfo_draws": "--opinfo-draws", "shrink_calls": "--shrink-calls",
         "shrink_seconds": "--shrink-seconds",
         "rtol": "--rtol", "atol": "--atol"}


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit status 2."""


class _HelpFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, where it has one worth showing (not a
    switch's False, not an option left out) and the help does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if not action.option_strings or "default" in text or default is None or \
                default is False or default is argparse.SUPPRESS or default in ([], ""):
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class _Commands(argparse._SubParsersAction):
    """Every command also takes ``-q`` and ``-v`` after its name."""

    def add_parser(self, name: str, **kwargs: Any) -> _Parser:
        parser: _Parser = super().add_parser(name, **kwargs)
        _add_verbosity(parser, argparse.SUPPRESS)  # given before the name, it stands
        return parser


Commands: TypeAlias = "argparse._SubParsersAction[_Parser]"


def version() -> str:
    """The installed package's version (``unknown`` run from a folder never installed)."""
    try:
        return metadata.version("alignbot")
    except metadata.PackageNotFoundError:
        return "unknown"


def _add_verbosity(parser: argparse.ArgumentParser, default: Any) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", default=default,
                       help="no progress and no summary lines on stderr; errors still are")
    group.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="more detail on failures: the traceback of an internal error, "
                            "the candidate's own output when it does not start")


def new_parser() -> tuple[argparse.ArgumentParser, Commands]:
    """The ``alignbot`` parser with no command yet, and where commands are added."""
    parser = _Parser(prog="alignbot", description="Keep a PyTorch-compatible implementation "
                     "aligned with PyTorch.", epilog="`alignbot COMMAND --help` gives a "
                     "command's options.")
    parser.add_argument("--version", action="version", version=f"alignbot {version()}",
                        help="print alignbot's version and exit")
    _add_verbosity(parser, False)
    commands: Commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                               title="commands", parser_class=_Parser,
                                               action=_Commands)
    return parser, commands


def build_parser() -> argparse.ArgumentParser:
    """The engine's commands alone."""
    parser, commands = new_parser()
    add_commands(commands)
    return parser


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _interpreter(value: str) -> str:
    """A path to an interpreter is the caller's: the worker starts in another folder. A bare
    name (``python3``) is looked up on PATH as given."""
    return os.path.abspath(value) if relative_interpreter(value) else value


def _add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ops", metavar="GLOB,…", default="",
                        help="only specs whose name or ops match one of these globs")
    parser.add_argument("--spec-file", metavar="PATH", action="append", default=[], type=Path,
                        help="extra spec file (repeatable); with it the built-in library and "
                             "the OpInfo specs are used only when --library or --opinfo is given")
    parser.add_argument("--library", action="store_true",
                        help="include the built-in specs too")
    opinfo = parser.add_mutually_exclusive_group()
    opinfo.add_argument("--opinfo", action="store_true",
                        help="the specs from PyTorch's OpInfo and ModuleInfo databases "
                             "(opinfo.<op>, moduleinfo.nn.<Module>; by default they run next to "
                             "the built-in library); with it the built-in library is used only "
                             "when --library is given")
    opinfo.add_argument("--no-opinfo", action="store_true",
                        help="leave the OpInfo and ModuleInfo specs out")
    parser.add_argument("--opinfo-draws", type=int, metavar="N",
                        help=f"at most N draws per OpInfo spec (default: {OPINFO_DRAWS} in a "
                             "run of every spec, which keeps it within minutes; each entry's "
                             "own, room for every dtype and two more, once --ops selects; 0: "
                             "each entry's own always); --n overrides both")


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", type=output_path, metavar="FILE",
                        help="write the JSON report here (-: to stdout)")
    parser.add_argument("--markdown", type=output_path, metavar="FILE",
                        help="write the Markdown report here (-: to stdout)")


def add_commands(commands: Commands) -> None:
    """``check``, ``specs``, ``repro`` and ``upstream``."""
    chk = commands.add_parser("check", help="draw programs, run them on both sides, compare")
    who = chk.add_mutually_exclusive_group()
    who.add_argument("--candidate", metavar="PRESET",
                     help=f"built-in candidate: {', '.join(sorted(PRESETS))}")
    who.add_argument("--prelude", metavar="CODE",
                     help="Python source that binds `torch` in the candidate's worker")
    who.add_argument("--prelude-file", metavar="FILE", type=Path,
                     help="the same, read from a file (examples/preludes/)")
    chk.add_argument("--python", metavar="PATH", type=_interpreter,
                     help="interpreter for the candidate's worker (default: alignbot's "
                          "own)")
    _add_spec_arguments(chk)
    chk.add_argument("--jobs", type=int, default=default_jobs(), metavar="N",
                     help="check specs in N worker processes, each with its own candidate "
                          "(default: the usable cores); the report does not depend on N")
    chk.add_argument("--shard", metavar="K/N",
                     help="check only the K-th of N shards of the specs (dealt out in name "
                          "order); `alignbot merge` joins the shards' JSON reports")
    chk.add_argument("--override", metavar="API=MODULE:ATTR", action="append", default=[],
                     help="candidate callable for one torch API (repeatable)")
    chk.add_argument("--n", type=int, metavar="N", help="draws per spec (default: each spec's)")
    chk.add_argument("--seed", type=int, default=0, metavar="S",
                     help="the seed of every spec's draws: the same seed, the same report")
    chk.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                     help="per-program limit before the candidate counts as hung")
    _add_report_arguments(chk)
    chk.add_argument("--no-progress", action="store_true",
                     help="no progress lines on stderr (the summary still ends the run)")
    chk.add_argument("--no-minimize", action="store_true",
                     help="report findings as drawn: no shrinking, repro scripts or triage")
    chk.add_argument("--shrink-calls", type=int, default=SHRINK_CALLS, metavar="N",
                     help="oracle calls allowed per finding for shrinking")
    chk.add_argument("--shrink-seconds", type=float, default=SHRINK_SECONDS, metavar="S",
                     help="safety net: seconds allowed per finding for shrinking; a "
                          "finding it stops says so (the calls bound shrinking)")
    chk.add_argument("--third", metavar="CODE", action="append", default=[],
                     help="prelude of a third framework used as a triage oracle (repeatable)")
    chk.add_argument("--third-python", metavar="PATH",
                     help="interpreter for --third (default: alignbot's own)")
    chk.add_argument("--tracker", default=DEFAULT_TRACKER, metavar="OWNER/REPO",
                     help="where upstream drafts are filed")
    chk.add_argument("--rtol", type=float, metavar="R",
                     help="relative tolerance for every spec (with --atol)")
    chk.add_argument("--atol", type=float, metavar="A",
                     help="absolute tolerance for every spec (with --rtol)")
    chk.add_argument("--gradients", action=argparse.BooleanOptionalAction, default=None,
                     help="compare gradients (--no-gradients: the candidate computes none; "
                          "default: what its prelude's alignbot_capabilities says, else yes)")
    chk.add_argument("--precision", metavar="DTYPE", choices=PRECISIONS,
                     help="the candidate computes in this precision: allow its tolerances "
                          f"({', '.join(PRECISIONS)}; default: its prelude's "
                          "alignbot_precision)")
    chk.add_argument("--no-timings", action="store_true",
                     help="leave seconds out of the JSON report (byte-identical reruns)")
    chk.add_argument("--known", type=Path, metavar="FILE",
                     help="known divergences (.github/alignbot-known.yml): a finding an entry "
                          "matches is known, not minimized, and does not fail the check")
    chk.add_argument("--write-known", type=Path, metavar="FILE",
                     help="write today's findings into FILE as known divergences (entries "
                          "already there are kept with their reasons); no minimizing")
    chk.add_argument("--baseline", type=Path, metavar="REPORT.json",
                     help="a report of the same check on the base: its findings drawn again "
                          "are pre-existing (not minimized); those not drawn have their repro "
                          "replayed here, and are fixed only if it now agrees")
    chk.set_defaults(func=cmd_check)

    specs = commands.add_parser("specs", help="list the specs: name, ops, source, dtypes")
    _add_spec_arguments(specs)
    specs.add_argument("--seed", type=int, default=0, metavar="S",
                       help="list the dtypes drawn with this seed (default 0)")
    specs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    specs.set_defaults(func=cmd_specs)

    merge = commands.add_parser("merge", help="merge the JSON reports of the shards of one "
                                "check (--shard K/N) into its report")
    merge.add_argument("reports", type=Path, nargs="+", metavar="REPORT.json",
                       help="the JSON reports of the shards")
    _add_report_arguments(merge)
    merge.set_defaults(func=cmd_merge)

    for name, what in (("repro", "print a finding's repro script"),
                       ("upstream", "print a finding's upstream issue draft")):
        sub = commands.add_parser(name, help=what)
        sub.add_argument("report", type=Path, metavar="REPORT.json",
                         help="a JSON report (check --json)")
        sub.add_argument("fingerprint", help="the finding's fingerprint, as the report and "
                         "check's summary name it")
        sub.add_argument("--reference-only", action="store_true",
                         help="the PyTorch-alone variant (repro only)")
        sub.set_defaults(func=cmd_repro if name == "repro" else cmd_upstream)


def _candidate(args: argparse.Namespace) -> tuple[CandidateConfig, str]:
    overrides = {}
    for item in args.override:
        name, sep, target = item.partition("=")
        if not sep or ":" not in target or not name.startswith("torch."):
            raise UsageError(f"--override {item!r}: expected torch.API=module:attr")
        overrides[name] = target
    if args.prelude_file is not None:
        try:
            args.prelude = args.prelude_file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--prelude-file {args.prelude_file}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from exc
    if args.prelude is None and args.candidate is None:
        raise UsageError("say what to check: --candidate PRESET, --prelude CODE or "
                         "--prelude-file FILE")
    try:
        config = presets.candidate(args.candidate, args.prelude, python=args.python,
                           timeout=args.timeout, overrides=overrides)
    except NoCandidate as exc:
        raise UsageError(str(exc)) from exc
    return config, args.prelude if args.prelude is not None else args.candidate


def _patterns(args: argparse.Namespace) -> list[str]:
    return [p.strip() for p in args.ops.split(",") if p.strip()]


def _source(args: argparse.Namespace) -> SpecSource:
    """The specs a command's flags select. With no source named, the built-in library and
    the OpInfo specs (unless ``--no-opinfo``); once ``--spec-file`` or ``--opinfo`` names one,
    exactly the sources named. The OpInfo database is not even imported when no ``--ops``
    glob can match an OpInfo spec (``activations.softplus`` names a library spec)."""
    named = bool(args.spec_file or args.opinfo)
    opinfo = args.opinfo or not (named or args.no_opinfo)
    draws = args.opinfo_draws
    try:
        check_numbers({"opinfo_draws": draws}, FLAGS)
    except OptionError as exc:
        raise UsageError(str(exc)) from exc
    if draws is None:  # a run of every spec is bounded; a selection runs what it selects
        draws = 0 if _patterns(args) else OPINFO_DRAWS
    return SpecSource(library=args.library or not named, files=tuple(args.spec_file),
                      opinfo=opinfo and could_match_opinfo(_patterns(args)),
                      opinfo_draws=draws or None)


OPINFO_PREFIXES = ("opinfo.", "moduleinfo.", "torch.")  # what a dotted OpInfo name starts with


def could_match_opinfo(patterns: Sequence[str]) -> bool:
    """Whether ``--ops`` globs may select an OpInfo spec. An OpInfo spec is matched by its
    name (``opinfo.…``, ``moduleinfo.…``), its op (``torch.…``) and their last, dotless
    parts; a glob with a literal dot matches only dotted names, so its text before the first
    wildcard must agree with one of those prefixes (``steal.*`` and ``activations.softplus``
    name library or file specs)."""
    def could(pattern: str) -> bool:
        if "[" in pattern or "." not in pattern:
            return True
        literal = re.split(r"[*?]", pattern, maxsplit=1)[0]
        if "." not in literal and "*" in pattern[:pattern.index(".")]:
            return True
        return any(p.startswith(literal) or literal.startswith(p) for p in OPINFO_PREFIXES)

    return not patterns or any(could(p) for p in patterns)


def _specs(args: argparse.Namespace) -> list[Spec]:
    patterns = _patterns(args)
    try:
        specs = _source(args).load()
    except SpecFileError as exc:
        raise UsageError(f"--spec-file {exc}") from exc
    except OpInfoChanged as exc:
        raise UsageError(f"the OpInfo specs: {exc}") from exc
    specs = [s for s in specs if s.matches(patterns)] if patterns else specs
    if not specs:
        raise UsageError(f"no spec matches --ops {args.ops!r}")
    return specs


def _check_numbers(args: argparse.Namespace) -> None:
    try:
        check_numbers({"timeout": args.timeout, "draws": args.n, "jobs": args.jobs,
                       "shrink_calls": args.shrink_calls,
                       "shrink_seconds": args.shrink_seconds, "rtol": args.rtol,
                       "atol": args.atol}, FLAGS)
    except OptionError as exc:
        raise UsageError(str(exc)) from exc


def _check_outputs(args: argparse.Namespace) -> None:
    for flag, path in (("--json", args.json), ("--markdown", args.markdown)):
        if path is not None:
            check_output(flag, path)


def cmd_check(args: argparse.Namespace) -> int:
    _check_numbers(args)
    _check_outputs(args)
    with stdout_for_reports(args.json, args.markdown) as stdout:
        return _run_check(args, stdout)


def _run_check(args: argparse.Namespace, stdout: TextIO) -> int:
    shard = None
    if args.shard is not None:
        try:
            shard = shards.parse(args.shard)
        except shards.ShardError as exc:
            raise UsageError(f"--shard: {exc}") from exc
    config, description = _candidate(args)
    specs = _specs(args)
    if shard is not None:
        specs = shards.select(specs, *shard)
    if (args.rtol is None) != (args.atol is None):
        raise UsageError("give --rtol and --atol together, or neither")
    if args.rtol is not None:
        specs = [dataclasses.replace(s, rtol=args.rtol, atol=args.atol) for s in specs]
    if not TRACKER.fullmatch(args.tracker):
        raise UsageError(f"--tracker {args.tracker!r}: expected OWNER/REPO")
    known = _known_file(args.known)
    baseline = _baseline(args.baseline)
    previous = _known_file(args.write_known) if args.write_known is not None and \
        args.write_known.exists() else None
    total = sum(args.n or spec.n for spec in specs)
    progress = Progress.for_stream(total, sys.stderr,
                                   enabled=not (args.no_progress or args.quiet))
    how = _InWorkers if min(args.jobs, len(specs)) > 1 else _Here
    with stop_on_signals() as signals:
        with contextlib.ExitStack() as stack:
            stack.enter_context(progress.routed_warnings())
            try:
                progress.phase(f"starting the candidate ({config.name}), then tracing "
                               f"{len(specs)} spec{'s' if len(specs) != 1 else ''}")
                run = how(args, config, specs, progress, stack)
                result, stopped = _check_and_minimize(
                    run, not args.no_minimize and args.write_known is None, known, baseline)
                # closing the workers, replaying the baseline and writing the report go uncut
                signals.hold()
                version = run.version
            finally:
                progress.close()
        return _report(args, result, stopped, config, specs, description, version, known,
                       baseline, previous, stdout)


def _report(args: argparse.Namespace, result: CheckResult, stopped: int | None,
            config: CandidateConfig, specs: list[Spec], description: str, version: str,
            known: KnownFile | None, baseline: BaselineFindings | None, previous: KnownFile | None,
            stdout: TextIO) -> int:
    """Classify the findings (known, against the baseline), write the reports and the known
    file, print the summary; the exit status: a stop signal's, else 1 when a finding is new."""
    fixed = _classify(result, known) if known is not None else []
    rechecked = (_recheck(baseline, result, config, specs)
                 if baseline is not None and stopped is None else [])
    data = reports.to_json(result, description)
    if known is not None:
        data["known_fixed"] = fixed
    if baseline is not None:
        data["rechecked"] = rechecked
    written = write_reports(args.json, args.markdown, data, stdout)
    if args.write_known is not None:
        _write_known(args.write_known, data["findings"], previous, quiet=args.quiet)
    new = [f for f in result.findings if not _expected(f, known, baseline)]
    count = len(result.findings)
    print(f"alignbot: {len(result.specs_run)} specs, {result.programs_run} programs, "
          f"candidate {config.name} ({reports.packages_line(result.packages) or version}) "
          f"against torch {result.reference}: "
          f"{count} finding{'s' if count != 1 else ''}")
    for finding in result.findings:
        verdict = finding.extra.get("verdict")
        mark = finding.extra.get("known")
        print(f"  {finding.fingerprint}  {finding.kind.value:<18} {finding.op}  "
              f"[{finding.spec}, {finding.count} draw{'s' if finding.count != 1 else ''}"
              f"{', ' + verdict if verdict else ''}]"
              f"{'  known: ' + mark['reason'] if mark else ''}")
    if baseline is not None:
        agree = sum(r["agrees"] for r in rechecked)
        print(f"alignbot: against the baseline {args.baseline}: {len(new)} new, "
              f"{sum(baseline.showed(f) for f in result.findings)} pre-existing, {agree} "
              f"fixed, {len(rechecked) - agree} not drawn but still there")
    if known is not None:
        print(f"alignbot: {len(new)} new, {count - len(new)} known (from {known.source}), "
              f"{len(fixed)} fixed")
        for entry in fixed:
            print(f"  fixed: {known.source}:{entry['line']} ({entry['entry']}) no longer "
                  "reproduces: fixed — remove it from the file")
    sys.stdout.flush()
    if result.stats.regions and not args.quiet:  # a program hook: how its programs ran
        print("alignbot: programs run as one region or call by call: " + ", ".join(
            f"{count} {mode}" for mode, count in sorted(result.stats.regions.items())),
            file=sys.stderr)
    for line in [] if args.quiet else summary(data, written, minimized=not args.no_minimize):
        print(line, file=sys.stderr)
    if stopped is not None:
        return stopped
    if args.write_known is not None:
        return 0
    return FINDINGS if new else 0


def _expected(finding: Finding, known: KnownFile | None, baseline: BaselineFindings | None) -> bool:
    """A finding not to minimize: known, or shown by the baseline already."""
    return (known is not None and known.match(finding) is not None) or (
        baseline is not None and baseline.showed(finding))


def _baseline(path: Path | None) -> BaselineFindings | None:
    if path is None:
        return None
    try:
        return BaselineFindings.read(path)
    except BaselineError as exc:
        raise UsageError(f"--baseline: {exc}") from exc


def _recheck(baseline: BaselineFindings, result: CheckResult, config: CandidateConfig,
             specs: list[Spec]) -> list[Rechecked]:
    try:
        return recheck(baseline, result, config, specs)
    except CandidateStartError as exc:
        raise UsageError(f"--baseline: the candidate did not start to replay the "
                         f"baseline's repros: {exc}") from exc


def _known_file(path: Path | None) -> KnownFile | None:
    if path is None:
        return None
    try:
        return read_known(path)
    except KnownFileError as exc:
        raise UsageError(str(exc)) from exc


def _classify(result: CheckResult, known: KnownFile) -> list[KnownMark]:
    """Mark each finding an entry of ``known`` matches (its ``known``); the entries that no
    longer reproduce (``KnownFile.fixed``; none after an interrupted run)."""
    for finding in result.findings:
        entry = known.match(finding)
        if entry is not None:
            finding.extra["known"] = entry.mark()
    if not result.complete:
        return []
    return [entry.mark() for entry in known.fixed(result.findings, result.specs_run)]


def _write_known(path: Path, findings: list[FindingEntry], previous: KnownFile | None,
                 quiet: bool = False) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(write_known(findings, previous))
    except OSError as exc:
        raise UsageError(f"--write-known {path}: {exc.strerror}") from exc
    if not quiet:
        print(f"alignbot: wrote {len(findings)} finding(s) to {path}; fill in each reason",
              file=sys.stderr)


def _minimize(findings: list[Finding], specs: list[Spec], candidate: CandidateProcess,
              config: CandidateConfig, args: argparse.Namespace,
              thirds: list[CandidateProcess], progress: Progress) -> None:
    """Minimize every finding, showing which one and how many oracle calls so far."""
    current: list[tuple[int, str]] = [(0, "")]

    def on_finding(index: int, finding: Finding) -> None:
        current[0] = (index + 1, finding.op)
        progress.minimizing(index + 1, len(findings), finding.op, 0)

    def on_call(calls: int) -> None:
        progress.minimizing(current[0][0], len(findings), current[0][1], calls)

    options = MinimizeOptions(args.shrink_calls, args.shrink_seconds, args.tracker, thirds,
                              on_call=on_call)
    minimize_all(findings, specs, candidate, config, options, timings=not args.no_timings,
                 on_finding=on_finding)


class _Here:
    """Check and minimize in this process, with one candidate."""

    def __init__(self, args: argparse.Namespace, config: CandidateConfig, specs: list[Spec],
                 progress: Progress, stack: contextlib.ExitStack) -> None:
        self.args, self.config, self.specs, self.progress = args, config, specs, progress
        self.stack = stack
        self.candidate = stack.enter_context(CandidateProcess(config))
        self.started = [self.candidate]
        self.capabilities = of_candidate(self.candidate.declared, args.gradients,
                                         args.precision)
        self.specs = [self.capabilities.apply(spec) for spec in specs]

    @property
    def version(self) -> str:
        return self.candidate.version

    def check(self) -> CheckResult:
        try:
            result = check(self.specs, self.candidate, seed=self.args.seed, n=self.args.n,
                           on_program=self.progress.programs)
        except Interrupted as exc:
            exc.result.capabilities = self.capabilities
            raise
        result.capabilities = self.capabilities
        return result

    def minimize(self, findings: list[Finding]) -> None:
        args = self.args
        thirds = [self.stack.enter_context(CandidateProcess(CandidateConfig(
            name=f"third-{i}", prelude=code, python=args.third_python or sys.executable,
            timeout=args.timeout))) for i, code in enumerate(args.third)]
        self.started += thirds
        _minimize(findings, self.specs, self.candidate, self.config, args, thirds,
                  self.progress)

    def kill(self) -> None:
        for process in self.started:  # do not wait for a program in flight
            process.kill()
        warm.close_all()  # and the script a warm interpreter runs


class _InWorkers:
    """The same, spread over ``--jobs`` worker processes (checks/jobs.py)."""

    def __init__(self, args: argparse.Namespace, config: CandidateConfig, specs: list[Spec],
                 progress: Progress, stack: contextlib.ExitStack) -> None:
        shrinking = jobs.Shrinking(args.shrink_calls, args.shrink_seconds, args.tracker,
                                   tuple(args.third), args.third_python or sys.executable,
                                   timings=not args.no_timings)
        tolerances = (args.rtol, args.atol) if args.rtol is not None else None
        setup = jobs.Setup(config, _source(args), args.seed, args.n, tolerances, shrinking,
                           gradients=args.gradients, precision=args.precision)
        self.specs, self.progress = specs, progress
        self.workers = stack.enter_context(jobs.Workers(setup, min(args.jobs, len(specs))))

    @property
    def version(self) -> str:
        return self.workers.version

    def check(self) -> CheckResult:
        return jobs.check(self.workers, self.specs, self.progress.programs, self.progress.note)

    def minimize(self, findings: list[Finding]) -> None:
        jobs.minimize(self.workers, findings, self.progress.minimizing, self.progress.note)

    def kill(self) -> None:
        self.workers.stop(force=True)  # the workers kill their candidates, with any program


def _check_and_minimize(run: _Here | _InWorkers, minimize: bool,
                        known: KnownFile | None = None, baseline: BaselineFindings | None = None
                        ) -> tuple[CheckResult, int | None]:
    """Check, then minimize the findings (those neither ``known`` knows nor ``baseline``
    showed); the result, and the exit status a stop signal asks for (None: not stopped).
    After a stop signal (:mod:`alignbot.checks.stopping`) the candidates are killed at once and the
    result so far comes back marked incomplete, its findings merged (a signal before any
    result re-raises)."""
    result: CheckResult | None = None
    try:
        try:
            result = run.check()
        except Interrupted as exc:
            result = exc.result
            raise
        todo = [f for f in result.findings if not _expected(f, known, baseline)]
        if todo and minimize:
            kept = [f for f in result.findings if all(f is not t for t in todo)]
            try:
                run.minimize(todo)  # replaces and merges the findings of its list
            finally:  # also when stopped: the kept findings stay in the report, in order
                result.findings = sorted(kept + todo, key=report_order) if kept else todo
    except KeyboardInterrupt as exc:
        run.kill()
        if result is None:
            raise
        result.complete = False
        return result, exit_status(exc)
    return result, None


def cmd_merge(args: argparse.Namespace) -> int:
    _check_outputs(args)
    with stdout_for_reports(args.json, args.markdown) as stdout:
        return _merge(args, stdout)


def _merge(args: argparse.Namespace, stdout: TextIO) -> int:
    loaded = []
    for path in args.reports:
        try:
            loaded.append(reports.load(path))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from exc
    try:
        data = shards.merge(loaded)
    except shards.ShardError as exc:
        raise UsageError(f"cannot merge: {exc}") from exc
    written = write_reports(args.json, args.markdown, data, stdout)
    count = len(data["findings"])
    print(f"alignbot: {data['specs_run']} specs from {len(loaded)} reports, "
          f"{data['programs_run']} programs: {count} finding{'s' if count != 1 else ''}")
    for line in [] if args.quiet else summary(data, written, minimized=False)[:1]:
        print(line, file=sys.stderr)
    return FINDINGS if count else 0


def cmd_specs(args: argparse.Namespace) -> int:
    specs = _specs(args)
    if args.json:
        entries = [catalog.entry(spec, seed=args.seed) for spec in specs]
        print(json.dumps([entry.to_json() for entry in entries], indent=2))
    else:
        # each row as soon as its spec is drawn, also into a pipe (flushed line by line)
        table = catalog.Table(specs, lambda line: print(line, end="", flush=True))
        for spec in specs:
            table.row(catalog.entry(spec, seed=args.seed))
        table.end()
        if _source(args).opinfo:
            from .opinfo.modules import coverage
            from .opinfo.specs import catalog as opinfo_catalog
            from .opinfo.specs import render_not_carried

            print(coverage().render(), end="")
            print(render_not_carried(opinfo_catalog().dtypes_left_out), end="")
    return 0


def _finding(path: Path, fingerprint: str) -> FindingEntry:
    try:
        data = reports.load(path)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    for finding in data["findings"]:
        if finding.get("fingerprint") == fingerprint:
            return finding
    known = ", ".join(f["fingerprint"] for f in data["findings"]) or "none"
    raise UsageError(f"no finding {fingerprint!r} in {path} (findings: {known})")


def cmd_repro(args: argparse.Namespace) -> int:
    finding = _finding(args.report, args.fingerprint)
    key: Literal["repro_reference_only", "repro"] = (
        "repro_reference_only" if args.reference_only else "repro")
    script = finding.get(key)
    if not script:
        raise UsageError(f"finding {args.fingerprint} has no {key}: the report was made "
                         "with --no-minimize")
    print(script, end="")
    return 0


def cmd_upstream(args: argparse.Namespace) -> int:
    finding = _finding(args.report, args.fingerprint)
    if not finding.get("upstream_draft"):
        verdict = finding.get("verdict") or "not triaged"
        print(f"alignbot: finding {args.fingerprint} is {verdict}: only reference-suspect "
              "findings get an upstream draft", file=sys.stderr)
        return 1
    print(f"# {finding['upstream_title']}\n\n{finding['upstream_draft']}\n"
          f"Open it prefilled: {finding['upstream_url']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv)


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse and run one command: its exit status; 2 after one line for bad input, and
    after the usage with no command; INTERNAL_ERROR after one line for alignbot's own."""
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"alignbot: error: {exc}", file=sys.stderr)
        return USAGE
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE
    return _command(args)


def _command(args: argparse.Namespace) -> int:
    try:
        code: int = args.func(args)
        return code
    except (UsageError, OutputError, SpecError, DslError, jobs.WorkerDied,
            CapabilityError) as exc:
        print(f"alignbot: error: {exc}", file=sys.stderr)
    except CandidateStartError as exc:
        print(f"alignbot: error: {exc}", file=sys.stderr)
        if args.verbose and exc.detail:
            print(exc.detail.rstrip("\n"), file=sys.stderr)
    except KeyboardInterrupt as exc:
        print("alignbot: interrupted", file=sys.stderr)
        return exit_status(exc)
    except BrokenPipeError:  # `alignbot repro … | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # alignbot's own failure: neither findings nor bad usage
        return report_internal_error(exc, verbose=args.verbose)
    return USAGE


if __name__ == "__main__":
    sys.exit(main())
