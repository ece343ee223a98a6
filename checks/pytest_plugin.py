"""The pytest plugin: a team's spec files run as tests, each finding a failure.

    pytest --alignbot-candidate=torch-compile specs/
    pytest --alignbot-prelude=@candidate.py -n 4

Installed with alignbot (entry point ``pytest11``) and idle until ``--alignbot-candidate`` or
``--alignbot-prelude`` is given. Then every file matching the ``alignbot_spec_files`` ini
patterns (default ``align_*.py``) is collected as spec files, each spec one test item. A
spec's draws run on the candidate in its own worker process (one per pytest process, so
``pytest -n`` with pytest-xdist gives each xdist worker its own); a finding fails the item
with the finding's minimized, verified repro as the message. Draws depend only on the seed
and the spec, so a spec gives the same findings whichever process runs it. When pytest
collects folders (not named files or test ids), PyTorch's OpInfo and ModuleInfo specs are
tests too, ``alignbot-opinfo::opinfo.<op>``, unless ``--alignbot-no-opinfo`` or the ini key
``alignbot_opinfo = false`` leaves them out.

The known divergences (``--alignbot-known FILE``, default the root's
``.github/alignbot-known.yml`` when there is one; checks/known.py) make a spec whose findings
are all known an xfail; a spec an entry names (its ``spec``) that shows nothing is an
XPASS(strict), a failure: the divergence is fixed and its entry is to be removed.
"""

from __future__ import annotations

import fnmatch
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .known import KNOWN_PATH, KnownEntry, KnownFile, KnownFileError, read_known
from .options import OptionError, check_numbers
from .repro_case import case_source, starts_the_candidate

if TYPE_CHECKING:
    from .candidate import CandidateConfig, CandidateProcess
    from .findings import Finding
    from .spec import Spec

DEFAULT_PATTERNS = ["align_*.py"]
# How the plugin's options are named to alignbot.checks.options.check_numbers
FLAGS = {"timeout": "--alignbot-timeout", "draws": "--alignbot-draws"}
_CANDIDATE = pytest.StashKey["CandidateProcess"]()
_KNOWN = pytest.StashKey[KnownFile]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from .presets import PRESETS

    group = parser.getgroup("alignbot", "alignment checks against PyTorch (alignbot)")
    group.addoption("--alignbot-candidate", metavar="PRESET",
                    help=f"check spec files against a built-in candidate: "
                         f"{', '.join(sorted(PRESETS))}")
    group.addoption("--alignbot-prelude", metavar="CODE|@FILE",
                    help="Python source that binds `torch` in the candidate's worker "
                         "(@FILE reads it from a file)")
    group.addoption("--alignbot-python", metavar="PATH",
                    help="interpreter for the candidate's worker (default: pytest's)")
    group.addoption("--alignbot-seed", metavar="S", type=int, default=0,
                    help="the seed of every spec's draws (default 0)")
    group.addoption("--alignbot-draws", metavar="N", type=int, default=None,
                    help="draws per spec (default: each spec's own)")
    group.addoption("--alignbot-timeout", metavar="SECONDS", type=float, default=60.0,
                    help="per-program limit before the candidate counts as hung")
    group.addoption("--alignbot-no-minimize", action="store_true",
                    help="report findings as drawn: no shrinking or repro scripts")
    group.addoption("--alignbot-repro-dir", metavar="DIR",
                    help="write each finding's repro script here as FINGERPRINT.py (default: "
                         "alignbot-repros in pytest's cache folder, or a new temporary "
                         "folder without the cache)")
    group.addoption("--alignbot-known", metavar="FILE",
                    help=f"known divergences: all-known findings xfail, a fixed one XPASSes "
                         f"(default: {KNOWN_PATH} under the root, when there is one)")
    group.addoption("--alignbot-no-opinfo", action="store_true",
                    help="leave out the tests of PyTorch's OpInfo and ModuleInfo specs")
    parser.addini("alignbot_spec_files", type="args", default=DEFAULT_PATTERNS,
                  help="glob patterns of spec files (default: align_*.py)")
    parser.addini("alignbot_opinfo", type="bool", default=True,
                  help="also run PyTorch's OpInfo and ModuleInfo specs as tests when pytest "
                       "collects folders (default: true)")


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("alignbot_candidate") or config.getoption("alignbot_prelude"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "alignbot: a spec run by alignbot's pytest plugin")
    if not _enabled(config):
        return
    if config.getoption("alignbot_candidate") and config.getoption("alignbot_prelude"):
        raise pytest.UsageError("give --alignbot-candidate or --alignbot-prelude, not both")
    try:
        check_numbers({"timeout": config.getoption("alignbot_timeout"),
                       "draws": config.getoption("alignbot_draws")}, FLAGS)
    except OptionError as exc:
        raise pytest.UsageError(str(exc)) from exc
    candidate_config(config)  # a bad preset or an unreadable prelude fails now, once
    given = config.getoption("alignbot_known")
    path = Path(given) if given else config.rootpath / KNOWN_PATH
    if given or path.exists():
        try:
            config.stash[_KNOWN] = read_known(path)
        except KnownFileError as exc:
            raise pytest.UsageError(f"--alignbot-known: {exc}") from exc


