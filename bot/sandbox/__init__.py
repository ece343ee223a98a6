"""Runs untrusted pull-request code (setup commands, then the engine) contained: no secrets,
no host IPC, an unprivileged user, limits for the whole sandbox, a wall-clock timeout and no
network.

Each command goes through a trampoline, ``child.py`` run as a script, started by the service
(fork+exec only, so it is safe from a threaded service) in a new session. The trampoline,
still privileged,

1. joins the sandbox's cgroups (``cgroup``: memory, processes and CPU of all its processes
   together, v2 or v1), made by ``run_check`` for the whole check, and an empty session
   keyring instead of the service's;
2. execs bubblewrap (``view``), which makes new mount, PID, network, IPC, UTS and cgroup
   namespaces (and a user namespace when the service is not root) and a file system built
   from nothing: the system folders and the allowed paths read-only, the work folder
   read-write (a size-limited tmpfs: the disk quota), fresh ``/proc``, ``/dev``, ``/tmp``,
   ``/var/tmp``, ``/dev/shm``, an empty ``/run``; hidden folders and every socket file and
   FIFO inside what is allowed covered; then runs this file again inside as the worker;
3. the worker drops to a dedicated uid (``setgroups([])``, gid, uid), sets ``no_new_privs``
   and rlimits, applies Landlock and seccomp (``confine``), reports the layers it finds on a
   pipe that only the service reads, and execs the command with a scrubbed environment.

When the command exits, bubblewrap's init exits and the kernel kills whatever is left in the
PID namespace; whatever is left in the cgroup is killed too. Without bubblewrap (not
installed, or a container without ``CAP_SYS_ADMIN``) there are no namespaces: the trampoline
forks the worker itself, Landlock keeps the files to the same trees, seccomp denies sockets
and System V IPC, the uid is still dedicated, so everything it left running is killed with
``kill(-1)`` from that uid; the layers say ``no-namespaces`` and why.

Deny by default: what the sandbox may read beyond the system comes only from the service
(its interpreter, the engine, ``Containment.expose``: the interpreters an operator allowed),
never from the pull request. Whole folders the service owns (its data directory, its key's
folder, ``/run/secrets``, its home, ``Containment.hide``) are hidden, and a hidden folder wins
over an allowed path that contains it. Every path a configuration names (``candidate.python``,
spec files) is resolved, symlinks and ``..`` included, and refused unless it stays in the
repository or under an allowed interpreter folder that is not hidden.

Sandboxes die with the service, even by SIGKILL: the trampoline asks for a parent-death
signal and checks that its parent is still the service, bubblewrap and the worker have one
too, and the PID namespace dies with its init (without one, the trampoline sweeps the
dedicated uid). Each work folder records its owner and uid and each cgroup its service, so a
restarted service removes what a previous life left (``remove_stale``).

Only the JSON report comes back, read without following links and size-capped; output
tails are capped and scrubbed of anything that looks like a token. The result lists the
isolation layers and the limits that applied, and why any could not be.

The modules: ``plan`` (limits, containment, choosing the mode, the uid and bubblewrap),
``paths`` (what the sandbox may see), ``view`` (bubblewrap's command line), ``cgroup``,
``confine`` (Landlock, seccomp), ``child`` (the trampoline and the worker, run as a script),
``runner`` (one command: deadlines, output tails, scrubbing), ``workspace`` (the work folders,
the quota, the report, stale cleanup); ``run_check`` here ties them together.
"""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .cgroup import Cgroup, CgroupLimits
from .child import MIB, REFUSED, TMPFS_BYTES
from .paths import (
    SECRET_DIRS,
    TMP_DIRS,
    _path_problem,
    _python_problem,
    exposed_paths,
    hidden_paths,
    interpreter_prefixes,
    visible,
)
from .plan import (
    GIB,
    UID_BASE,
    UID_COUNT,
    Containment,
    Mode,
    SandboxLimits,
    _Plan,
    _plan,
    _size,
)
from .runner import (
    TAIL_CHARS,
    SandboxResult,
    _last_line,
    _launch,
    _result,
    _Run,
    _short,
)
from .scrub import scrub
from .trampoline import _sweep as _sweep
from .workspace import (
    OWNER_FILE,
    PREFIX,
    REPORT_MAX_BYTES,
    UNRECORDED_STALE_SECONDS,
    _read_report,
    _Workspace,
    remove_stale,
)
from .workspace import _start_time as _start_time

if TYPE_CHECKING:
    from ..config import RepoConfig

