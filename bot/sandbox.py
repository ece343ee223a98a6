"""Runs untrusted pull-request code (setup commands, then the engine) contained: no secrets,
an unprivileged user, resource limits, a wall-clock timeout and no network where possible.

Each command goes through a trampoline, this file run as a script, started by the service
(fork+exec only, so it is safe from a threaded service) in a new session. The trampoline,
still privileged, enters new namespaces (mount, PID, network, IPC, UTS; a user namespace too
when the service is not root) and forks the namespace's init, which

1. makes mounts private, hides ``/tmp``, ``/var/tmp``, ``/dev/shm``, the service's home and any
   other secret paths under empty tmpfs (re-exposing only what the sandbox needs), mounts a
   fresh ``/proc`` and remounts everything read-only except the work directory;
2. brings up loopback in the empty network namespace;
3. reports the layers it applied on a pipe that only the service reads;
4. forks the worker, which drops to a dedicated uid (``setgroups([])``, gid, uid), sets
   ``no_new_privs`` and rlimits, and execs the command with a scrubbed environment.

When the worker exits, init exits, and the kernel kills whatever is left in the PID
namespace. Without namespaces (a container without ``CAP_SYS_ADMIN``) the uid is still
dedicated, so everything it left running is killed with ``kill(-1)`` from that uid.

Deny by default: what the sandbox may read beyond the system comes only from the service
(its interpreter, the engine, ``Containment.expose``: the interpreters an operator allowed),
never from the pull request. Whole folders the service owns (its data directory, its key's
folder, ``/run/secrets``, its home, ``Containment.hide``) are hidden, and a hidden folder wins
over an allowed path that contains it. Every path a configuration names (``candidate.python``,
spec files) is resolved, symlinks and ``..`` included, and refused unless it stays in the
repository or under an allowed interpreter folder that is not hidden.

Sandboxes die with the service, even by SIGKILL: the trampoline asks for a parent-death
signal and checks that its parent is still the service, init has one too, and the PID
namespace dies with init (without one, the trampoline sweeps the dedicated uid). Each work
folder records its owner and uid, so a restarted service removes what a previous life left
(``remove_stale``).

Only the JSON report comes back, read without following links and size-capped; output
tails are capped and scrubbed of anything that looks like a token.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import importlib.util
import itertools
import json
import os
import re
import resource
import secrets
import select
import shutil
import signal
import site
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

if TYPE_CHECKING:
    from .config import RepoConfig

GIB = 1024 ** 3
MIB = 1024 ** 2
TAIL_CHARS = 4000
REPORT_MAX_BYTES = 16 * MIB
TMPFS_BYTES = 64 * MIB  # each private /tmp, /var/tmp, /dev/shm (RAM, not counted by RLIMIT_AS)
UID_BASE, UID_COUNT = 1_900_000_000, 1_000_000  # dedicated uids: no files, no processes
REFUSED = 125  # the trampoline's exit status when it refused to run the command
TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
SECRET_DIRS = ("/run/secrets",)

Mode = Literal["auto", "uid", "userns", "none"]


@dataclass(frozen=True)
class SandboxLimits:
    """Per-process rlimits (CPU, address space, file size), per-uid processes (threads
    count), and one wall-clock limit for setup and the engine together."""

    cpu_seconds: int = 600
    memory_bytes: int = 4 * GIB
    processes: int = 256
    file_size: int = 1 * GIB
    wall_seconds: float = 900
    network: bool = False


@dataclass(frozen=True)
class Containment:
    """Who runs the pull request's code and what it can see.

    ``mode``: ``uid`` (the service is root: drop to a dedicated uid), ``userns`` (not root:
    a user namespace, secrets hidden by mounts), ``none`` (rlimits and environment only:
    refused unless ``allow_unisolated``), ``auto`` (``uid`` as root, else ``userns``).
    ``hide``: more secret paths (the folders of the app's key and of its database) to hide
    under empty mounts; ``expose``: the operator's allow-list, folders the sandbox may read
    and ``candidate.python`` may name (interpreters installed for candidates). Both come
    from the service, never from a pull request; ``base_dir``: where work folders go."""

    mode: Mode = "auto"
    namespaces: bool = True
    uid: int | None = None
    hide: tuple[Path, ...] = ()
    expose: tuple[Path, ...] = ()
    base_dir: Path | None = None
    allow_unisolated: bool = False


@dataclass
class SandboxResult:
    """What came back. ``reason`` is one line when the sandbox refused or something stopped
    the run; ``isolation`` lists the layers that were applied."""

    report: dict[str, Any] | None
    exit_code: int | None
    reason: str | None
    stdout_tail: str
    stderr_tail: str
    duration: float
    isolation: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- scrubbing

_SECRET_PATTERNS = [
    (re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----"
                r"|\Z)", re.S), "[redacted private key]"),
    (re.compile(r"[A-Za-z0-9+/=\s]{32,}-----END[A-Z0-9 ]*PRIVATE KEY-----"),
     "[redacted private key]"),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})"),
     "[redacted token]"),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
     "[redacted token]"),
    (re.compile(r"\bv1\.[0-9a-f]{40}\b"), "[redacted token]"),
]
_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|PRIVATE|_KEY|CREDENTIAL", re.I)


def scrub(text: str) -> str:
    """Redact token-like strings and the values of the service's secret-looking variables."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name):
            for part in {value, *value.split(",")}:
                if len(part.strip()) >= 8:
                    text = text.replace(part.strip(), "[redacted]")
    return text


def _scrub_data(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_data(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_data(v) for k, v in value.items()}
    return value


def _tail(data: bytes) -> str:
    return scrub(data.decode("utf-8", errors="replace"))[-TAIL_CHARS:]


# --------------------------------------------------------------------------- the public call


def run_check(repo_dir: Path, config: RepoConfig, check_args: list[str],
              limits: SandboxLimits | None = None,
              containment: Containment | None = None) -> SandboxResult:
    """Copy ``repo_dir`` into a fresh work directory, run ``config.candidate.setup`` there,
    then ``python -m checks.cli check … --json REPORT``, all contained; return the report."""
    limits = limits or SandboxLimits()
    containment = containment or Containment()
    started = time.monotonic()
    wall = min(limits.wall_seconds, config.timeout_minutes * 60)
    deadline = started + wall
    plan = _plan(containment)
    if isinstance(plan, str):
        return SandboxResult(None, None, f"refused: {plan}", "", "", 0.0)
    problem = _path_problem(repo_dir, config, check_args, containment)
    if problem:
        return SandboxResult(None, None, f"refused: {problem}", "", "",
                             time.monotonic() - started)
    try:
        workspace = _Workspace.create(repo_dir, plan, containment)
    except OSError as exc:
        return SandboxResult(None, None, f"the sandbox could not prepare its work folder: "
                             f"{exc}", "", "", time.monotonic() - started)
    try:
        result = _run_steps(workspace, plan, config, check_args, limits, wall, deadline)
    except OSError as exc:  # the service itself failed (out of memory, fds, disk)
        result = SandboxResult(None, None, f"the sandbox failed: {exc}", "", "", 0.0)
    finally:
        workspace.remove(plan)
    result.duration = time.monotonic() - started
    return result


def _run_steps(ws: _Workspace, plan: _Plan, config: RepoConfig, check_args: list[str],
               limits: SandboxLimits, wall: float, deadline: float) -> SandboxResult:
    env = ws.environment()
    runs: list[tuple[str, _Run]] = []
    for command in config.candidate.setup:
        run = _launch(["/bin/sh", "-c", command], ws.repo, env, ws, plan, limits, deadline)
        runs.append((command, run))
        what = f"setup command `{_short(command)}`"
        reason = run.reason(what, limits, wall)
        if reason or run.exit_code != 0:
            reason = reason or f"{what} failed with exit status {run.exit_code}" + \
                _hint(run.stderr, limits)
            return _result(runs, None, reason)
    # Setup may have made the interpreter (a venv) or swapped it for a link: decide again.
    problem = _python_problem(str(ws.repo), config.candidate.python, ws.containment,
                              extra_allowed=[str(ws.top)])
    if problem:
        return _result(runs, None, f"refused: {problem}") if runs else SandboxResult(
            None, None, f"refused: {problem}", "", "", 0.0)
    run = _launch(ws.engine_argv(config, check_args), ws.repo, env, ws, plan, limits, deadline)
    runs.append(("alignbot check", run))
    reason = run.reason("the engine", limits, wall)
    if reason:
        return _result(runs, None, reason)
    if run.exit_code in (0, 1):
        report, problem = _read_report(ws.work, "out", "report.json")
        if report is not None:
            return _result(runs, report, None)
        return _result(runs, None, f"the engine exited with status {run.exit_code} but "
                                   f"{problem}")
    line = _last_line(run.stderr)
    return _result(runs, None, f"the engine stopped with exit status {run.exit_code}"
                               f"{': ' + line if line else ''}" + _hint(run.stderr, limits))


def _result(runs: list[tuple[str, _Run]], report: dict[str, Any] | None, reason: str | None
            ) -> SandboxResult:
    """The last command's exit status and isolation; the output of every command, each
    under a ``$ command`` line, then tailed."""
    def joined(stream: str) -> bytes:
        return b"".join(f"$ {_short(label)}\n".encode() + getattr(run, stream)
                        for label, run in runs)

    last = runs[-1][1]
    return SandboxResult(report, last.exit_code, reason, _tail(joined("stdout")),
                         _tail(joined("stderr")), 0.0, list(last.layers))


def _short(command: str, limit: int = 80) -> str:
    one = " ".join(command.split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in _tail(data).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("alignbot: error:")]
    line = (errors or lines or [""])[-1]
    return line if len(line) <= 300 else line[:299] + "…"


def _hint(stderr: bytes, limits: SandboxLimits) -> str:
    """What the output suggests about a limit (the output is untrusted: a hint, no more)."""
    text = stderr[-64 * 1024:].decode("utf-8", errors="replace")
    if re.search(r"MemoryError|Cannot allocate memory|can't allocate memory|bad_alloc", text):
        return f" (memory limit of {_size(limits.memory_bytes)} reached?)"
    if "File too large" in text:
        return f" (file size limit of {_size(limits.file_size)} reached?)"
    if "Resource temporarily unavailable" in text:
        return f" (process limit of {limits.processes} reached?)"
    return ""


def _size(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


_SIGNAL_CAUSE = {
    signal.SIGKILL: lambda lim: (f"memory limit ({_size(lim.memory_bytes)})? or CPU time "
                                 f"limit ({lim.cpu_seconds} s)?"),
    signal.SIGXCPU: lambda lim: f"CPU time limit ({lim.cpu_seconds} s)",
    signal.SIGXFSZ: lambda lim: f"file size limit ({_size(lim.file_size)})",
    signal.SIGSEGV: lambda lim: "a crash",
}


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class _Plan:
    mode: Mode
    uid: int
    gid: int
    dedicated: bool  # a uid of its own: safe to kill(-1) as it afterwards


def _plan(containment: Containment) -> _Plan | str:
    """The uid and mode, or why the sandbox refuses to run."""
    mode = containment.mode
    root = os.geteuid() == 0
    if mode == "auto":
        mode = "uid" if root else "userns"
    if mode == "uid":
        if not root:
            return "dropping to another uid needs the service to run as root"
        uid = containment.uid if containment.uid is not None else \
            UID_BASE + secrets.randbelow(UID_COUNT)
        if uid == 0:
            return "the sandbox uid cannot be 0"
        return _Plan("uid", uid, uid, containment.uid is None)
    if mode == "none" and not containment.allow_unisolated:
        return ("no isolation was asked for (mode `none`) and unisolated runs are not "
                "allowed: the pull request's code could read the service's files")
    return _Plan(mode, os.getuid(), os.getgid(), False)


# --------------------------------------------------------------------------- what it may see


def exposed_paths(containment: Containment) -> list[str]:
    """What the sandbox may read besides the system: the service's interpreters, the engine,
    its templates and the operator's ``expose`` list; never anything a pull request names."""
    from checks.report import templates_dir

    paths = {sys.prefix, sys.base_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    found = importlib.util.find_spec("checks")
    if found and found.submodule_search_locations:
        paths.add(str(Path(next(iter(found.submodule_search_locations))).resolve()))
    paths.add(str(templates_dir().resolve()))
    paths |= {str(p) for p in containment.expose}
    secret = [os.path.realpath(str(p)) for p in (*SECRET_DIRS, *containment.hide)]
    paths |= {p for p in _linked_packages() if not any(_under(p, s) for s in secret)}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def _linked_packages() -> set[str]:
    """Folders of installed packages on the service's import path (never the folder of the
    script it started from) that link their packages in from elsewhere, and where those links
    point: the engine imports them. Links into secret folders are left out by the caller."""
    targets = set()
    for entry in sys.path[1:]:
        if not entry or not os.path.isdir(entry):
            continue
        with os.scandir(entry) as items:
            linked = {os.path.realpath(item.path) for item in items if item.is_symlink()}
        if linked:
            targets |= {os.path.realpath(entry), *linked}
    return targets


def hidden_paths(containment: Containment) -> list[str]:
    """What the sandbox never sees: scratch folders (replaced by private ones), secret
    folders, the service user's home and the service's own ``hide`` list, as given and
    resolved (a key reached through a link hides both the link and its target)."""
    home = os.path.realpath(os.path.expanduser("~"))
    paths = [*TMP_DIRS, *SECRET_DIRS, *(str(p) for p in containment.hide)]
    if home != "/":
        paths.append(home)
    found = set()
    for path in paths:
        if os.path.lexists(path):
            found.add(os.path.realpath(path))
            if not os.path.islink(path):  # a link is covered by hiding what it points to
                found.add(os.path.abspath(path))
    found.discard("/")  # hiding the root would hide the system the sandbox runs on
    return sorted(found)


def interpreter_prefixes(containment: Containment) -> list[str]:
    """Where ``candidate.python`` may point outside the repository: the service's own
    interpreters and the operator's ``expose`` list."""
    paths = {sys.prefix, sys.base_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
             *(str(p) for p in containment.expose)}
    return sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})


def visible(path: str, keep: Iterable[str], hide: Iterable[str]) -> bool:
    """Whether the sandbox sees ``path``: not in a hidden folder, or re-exposed by a kept
    path strictly inside the deepest hidden folder that holds it (hidden wins a tie)."""
    hider = max((h for h in hide if _under(path, h)), key=len, default=None)
    if hider is None:
        return True
    keeper = max((k for k in keep if _under(path, k)), key=len, default=None)
    return keeper is not None and len(keeper) > len(hider) and _under(keeper, hider)


def _path_problem(repo_dir: Path, config: RepoConfig, check_args: Sequence[str],
                  containment: Containment) -> str | None:
    """Why a path the configuration names may not be used, or None: ``candidate.python``
    must stay in the repository or under an allowed interpreter folder, spec files in the
    repository; links and ``..`` are resolved first."""
    repo = os.path.realpath(repo_dir)
    problem = _python_problem(repo, config.candidate.python, containment)
    if problem:
        return problem
    for flag, value in itertools.pairwise(check_args):
        if flag == "--spec-file":
            problem = _repo_path_problem(repo, value, "spec file", [], [], [])
            if problem:
                return problem
    return None


def _python_problem(repo: str, python: str | None, containment: Containment,
                    extra_allowed: Sequence[str] = ()) -> str | None:
    if not python or "/" not in python:  # the sandbox's own, or a command on PATH
        return None
    hide = hidden_paths(containment)
    allowed = interpreter_prefixes(containment)
    keep = [*exposed_paths(containment), *extra_allowed]
    if not python.startswith("/"):
        return _repo_path_problem(repo, python, "candidate.python",
                                  [*allowed, *extra_allowed], keep, hide)
    for path in (os.path.normpath(python), _resolve(python)):
        if path is None or not any(_under(path, prefix) for prefix in allowed):
            return (f"candidate.python `{python}` is outside the repository and the "
                    "interpreter folders this service allows (ALIGNBOT_SANDBOX_INTERPRETERS)")
        if not visible(path, keep, hide):
            return (f"candidate.python `{python}` is in a folder the sandbox hides from pull "
                    "requests")
    return None


def _resolve(path: str) -> str | None:
    """``path`` with every link and ``..`` resolved, or None when that fails (a link into
    /proc/<pid>/root the service may not follow, a loop)."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        try:
            return os.path.realpath(path)
        except (OSError, ValueError):
            return None
    except (OSError, ValueError):
        return None


def _repo_path_problem(repo: str, name: str, what: str, allowed: Sequence[str],
                       keep: Sequence[str], hide: Sequence[str]) -> str | None:
    """A path relative to the repository: it must stay inside, and so must a link it is
    (or passes through), unless the link leads into an allowed, visible folder."""
    if "\x00" in name:
        return f"{what} `{name!r}` is not a path"
    lexical = os.path.normpath(os.path.join(repo, name))
    if name.startswith("/") or not _under(lexical, repo):
        return f"{what} `{name}` leaves the repository"
    real = _resolve(lexical)  # links on the way count even when the file is not there yet
    if real is None:
        return f"{what} `{name}` is a link that cannot be resolved"
    if _under(real, repo):
        return None
    if any(_under(real, prefix) for prefix in allowed) and visible(real, keep, hide):
        return None
    return f"{what} `{name}` is a link that leads outside the repository"


# --------------------------------------------------------------------------- work folders

OWNER_FILE = "owner.json"
PREFIX = "alignbot-sandbox-"
UNRECORDED_STALE_SECONDS = 600  # a folder without its owner record yet: made a moment ago?


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def _write_owner(top: Path, uid: int | None) -> None:
    record = {"pid": os.getpid(), "start": _start_time(os.getpid()), "uid": uid}
    fd = os.open(top / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)


def _read_owner(top: Path) -> dict[str, Any] | None:
    """The owner record, trusted only when the service's own user wrote it (the sandbox
    cannot write there as a dedicated uid)."""
    try:
        fd = os.open(top / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        try:
            record = json.loads(handle.read(4096))
        except ValueError:
            return None
    return record if isinstance(record, dict) else None


def _alive(record: dict[str, Any]) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    start = _start_time(pid)
    return start is not None and start == record.get("start")


def remove_stale(base_dir: Path | None = None) -> list[Path]:
    """Remove the work folders (and kill the dedicated uids) that a service which is no longer
    running left in ``base_dir``; folders of live services are left alone."""
    base = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = sorted(base.glob(PREFIX + "*"))
    except OSError:
        return removed
    for top in candidates:
        try:
            info = os.lstat(top)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        record = _read_owner(top)
        if record is None:
            if time.time() - info.st_mtime < UNRECORDED_STALE_SECONDS:
                continue
        elif _alive(record):
            continue
        uid = (record or {}).get("uid")
        if os.geteuid() == 0 and isinstance(uid, int) and \
                UID_BASE <= uid < UID_BASE + UID_COUNT:
            _sweep(uid)
        shutil.rmtree(top, ignore_errors=True)
        removed.append(top)
    return removed


@dataclass
class _Workspace:
    """``top`` (root-owned, 0711, random name) holds ``work`` (the sandbox's, 0700):
    ``repo`` (a copy of the checkout), ``home``, ``tmp``, ``out`` and ``venv`` (a virtual
    environment layered over the service's, so setup commands can ``pip install``)."""

    top: Path
    containment: Containment

    @property
    def work(self) -> Path:
        return self.top / "work"

    @property
    def repo(self) -> Path:
        return self.work / "repo"

    @property
    def venv(self) -> Path:
        return self.work / "venv"

    @classmethod
    def create(cls, repo_dir: Path, plan: _Plan, containment: Containment) -> _Workspace:
        base = containment.base_dir
        top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base)).resolve()
        ws = cls(top, containment)
        try:
            os.chmod(top, 0o711)
            _write_owner(top, plan.uid if plan.dedicated else None)
            ws.work.mkdir(mode=0o700)
            shutil.copytree(repo_dir, ws.repo, symlinks=True)
            for name in ("home", "tmp", "out"):
                (ws.work / name).mkdir(mode=0o700)
            ws._make_venv()
            if plan.mode == "uid":
                _chown_tree(ws.work, plan.uid, plan.gid)
        except BaseException:
            shutil.rmtree(top, ignore_errors=True)
            raise
        return ws

    def _make_venv(self) -> None:
        venv.EnvBuilder(symlinks=True, with_pip=False).create(self.venv)
        lib = next((self.venv / "lib").glob("python3*")) / "site-packages"
        dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
        (lib / "_alignbot_service.pth").write_text("".join(
            f"import site; site.addsitedir({d!r})\n" for d in dirs))
        pip = self.venv / "bin" / "pip"
        pip.write_text(f'#!/bin/sh\nexec "{self.venv}/bin/python" -m pip "$@"\n')
        pip.chmod(0o755)

    def environment(self) -> dict[str, str]:
        """The whole environment of the sandbox: nothing is inherited from the service."""
        threads = str(min(4, os.cpu_count() or 1))
        tmp = str(self.work / "tmp")
        return {
            "PATH": f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.work / "home"), "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "USER": "alignbot", "LOGNAME": "alignbot",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(self.repo),  # the candidate's prelude imports the repository
            "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # Threads count against RLIMIT_NPROC and glibc arenas against RLIMIT_AS.
            "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads, "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "MALLOC_ARENA_MAX": "2",
        }

    def engine_argv(self, config: RepoConfig, check_args: list[str]) -> list[str]:
        # -I: the repository's own `checks/` (or anything on PYTHONPATH) cannot shadow the
        # engine; the candidate's worker still sees PYTHONPATH.
        args = [str(self.venv / "bin" / "python"), "-I", "-B", "-m", "checks.cli", "check",
                *config.candidate.cli_args(self.repo), *check_args]
        if "--n" not in check_args:
            args += ["--n", str(config.draws)]
        if "--tracker" not in check_args:
            args += ["--tracker", config.upstream.tracker]
        return [*args, "--json", str(self.work / "out" / "report.json"), "--no-progress"]

    def exposed(self) -> list[str]:
        """What the sandbox must be able to read: interpreters, the engine, its templates."""
        return exposed_paths(self.containment)

    def hidden(self) -> list[str]:
        return hidden_paths(self.containment)

    def remove(self, plan: _Plan) -> None:
        if plan.dedicated:
            _sweep(plan.uid)
        shutil.rmtree(self.top, ignore_errors=True)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for base, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.lchown(os.path.join(base, name), uid, gid)


