"""The engine's command line for a sandboxed check, spelled in one place: the flags one check
asks for (``check_args``: the job's choices and the configuration's) and the whole command the
sandbox runs (``engine_argv``: the interpreter, the candidate, those flags, the defaults for
what they leave out, where the report goes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import RepoConfig


def check_args(config: RepoConfig, specs: Sequence[str], root: Path, seed: int,
               n: int | None = None, *, shard: tuple[int, int] | None = None,
               baseline: str | None = None, known: str | None = None,
               minimize: bool = True) -> list[str]:
    """The engine's arguments for a check of ``specs`` on the checkout at ``root``; the
    sandbox adds the candidate's own (``engine_argv``). ``seed`` is the check's
    (``alignbot.bot.seeds.check_seed``), ``n`` ``/align``'s override of the configured draws;
    ``shard`` (K, N) runs shard K of N, ``baseline`` and ``known`` name files in the checkout
    (the merge base's report, the known divergences), and without ``minimize`` the findings
    stay as drawn. The OpInfo and ModuleInfo specs run unless the configuration says
    ``opinfo: false``."""
    args = ["--ops", ",".join(specs), "--seed", str(seed),
            "--n", str(config.draws if n is None else n)]
    if config.tolerances is not None:
        args += ["--rtol", repr(config.tolerances.rtol), "--atol", repr(config.tolerances.atol)]
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py") if p.is_file())
    spec_files = config.spec_files(files)
    if not config.opinfo:
        args.append("--no-opinfo")
    if spec_files:  # a spec file alone selects itself: name the other sources too
        args.append("--library")
        if config.opinfo:
            args.append("--opinfo")
        for path in spec_files:
            args += ["--spec-file", path]
    if shard is not None:
        args += ["--shard", f"{shard[0]}/{shard[1]}"]
    if baseline is not None:
        args += ["--baseline", baseline]
    if known is not None:
        args += ["--known", known]
    if not minimize:
        args.append("--no-minimize")
    return args


def engine_argv(config: RepoConfig, check_args: Sequence[str], *, python: Path, repo: Path,
                report: Path) -> list[str]:
    """The engine's whole command line: ``python -m alignbot.checks.cli check``, the candidate's
    options (a relative ``candidate.python`` under ``repo``), ``check_args``, the
    configuration's draws and tracker and one worker unless they say otherwise, and the JSON
    report written to ``report``."""
    # -I: the repository's own `checks/` (or anything on PYTHONPATH) cannot shadow the
    # engine; the candidate's worker still sees PYTHONPATH.
    args = [str(python), "-I", "-B", "-m", "alignbot.checks.cli", "check",
            *config.candidate.cli_args(repo), *check_args]
    if "--n" not in check_args:
        args += ["--n", str(config.draws)]
    if "--tracker" not in check_args:
        args += ["--tracker", config.upstream.tracker]
    if "--jobs" not in check_args:
        # One worker, as before --jobs existed: N workers and their candidates hold N
        # times the threads and memory, and threads count against RLIMIT_NPROC.
        args += ["--jobs", "1"]
    return [*args, "--json", str(report), "--no-progress"]
