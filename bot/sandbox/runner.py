"""One command through the trampoline: started by fork+exec in a new session, its spec on
stdin, its whole group killed at the deadline; stdout and stderr read as capped tails,
scrubbed of anything that looks like a token, the status pipe read for the layers applied
or why it refused; and the one-line reasons built from what came back."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import child, confine, view
from .paths import TMP_DIRS
from .plan import SandboxLimits, _Plan, _size
from .scrub import scrub
from .trampoline import _TRAMPOLINE, _TRAMPOLINE_ENV

if TYPE_CHECKING:
    from .workspace import _Workspace

TAIL_CHARS = 4000
STOPPED = "the check was no longer needed"


@dataclass
class SandboxResult:
    """What came back. ``reason`` is one line when the sandbox refused or something stopped
    the run; ``isolation`` lists the layers that were applied, ``limits`` the resource
    limits (and, for each one that could not be applied, why)."""

    report: dict[str, Any] | None
    exit_code: int | None
    reason: str | None
    stdout_tail: str
    stderr_tail: str
    duration: float
    isolation: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)  # applied, and what could not be and why



def _tail(data: bytes) -> str:
    return scrub(data.decode("utf-8", errors="replace"))[-TAIL_CHARS:]


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
    if "No space left on device" in text and limits.disk_bytes > 0:
        return f" (the work folder's disk quota of {_size(limits.disk_bytes)} is full?)"
    return ""


def _limit_hit(hits: list[str], limits: SandboxLimits) -> str | None:
    """A cgroup limit the kernel says was reached (not a guess from the output)."""
    if "memory" in hits:
        return (f"the sandbox's memory limit ({_size(limits.memory_bytes)} for all its "
                "processes together) was reached")
    if "pids" in hits:
        return f"the sandbox's process limit ({limits.processes}) was reached"
    if "disk" in hits:
        return f"the work folder's disk quota ({_size(limits.disk_bytes)}) is full"
    return None



_SIGNAL_CAUSE = {
    signal.SIGKILL: lambda lim: (f"memory limit ({_size(lim.memory_bytes)})? or CPU time "
                                 f"limit ({lim.cpu_seconds} s)?"),
    signal.SIGXCPU: lambda lim: f"CPU time limit ({lim.cpu_seconds} s)",
    signal.SIGXFSZ: lambda lim: f"file size limit ({_size(lim.file_size)})",
    signal.SIGSEGV: lambda lim: "a crash",
}



# --------------------------------------------------------------------------- one command


@dataclass
class _Run:
    exit_code: int | None
    timed_out: bool
    stdout: bytes
    stderr: bytes
    layers: list[str]
    refused: str | None
    stopped: bool = False  # killed early: its ``stop`` event was set
    hits: list[str] = field(default_factory=list)  # limits reached: memory, pids, disk

    def reason(self, what: str, limits: SandboxLimits, wall: float) -> str | None:
        if self.stopped:
            return f"{what} was stopped: {STOPPED}"
        if self.refused:
            return f"refused: {self.refused}"
        if self.timed_out:
            return f"{what} ran past the {wall:g} s wall-clock limit"
        code = self.exit_code
        if code is not None and 128 < code <= 128 + 64:
            sig = signal.Signals(code - 128) if code - 128 in signal.valid_signals() else None
            if sig is not None:
                hit = _limit_hit(self.hits, limits) if sig == signal.SIGKILL else None
                cause = (lambda _: hit) if hit else _SIGNAL_CAUSE.get(sig)
                return f"{what} was killed by {sig.name}" + (f": {cause(limits)}" if cause
                                                             else "")
        return None

    def hint(self, limits: SandboxLimits) -> str:
        """Why a command that exited on its own may have failed: a cgroup limit it reached
        (one of its processes was killed), else what its output suggests."""
        hit = _limit_hit(self.hits, limits)
        return f" ({hit})" if hit else _hint(self.stderr, limits)


# what a sandbox without namespaces may open in /dev: Landlock denies the rest
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


def _spec(argv: list[str], cwd: Path, env: dict[str, str], ws: _Workspace, plan: _Plan,
          limits: SandboxLimits, status_fd: int) -> dict[str, Any]:
    """What the trampoline is told: the command, who runs it, the cgroups to join, the
    bubblewrap command line (or none, and why) and the kernel filters."""
    work = str(ws.work)  # all the sandbox may write; the top above it is the service's
    expose, hide = ws.exposed(), ws.hidden()
    spec: dict[str, Any] = {
        "argv": argv, "cwd": str(cwd), "env": env, "mode": plan.mode, "uid": plan.uid,
        "gid": plan.gid, "status_fd": status_fd, "parent": os.getpid(),
        "sweep_uid": plan.uid if plan.dedicated else None,
        "allow_unisolated": ws.containment.allow_unisolated, "expose": expose, "hide": hide,
        "tmp": [p for p in TMP_DIRS if os.path.isdir(p)],
        "rlimits": {"cpu": limits.cpu_seconds, "as": limits.memory_bytes,
                    "nproc": limits.processes, "fsize": limits.file_size},
        "cgroups": ws.cgroup.procs if ws.cgroup else [], "bwrap": None, "no_bwrap": plan.no_bwrap,
        "confine": {"files": None, "unix_sockets": [work], "ipc": False, "socket_families": None},
    }
    if plan.bwrap is not None:
        # the worker is this package's child.py, run again inside by the service's interpreter
        code = os.path.dirname(os.path.abspath(child.__file__))
        shown = [*expose, code]
        built = view.bwrap_argv(plan.bwrap, root=plan.mode == "uid", network=limits.network,
                                expose=shown, hide=hide, workspace=work, empty=str(ws.empty),
                                masks=view.special_files([*view.system_paths(), *shown]),
                                inside_uid=plan.uid or 1000)
        spec.update(bwrap=built.argv, worker=_TRAMPOLINE, view_layers=built.layers,
                    host_ns=child.host_namespaces())
    else:  # no namespaces: Landlock keeps the file system to the same trees, seccomp closes
        # the host's sockets and System V IPC, which no mount or IPC namespace hides
        families = [confine.AF_INET, confine.AF_INET6] if limits.network else []
        spec["confine"] = {
            "files": {"read": [*view.system_paths(), *expose, "/proc"], "write": [work],
                      "devices": list(DEVICES)},
            "unix_sockets": [work], "ipc": True, "socket_families": families}
    return spec


def _launch(argv: list[str], cwd: Path, env: dict[str, str], ws: _Workspace, plan: _Plan,
            limits: SandboxLimits, deadline: float, stop: threading.Event | None = None
            ) -> _Run:
    """Run one command through the trampoline; kill its whole group at the deadline, or
    within half a second of ``stop`` being set, and whatever it left in its cgroup."""
    status_r, status_w = os.pipe()
    try:
        spec = _spec(argv, cwd, env, ws, plan, limits, status_w)
        before = ws.cgroup.counters() if ws.cgroup else {}
        proc = subprocess.Popen(
            _TRAMPOLINE, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(status_w,),
            start_new_session=True, cwd="/", env=_TRAMPOLINE_ENV)
    except BaseException:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(json.dumps(spec).encode())
            proc.stdin.close()
        streams, timed_out = _collect(proc, status_r, deadline, stop)
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(status_r)
        if ws.cgroup:
            ws.cgroup.kill()
    status: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        status = json.loads(streams[status_r].decode() or "{}")
    code = proc.returncode
    exit_code = 128 - code if code < 0 else code
    refused = status.get("refused")
    stopped = timed_out and stop is not None and stop.is_set()
    if not status and not timed_out:  # the worker reports before anything untrusted runs
        refused = "the sandbox could not be set up: " + (_last_line(streams[2]) or
                                                         f"exit status {exit_code}")
    layers = ["scrubbed-environment", "rlimits", "wall-clock-kill", *status.get("layers", [])]
    after = ws.cgroup.counters() if ws.cgroup else {}
    hits = [name for name, count in after.items() if count > before.get(name, 0)]
    if ws.quota_full():
        hits.append("disk")
    return _Run(exit_code, timed_out and not stopped, streams[1], streams[2], layers, refused,
                stopped, hits)


def _collect(proc: subprocess.Popen[bytes], status_fd: int, deadline: float,
             stop: threading.Event | None = None) -> tuple[dict[int, bytes], bool]:
    """Read stdout, stderr (keeping tails) and the status pipe until all close, the command
    is gone (plus a grace second for what it left holding the pipes), the deadline or
    ``stop``; True when cut short (deadline or ``stop``)."""
    assert proc.stdout is not None and proc.stderr is not None
    fds = {proc.stdout.fileno(): 1, proc.stderr.fileno(): 2, status_fd: status_fd}
    keep = {1: bytearray(), 2: bytearray(), status_fd: bytearray()}
    open_fds = set(fds)
    exited_at: float | None = None
    while open_fds:
        now = time.monotonic()
        if now >= deadline or (stop is not None and stop.is_set()):
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