def _sweep(uid: int) -> None:
    """Kill everything still running as the dedicated uid (``kill(-1)`` from that uid)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([*_TRAMPOLINE, "--sweep", str(uid)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30, cwd="/", env=_TRAMPOLINE_ENV)


# --------------------------------------------------------------------------- one command

_TRAMPOLINE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# This file, run as a script: it needs only the standard library, so it works however the
# service was installed, and -I keeps the environment and the working folder out of it.
_TRAMPOLINE = [sys.executable, "-I", "-B", os.path.abspath(__file__)]


@dataclass
class _Run:
    exit_code: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes
    layers: list[str]
    refused: str | None

    def reason(self, what: str, limits: SandboxLimits, wall: float) -> str | None:
        if self.refused:
            return f"refused: {self.refused}"
        if self.timed_out:
            return f"{what} ran past the {wall:g} s wall-clock limit"
        code = self.exit_code
        if code is not None and 128 < code <= 128 + 64:
            sig = signal.Signals(code - 128) if code - 128 in signal.valid_signals() else None
            if sig is not None:
                cause = _SIGNAL_CAUSE.get(sig)
                return f"{what} was killed by {sig.name}" + (f": {cause(limits)}" if cause
                                                             else "")
        return None


def _launch(argv: list[str], cwd: Path, env: dict[str, str], ws: _Workspace, plan: _Plan,
            limits: SandboxLimits, deadline: float) -> _Run:
    """Run one command through the trampoline; kill its whole group at the deadline."""
    status_r, status_w = os.pipe()
    spec = {
        "argv": argv, "cwd": str(cwd), "env": env, "mode": plan.mode, "uid": plan.uid,
        "gid": plan.gid, "status_fd": status_w, "parent": os.getpid(),
        "sweep_uid": plan.uid if plan.dedicated else None, "namespaces": ws.containment.namespaces,
        "network": limits.network, "allow_unisolated": ws.containment.allow_unisolated,
        "rw": [str(ws.top)], "expose": ws.exposed(), "hide": ws.hidden(),
        "tmp": [p for p in TMP_DIRS if os.path.isdir(p)],
        "rlimits": {"cpu": limits.cpu_seconds, "as": limits.memory_bytes,
                    "nproc": limits.processes, "fsize": limits.file_size},
    }
    try:
        proc = subprocess.Popen(
            _TRAMPOLINE, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_w,),
            start_new_session=True, cwd="/", env=_TRAMPOLINE_ENV)
    finally:
        os.close(status_w)
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(json.dumps(spec).encode())
            proc.stdin.close()
        streams, timed_out = _collect(proc, status_r, deadline)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(status_r)
    status: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        status = json.loads(streams[status_r].decode() or "{}")
    code = proc.returncode
    exit_code = 128 - code if code < 0 else code
    refused = status.get("refused")
    if not status and not timed_out:  # init reports before anything untrusted runs
        refused = "the sandbox could not be set up: " + (_last_line(streams[2]) or
                                                         f"exit status {exit_code}")
    layers = ["scrubbed-environment", "rlimits", "wall-clock-kill", *status.get("layers", [])]
    return _Run(exit_code, timed_out, streams[1], streams[2], layers, refused)


def _collect(proc: subprocess.Popen[bytes], status_fd: int, deadline: float
             ) -> tuple[dict[int, bytes], bool]:
    """Read stdout, stderr (keeping tails) and the status pipe until all close, the command
    is gone (plus a grace second for what it left holding the pipes) or the deadline."""
    assert proc.stdout is not None and proc.stderr is not None
    fds = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2, status_fd: status_fd}
    keep = {1: bytearray(), 2: bytearray(), status_fd: bytearray()}
    open_fds = set(fds)
    exited_at: float | None = None
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            return {k: bytes(v) for k, v in keep.items()}, True
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 1.0:
            break
        ready, _, _ = select.select(list(open_fds), [], [], min(0.5, deadline - now))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                continue
            buf = keep[fds[fd]]
            buf += chunk
            if fds[fd] != status_fd and len(buf) > 4 * TAIL_CHARS + 65536:
                del buf[:len(buf) - 4 * TAIL_CHARS]
            elif fds[fd] == status_fd and len(buf) > 65536:
                del buf[65536:]
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return {k: bytes(v) for k, v in keep.items()}, proc.poll() is None


def _read_report(work: Path, folder: str, name: str) -> tuple[dict[str, Any] | None, str]:
    """The report written by untrusted code: no links, no FIFOs, capped, an object with a
    ``findings`` list; scrubbed like the tails."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        work_fd = os.open(work, flags | os.O_DIRECTORY)
        try:
            dir_fd = os.open(folder, flags | os.O_DIRECTORY, dir_fd=work_fd)
        finally:
            os.close(work_fd)
        try:
            fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except FileNotFoundError:
        return None, "wrote no report"
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, "its report is a link (refused)"
        return None, f"its report cannot be opened ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "its report is not a regular file (refused)"
        data = handle.read(REPORT_MAX_BYTES + 1)
    if len(data) > REPORT_MAX_BYTES:
        return None, f"its report is larger than {_size(REPORT_MAX_BYTES)}"
    try:
        report = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return None, f"its report is not valid JSON ({type(exc).__name__})"
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        return None, "its report is not an object with a `findings` list"
    return _scrub_data(report), ""