__all__ = [
    "GIB", "MIB", "OWNER_FILE", "PREFIX", "REFUSED", "REPORT_MAX_BYTES", "SECRET_DIRS",
    "TAIL_CHARS", "TMPFS_BYTES", "TMP_DIRS", "UID_BASE", "UID_COUNT",
    "UNRECORDED_STALE_SECONDS", "Containment", "Mode", "SandboxLimits", "SandboxResult",
    "exposed_paths", "hidden_paths", "interpreter_prefixes", "remove_stale", "run_check",
    "scrub", "visible",
]


def run_check(repo_dir: Path, config: RepoConfig, check_args: list[str],
              limits: SandboxLimits | None = None,
              containment: Containment | None = None, *,
              stop: threading.Event | None = None) -> SandboxResult:
    """Copy ``repo_dir`` into a fresh work directory, run ``config.candidate.setup`` there,
    then ``python -m alignbot.checks.cli check … --json REPORT``, all contained; return the report.
    Setting ``stop`` kills the running command within half a second and ends the run."""
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
        workspace = _Workspace.create(repo_dir, plan, containment, limits.disk_bytes)
    except OSError as exc:
        why = f"the sandbox could not prepare its work folder: {exc}"
        if exc.errno == errno.ENOSPC and limits.disk_bytes:
            why = (f"the pull request's checkout does not fit the work folder's disk quota "
                   f"of {_size(limits.disk_bytes)} (ALIGNBOT_SANDBOX_DISK_BYTES)")
        return SandboxResult(None, None, why, "", "", time.monotonic() - started)
    group = workspace.cgroup = Cgroup.create(workspace.cgroup_name, CgroupLimits(
        limits.memory_bytes, limits.processes, limits.cpus))
    try:
        result = _run_steps(workspace, plan, config, check_args, limits, wall, deadline, stop)
    except OSError as exc:  # the service itself failed (out of memory, fds, disk)
        result = SandboxResult(None, None, f"the sandbox failed: {exc}", "", "", 0.0)
    finally:
        group.kill()
        applied = group.report()
        workspace.remove(plan)
        group.remove()
    result.limits = [*applied, workspace.quota, *_rlimits(limits), *group.missing]
    result.duration = time.monotonic() - started
    return result


def _rlimits(limits: SandboxLimits) -> list[str]:
    return [f"per process: {_size(limits.memory_bytes)} of address space, "
            f"{limits.cpu_seconds} s of CPU, files up to {_size(limits.file_size)}",
            f"wall clock: {limits.wall_seconds:g} s"]


def _run_steps(ws: _Workspace, plan: _Plan, config: RepoConfig, check_args: list[str],
               limits: SandboxLimits, wall: float, deadline: float,
               stop: threading.Event | None = None) -> SandboxResult:
    env = ws.environment()
    runs: list[tuple[str, _Run]] = []
    for command in config.candidate.setup:
        run = _launch(["/bin/sh", "-c", command], ws.repo, env, ws, plan, limits, deadline,
                      stop)
        runs.append((command, run))
        what = f"setup command `{_short(command)}`"
        reason = run.reason(what, limits, wall)
        if reason or run.exit_code != 0:
            reason = reason or f"{what} failed with exit status {run.exit_code}" + \
                run.hint(limits)
            return _result(runs, None, reason)
    # Setup may have made the interpreter (a venv) or swapped it for a link: decide again.
    problem = _python_problem(str(ws.repo), config.candidate.python, ws.containment,
                              extra_allowed=[str(ws.top)])
    if problem:
        return _result(runs, None, f"refused: {problem}") if runs else SandboxResult(
            None, None, f"refused: {problem}", "", "", 0.0)
    run = _launch(ws.engine_argv(config, check_args), ws.repo, env, ws, plan, limits, deadline,
                  stop)
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
    return _result(runs, None, _engine_failed(run, limits))


def _engine_failed(run: _Run, limits: SandboxLimits) -> str:
    """Why the engine wrote no report: alignbot's own failure is told apart from the
    candidate's (bad options, a candidate that does not start, a limit)."""
    from alignbot.checks.api import INTERNAL_ERROR

    line = _last_line(run.stderr)
    said = f": {line}" if line else ""
    if run.exit_code == INTERNAL_ERROR:
        return f"the engine failed on an internal error of alignbot (exit status " \
               f"{INTERNAL_ERROR}), not of the candidate{said}"
    return f"the engine stopped with exit status {run.exit_code}{said}" + run.hint(limits)