def candidate_config(config: pytest.Config) -> CandidateConfig:
    from .presets import MissingPackage, NoCandidate, candidate

    prelude = config.getoption("alignbot_prelude")
    if prelude is not None and prelude.startswith("@"):
        path = Path(prelude[1:])
        try:
            prelude = path.read_text()
        except OSError as exc:
            raise pytest.UsageError(f"--alignbot-prelude {path}: {exc.strerror}") from exc
    try:
        return candidate(config.getoption("alignbot_candidate"), prelude,
                         python=config.getoption("alignbot_python"),
                         timeout=config.getoption("alignbot_timeout"),
                         sys_path=None if prelude is None else (str(config.rootpath),),
                         flags=("--alignbot-candidate", "--alignbot-python"))
    except MissingPackage as exc:  # it names the option already
        raise pytest.UsageError(str(exc)) from exc
    except NoCandidate as exc:
        raise pytest.UsageError(f"--alignbot-candidate: {exc}") from exc


def pytest_unconfigure(config: pytest.Config) -> None:
    candidate = config.stash.get(_CANDIDATE, None)
    if candidate is not None:
        candidate.close()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not _enabled(config) or file_path.suffix != ".py":
        return None
    patterns = config.getini("alignbot_spec_files") or DEFAULT_PATTERNS
    if any(fnmatch.fnmatch(file_path.name, pattern) for pattern in patterns):
        return SpecFile.from_parent(parent, path=file_path)
    return None


def opinfo_wanted(config: pytest.Config) -> bool:
    """Whether this session adds the OpInfo specs: the plugin is on, neither the option nor
    the ini key leaves them out, and pytest was given folders (or nothing) to collect, not
    files or test ids, which select exactly what they name."""
    if not _enabled(config) or config.getoption("alignbot_no_opinfo") \
            or not config.getini("alignbot_opinfo"):
        return False
    given = [Path(config.invocation_params.dir, arg) for arg in config.args]
    return all("::" not in str(path) and path.is_dir() for path in given)


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if opinfo_wanted(config):
        items.extend(OpInfoSpecs.from_parent(session, path=config.rootpath / OPINFO).collect())


OPINFO = "alignbot-opinfo"  # the OpInfo tests' node ids start with this name


class OpInfoSpecs(pytest.File):
    """The specs of PyTorch's OpInfo and ModuleInfo databases (``opinfo.<op>``,
    ``moduleinfo.nn.<Module>``), one test each, under a file name no file has."""

    def collect(self) -> Iterator[pytest.Item]:
        from .opinfo import OPINFO_DRAWS, OpInfoChanged
        from .spec_loading import SpecSource

        try:
            specs = SpecSource(library=False, opinfo=True, opinfo_draws=OPINFO_DRAWS).load()
        except OpInfoChanged as exc:
            raise pytest.UsageError(f"alignbot: the OpInfo specs: {exc} "
                                    "(--alignbot-no-opinfo leaves them out)") from exc
        for spec in specs:
            yield _known_marked(SpecItem.from_parent(self, name=spec.name, spec=spec))


class SpecFile(pytest.File):
    """A file of ``@autotest`` specs."""

    def collect(self) -> Iterator[pytest.Item]:
        from .spec_loading import load_file

        specs = load_file(self.path)
        if not specs:
            raise self.CollectError(f"{self.path.name} defines no @autotest spec")
        for spec in specs:
            yield _known_marked(SpecItem.from_parent(self, name=spec.name.rsplit(".", 1)[-1],
                                                     spec=spec))


def _known_marked(item: SpecItem) -> SpecItem:
    """``item`` marked xfail when the known-divergences file names its spec: all known, an
    xfail; nothing found, fixed, a strict XPASS."""
    known = item.config.stash.get(_KNOWN, None)
    named = known.fixed([], [item.spec.name]) if known is not None else []
    if named:
        item.add_marker(pytest.mark.xfail(raises=KnownDivergence, strict=True,
                                          reason="; ".join(_known_reason(e) for e in named)))
    return item