# --------------------------------------------------------------------------- the trampoline
# Everything below runs in the trampoline process (this file as a script), never in the
# service: it may unshare, mount and change uids.

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
_MOUNT_OPTION_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                       "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME,
                       "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}
_NAMESPACES = (("mount-namespace", CLONE_NEWNS), ("pid-namespace", CLONE_NEWPID),
               ("ipc-namespace", CLONE_NEWIPC), ("uts-namespace", CLONE_NEWUTS),
               ("network-namespace", CLONE_NEWNET))


class _Refused(Exception):
    """The trampoline will not run the command; the message says why, in one line."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return value.encode() if value is not None else None

    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                         enc(data)), f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def _main(argv: Sequence[str]) -> NoReturn:
    if len(argv) == 2 and argv[0] == "--sweep":
        _sweep_as(int(argv[1]))
    # Die with the service, even when it is SIGKILLed: first the parent-death signal, then
    # (once the spec says who the parent should be) a check that it did not die before.
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    spec = json.loads(sys.stdin.buffer.read())
    sweep_uid = spec.get("sweep_uid")
    signal.signal(signal.SIGTERM, lambda *_: _die(sweep_uid))
    if os.getppid() != int(spec["parent"]):
        _die(sweep_uid)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    status_fd = int(spec["status_fd"])
    try:
        layers = _enter_namespaces(spec)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # again: a new user namespace may clear it
        if os.getppid() != int(spec["parent"]):
            _die(sweep_uid)
    except Exception as exc:
        why = str(exc) if isinstance(exc, _Refused) else f"the sandbox could not be set up: {exc}"
        _report(status_fd, {"refused": why})
        os._exit(REFUSED)
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        _init(spec, layers, status_fd, parent)
    os.close(status_fd)
    _, status = os.waitpid(child, 0)
    os._exit(_status_code(status))


def _die(sweep_uid: int | None) -> NoReturn:
    """The service is gone: kill what runs as the dedicated uid (without a PID namespace
    nothing else would), then leave; init follows by its own parent-death signal."""
    if isinstance(sweep_uid, int) and sweep_uid > 0:
        with contextlib.suppress(OSError):
            child = os.fork()
            if child == 0:
                _sweep_as(sweep_uid)
            os.waitpid(child, 0)
    os._exit(128 + signal.SIGTERM)


def _sweep_as(uid: int) -> NoReturn:
    """As ``uid``, ``kill(-1)`` signals every process of that uid but this one, in one pass
    under the kernel's task-list lock: a fork cannot slip past it, and a process with a
    pending SIGKILL cannot fork."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    os._exit(0)


def _report(fd: int, status: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps(status).encode())
        os.close(fd)


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _enter_namespaces(spec: dict[str, Any]) -> list[str]:
    layers: list[str] = []
    if spec["mode"] == "userns":
        try:
            _unshare(CLONE_NEWUSER)
        except OSError as exc:
            if not spec["allow_unisolated"]:
                raise _Refused(f"not root and user namespaces are unavailable ({exc}): the "
                               "pull request's code would run as the service's user") from exc
        else:
            uid, gid = int(spec["uid"]), int(spec["gid"])
            inside = uid or 1000  # never root inside: exec then drops every capability
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"{inside} {uid} 1")
            Path("/proc/self/gid_map").write_text(f"{gid or 1000} {gid} 1")
            layers.append("user-namespace")
    if spec["namespaces"]:
        for name, flag in _NAMESPACES:
            if name == "network-namespace" and spec["network"]:
                continue
            with contextlib.suppress(OSError):
                _unshare(flag)
                layers.append(name)
    if spec["mode"] == "userns" and "user-namespace" in layers \
            and "mount-namespace" not in layers:
        raise _Refused("a user namespace without a mount namespace cannot hide the service's "
                       "files")
    return layers


def _init(spec: dict[str, Any], layers: list[str], status_fd: int, parent: int) -> NoReturn:
    """The namespace's init: set up mounts and loopback, report, run the worker, reap."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the trampoline's handler is not init's
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() not in (parent, 0):  # 0: the parent is outside our PID namespace
            os._exit(128 + signal.SIGKILL)
        uid, gid = _ids(spec)
        if "mount-namespace" in layers:
            layers += _mounts(spec, uid, gid, "pid-namespace" in layers)
        if "network-namespace" in layers:
            _loopback_up()
        if "user-namespace" in layers and "fresh-proc" not in layers:
            # The same uid as the service: the host's /proc would show its environment.
            raise _Refused("without a PID namespace and a fresh /proc the pull request's "
                           "code could read the service's /proc/<pid>/environ")
        if "mount-namespace" not in layers and spec["mode"] == "uid":
            for path in spec["hide"]:
                if path not in spec["tmp"] and _readable(path, uid, gid):
                    raise _Refused(f"without a mount namespace {path} cannot be hidden and "
                                   f"the sandbox user (uid {uid}) could read it; make it "
                                   "unreadable to other users or allow mount namespaces")
        if spec["mode"] == "uid":
            layers.append(f"uid:{uid}")
        for path in spec["expose"]:
            blocked = _blocked(path, uid, gid)
            if blocked:
                raise _Refused(f"the sandbox user (uid {spec['uid']}) cannot reach {path}: "
                               f"{blocked}; install it where every user can read it, or run "
                               "where mount namespaces are allowed")
        layers.append("no-new-privileges")
    except _Refused as exc:
        _report(status_fd, {"refused": str(exc)})
        os._exit(REFUSED)
    except Exception as exc:
        _report(status_fd, {"refused": f"the sandbox could not be set up: {exc}"})
        os._exit(REFUSED)
    _report(status_fd, {"layers": layers})
    worker = os.fork()
    if worker == 0:
        _exec_worker(spec)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if pid == worker:
            os._exit(_status_code(status))


def _exec_worker(spec: dict[str, Any]) -> NoReturn:
    # Nothing may be imported from here on: after the uid changes, the interpreter's own
    # files may be out of reach (they are when there is no mount namespace to expose them).
    try:
        if spec["mode"] == "uid":
            uid, gid = int(spec["uid"]), int(spec["gid"])
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            if os.getresuid() != (uid, uid, uid) or os.getgroups():
                raise OSError("the uid did not change")
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _set_rlimits(spec["rlimits"])
        os.umask(0o077)
        os.chdir(spec["cwd"])
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as exc:  # report and leave; never fall back into init's code
        with contextlib.suppress(OSError):
            os.write(2, f"alignbot sandbox: cannot run {spec['argv'][0]}: {exc}\n".encode())
        os._exit(127)


def _set_rlimits(limits: dict[str, int]) -> None:
    def cap(kind: int, soft: int, hard: int | None = None) -> None:
        _, current = resource.getrlimit(kind)
        hard = soft if hard is None else hard
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(kind, (soft, hard))

    cap(resource.RLIMIT_CORE, 0)
    # The hard CPU limit a little above the soft one: SIGXCPU first, then SIGKILL.
    cap(resource.RLIMIT_CPU, limits["cpu"], limits["cpu"] + 5)
    cap(resource.RLIMIT_AS, limits["as"])
    cap(resource.RLIMIT_NPROC, limits["nproc"])
    cap(resource.RLIMIT_FSIZE, limits["fsize"])


def _ids(spec: dict[str, Any]) -> tuple[int, int]:
    """The uid and gid the command will run as, as this namespace sees them."""
    if spec["mode"] == "uid":
        return int(spec["uid"]), int(spec["gid"])
    return os.getuid(), os.getgid()


def _blocked(path: str, uid: int, gid: int) -> str | None:
    """Why ``uid`` cannot reach ``path`` (a folder on the way without search permission)."""
    current = "/"
    for part in [p for p in path.split("/") if p]:
        info = os.stat(current)
        if not _may(info, uid, gid, 0o1):
            return f"{current} is mode {stat.S_IMODE(info.st_mode):04o}"
        current = os.path.join(current, part)
    return None


def _readable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid`` could read ``path`` (or list or enter it, for a folder)."""
    try:
        if _blocked(path, uid, gid):
            return False
        info = os.stat(path)
    except OSError:
        return False
    return _may(info, uid, gid, 0o5 if stat.S_ISDIR(info.st_mode) else 0o4)