class AlignmentFailure(Exception):
    """A spec's draws showed findings."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(f"{len(findings)} finding(s)")
        self.findings = findings


class KnownDivergence(Exception):
    """A spec's draws showed only findings the known-divergences file expects."""


def _known_reason(entry: KnownEntry) -> str:
    upstream = f" ({entry.upstream})" if entry.upstream else ""
    return f"known divergence {entry.describe()}: {entry.reason}{upstream}"


class SpecItem(pytest.Item):
    """One spec: its draws run on the candidate, each finding a failure."""

    def __init__(self, *, spec: Spec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.add_marker(pytest.mark.alignbot)

    def runtest(self) -> None:
        from .engine import check
        from .minimize import MinimizeOptions, minimize_all

        candidate = _candidate(self.config)
        result = check([self.spec], candidate, seed=self.config.getoption("alignbot_seed"),
                       n=self.config.getoption("alignbot_draws"))
        if not result.findings:
            return  # under a known entry's xfail marker: XPASS(strict), it is fixed
        known = self.config.stash.get(_KNOWN, None)
        entries = [known.match(f) if known is not None else None for f in result.findings]
        new = [f for f, entry in zip(result.findings, entries, strict=True) if entry is None]
        if not new:
            reason = "; ".join(dict.fromkeys(_known_reason(e) for e in entries if e))
            if any(m.name == "xfail" for m in self.iter_markers()):
                raise KnownDivergence(reason)
            pytest.xfail(reason)
        if not self.config.getoption("alignbot_no_minimize"):
            minimize_all(new, [self.spec], candidate, candidate.config,
                         MinimizeOptions(), timings=False)
        raise AlignmentFailure(new)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, AlignmentFailure):
            folder = _repro_dir(self.config) if any(
                f.extra.get("repro") for f in excinfo.value.findings) else None
            python = _candidate(self.config).config.python  # the one that ran
            return "\n\n".join(describe(f, folder, python) for f in excinfo.value.findings)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"alignbot spec {self.spec.name}"


def _candidate(config: pytest.Config) -> CandidateProcess:
    """This process's candidate worker, started on first use and restarted after a crash
    (the engine restarts a worker that died mid-program itself)."""
    from .candidate import CandidateProcess, CandidateStartError

    candidate = config.stash.get(_CANDIDATE, None)
    if candidate is None:
        candidate = CandidateProcess(candidate_config(config))
        try:
            candidate.start()
        except CandidateStartError as exc:
            problem = str(exc)
        else:
            config.stash[_CANDIDATE] = candidate
            return candidate
        candidate.close()
        pytest.fail(f"alignbot: the candidate did not start: {problem}", pytrace=False)
    return candidate


def _repro_dir(config: pytest.Config) -> Path:
    """Where the repro scripts go (``--alignbot-repro-dir``), made on first use."""
    chosen = config.getoption("alignbot_repro_dir")
    if chosen:
        folder = Path(chosen)
        folder.mkdir(parents=True, exist_ok=True)
        return folder.resolve()
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("alignbot-repros")).resolve()
    return Path(tempfile.mkdtemp(prefix="alignbot-repros-")).resolve()


def describe(finding: Finding, folder: Path | None = None,
             python: str = sys.executable) -> str:
    """A finding as a failure message: what differs, the case, and the repro to run: written
    to ``folder`` as ``FINGERPRINT.py`` (None: the whole script in the message)."""
    extra = finding.extra
    draws = f"{finding.count} draw{'s' if finding.count != 1 else ''}"
    verdict = f", {extra['verdict']}" if extra.get("verdict") else ""
    lines = [f"{finding.kind.value} at {finding.op} [{finding.fingerprint}, {draws}{verdict}]",
             finding.message]
    if extra.get("downstream_of"):
        lines.append("downstream of " + ", ".join(
            f"{u['kind']} at {u['op']}" for u in extra["downstream_of"]))
    repro = extra.get("repro")
    if repro:
        state = "verified" if extra.get("repro_verified") else "not verified"
        if folder is None:
            lines += [f"repro ({state}: exits 1 while the bug is there):", repro.rstrip()]
            return "\n".join(lines)
        case = case_source(repro)
        if case is not None:
            lines += ["the case, run on PyTorch and on the candidate:", case]
        path = folder / f"{finding.fingerprint}.py"
        path.write_text(repro)
        other = f" --python {shlex.quote(python)}" if starts_the_candidate(repro) and \
            python != sys.executable else ""
        lines.append(f"repro ({state}: exits 1 while the bug is there): "
                     f"python {shlex.quote(str(path))}{other}")
    elif extra.get("minimize_error"):
        lines.append(f"minimizing failed: {extra['minimize_error']}")
    return "\n".join(lines)