def _may(info: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    if info.st_uid == uid:
        return bool(info.st_mode & (bits << 6))
    if info.st_gid == gid:
        return bool(info.st_mode & (bits << 3))
    return bool(info.st_mode & bits)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mounts(spec: dict[str, Any], uid: int, gid: int, new_pid: bool) -> list[str]:
    """Hide, re-expose, bind the work directory, fresh /proc, read-only everything else."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    keep = [*spec["expose"], *spec["rw"]]
    tmp = set(spec["tmp"])
    hide = set(spec["hide"]) | tmp
    for path in keep:  # folders on the way that the sandbox user may not search
        current = ""
        for part in [p for p in path.split("/") if p][:-1]:
            current += "/" + part
            if not _may(os.stat(current), uid, gid, 0o1):
                hide.add(current)
    for top in list(hide):  # re-expose kept paths one level at a time
        for path in keep:
            if _under(path, top) and path != top and not _inside_kept(path, keep, top):
                parent = os.path.dirname(path)
                while _under(parent, top) and parent != top:
                    hide.add(parent)
                    parent = os.path.dirname(parent)
    hidden: list[str] = []
    for folder in sorted(hide, key=lambda p: p.count("/")):
        # Hidden wins: a secret inside a kept tree is hidden, and so is a kept path that is
        # itself a hidden folder; only kept paths strictly inside a hidden one come back.
        if not os.path.lexists(folder) or (folder in keep and folder not in spec["hide"]):
            continue
        _hide(folder, keep, 0o1777 if folder in tmp else 0o755,
              TMPFS_BYTES if folder in tmp else MIB)
        hidden.append(folder)
    for path in spec["rw"]:
        _mount(path, path, None, MS_BIND | MS_REC)
    layers = ["private-tmp"]
    secret = [h for h in hidden if h not in tmp]
    if secret:
        layers.append("hidden:" + ",".join(secret))
    if new_pid:
        with contextlib.suppress(OSError):
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            layers.append("fresh-proc")
    failed = _read_only(spec["rw"], [h for h in hidden if h in tmp])
    layers.append("read-only-filesystem" if not failed else
                  f"read-only-filesystem (not {', '.join(failed[:3])})")
    return layers


def _inside_kept(path: str, keep: Iterable[str], top: str) -> bool:
    """``path`` lies inside another kept folder below ``top``: that folder comes back whole,
    so nothing between them may be hidden (a venv kept whole, and its ``checks`` package)."""
    return any(other not in (path, top) and _under(path, other) and _under(other, top)
               for other in keep)


def _hide(folder: str, keep: Iterable[str], mode: int, size: int) -> None:
    if not os.path.isdir(folder) or os.path.islink(folder):
        _mount("/dev/null", folder, None, MS_BIND)
        return
    children = sorted({os.path.relpath(k, folder).split("/")[0] for k in keep
                       if _under(k, folder) and k != folder})
    fds = [(child, os.open(os.path.join(folder, child), os.O_PATH))
           for child in children if os.path.lexists(os.path.join(folder, child))]
    try:
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV,
               f"mode={mode:o},size={size}")
        for child, fd in fds:
            placeholder = os.path.join(folder, child)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(placeholder, 0o755)
            else:
                os.close(os.open(placeholder, os.O_CREAT | os.O_WRONLY, 0o644))
            _mount(f"/proc/self/fd/{fd}", placeholder, None, MS_BIND | MS_REC)
    finally:
        for _, fd in fds:
            os.close(fd)


def _read_only(writable: list[str], scratch: list[str]) -> list[str]:
    """Remount every mount read-only but the writable trees, the scratch tmpfs mounts
    themselves (not what is exposed inside them) and /proc, /sys, /dev."""
    failed: list[str] = []
    seen: set[str] = set()
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        options = fields[5].split(",")
        if point in seen or point in scratch or "ro" in options or any(
                _under(point, p) for p in ("/proc", "/sys", "/dev", *writable)):
            continue
        seen.add(point)
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        for option in options:
            flags |= _MOUNT_OPTION_FLAGS.get(option, 0)
        try:
            _mount(None, point, None, flags)
        except OSError:
            failed.append(point)
    return failed


def _loopback_up() -> None:
    """Bring ``lo`` up in the new network namespace (SIOCGIFFLAGS, SIOCSIFFLAGS)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, 0x8913, request)[:18])[1]
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))


if __name__ == "__main__":
    _main(sys.argv[1:])
