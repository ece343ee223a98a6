"""The candidate's worker processes, and a warm parent that forks them.

A worker is restarted after every crash and hang of the candidate, and a fresh interpreter
spends about 2 s of CPU importing torch before the prelude runs. When the prelude begins by
importing torch (after nothing but standard-library imports), importing torch first changes
nothing it sees, so a *zygote* does it once: an interpreter started exactly as a worker would
be (same executable, environment and folder) that imports NumPy and torch, runs no op, and
forks one worker at a time; each fork then runs the worker's own ``main`` and the prelude.
A restart costs a fork instead of an import.

Everything the engine relies on stays as it is with a spawned worker: the fork gets a session
of its own (killed whole on a hang), its stdin and stdout are pipes made by the engine and its
stderr the same file, and its exit status is the one ``subprocess`` would give (negative for
a signal). The zygote is the fork's parent: it waits for the exit without reaping, kills the
fork's whole process group, then reaps and reports the status, the order
:meth:`alignbot.checks.candidate.CandidateProcess.collect` keeps for a spawned worker.
``ALIGNBOT_FRESH_WORKERS=1`` turns zygotes off (benchmarks/worker_restart.py compares them).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, cast

SERVER = r"""
import json, os, runpy, signal, socket, sys
worker = sys.argv[2]
sys.path[0] = os.path.dirname(worker)  # what `python worker.py` would have
import numpy, torch  # what the prelude imports first: paid once, here
ctl = socket.socket(fileno=int(sys.argv[1]))
while True:
    try:
        message, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 3)
    except OSError:
        break
    if not message or len(fds) != 3:
        break
    job = json.loads(message)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ctl.close()
            os.setsid()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
                os.close(fd)
            sys.argv = [worker, *job["args"]]
            runpy.run_path(worker, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)
    for fd in fds:
        os.close(fd)
    ctl.send(json.dumps({"pid": pid}).encode())
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: the group is ours
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    _, status = os.waitpid(pid, 0)
    ctl.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())
"""


def fresh_only() -> bool:
    """Whether every worker must be a fresh interpreter (``ALIGNBOT_FRESH_WORKERS=1``)."""
    return os.environ.get("ALIGNBOT_FRESH_WORKERS", "") not in ("", "0")


def imports_torch_first(prelude: str) -> bool:
    """Whether ``prelude`` imports torch before it does anything else: only docstrings and
    standard-library imports come before it, so a worker that imported torch already behaves
    the same. A prelude that sets a variable, or imports its own module, first does not."""
    try:
        body = ast.parse(prelude).body
    except (SyntaxError, ValueError):
        return False
    for node in body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            return False
        tops = {name.split(".")[0] for name in names}
        if "torch" in tops:
            return True
        if not tops <= sys.stdlib_module_names | {"__future__"}:
            return False
    return False


class Spawned:
    """A worker started as a fresh interpreter: ``subprocess``'s own child."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.pid = proc, proc.pid
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin: IO[bytes] = proc.stdin
        self.stdout: IO[bytes] = proc.stdout

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def exited(self) -> bool:
        """Whether it has exited, leaving it unreaped (its process group's id stays ours)."""
        try:
            info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def kill_group(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()


class Forked:
    """A worker forked by a :class:`Zygote`; the zygote reports its exit status."""

    def __init__(self, zygote: Zygote, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.zygote, self.pid, self.stdin, self.stdout = zygote, pid, stdin, stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._status(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._status(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("worker", timeout or 0.0)
        return self.returncode

    def _status(self, timeout: float | None) -> None:
        """The zygote's report of the exit. A zygote that is gone (the candidate may kill
        its own parent) reports nothing: the fork, which may still run, is killed with its
        session here, before it is called killed."""
        self.returncode = self.zygote.status(timeout)
        if self.returncode is not None and self.zygote.lost:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def exited(self) -> bool:
        return self.poll() is not None

    def kill_group(self) -> None:
        """Kill its session; once the zygote has reported the exit, it has done so itself
        (and the number may belong to someone else by now)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)


class Zygote:
    """The warm parent of one candidate's workers, started like a worker would be."""

    def __init__(self, python: str, worker: Path, env: dict[str, str] | None, cwd: str,
                 stderr: Path) -> None:
        self.lost = False  # gone without reporting its fork's exit
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(stderr, "wb") as errors:
                self.proc = subprocess.Popen(
                    [python, "-u", "-c", SERVER, str(theirs.fileno()), str(worker)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                    env=env, cwd=cwd, start_new_session=True, pass_fds=(theirs.fileno(),))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.ctl = ours

    def fork(self, args: list[str], stderr: Path, timeout: float) -> Forked | None:
        """A new worker (``worker.py ARGS``) with its stderr in ``stderr``; None when the
        zygote is gone (it could not import torch, or it was killed)."""
        child_in, to_child = os.pipe()
        from_child, child_out = os.pipe()
        errors = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        theirs = [child_in, child_out, errors]
        try:
            socket.send_fds(self.ctl, [json.dumps({"args": args}).encode()], theirs)
            reply = self._message(time.monotonic() + timeout)
        except OSError:
            reply = None
        finally:
            for fd in theirs:
                os.close(fd)
        if reply is None or "pid" not in reply:
            os.close(to_child)
            os.close(from_child)
            self.close()
            return None
        return Forked(self, int(reply["pid"]), os.fdopen(to_child, "wb"),
                      os.fdopen(from_child, "rb"))

    def status(self, timeout: float | None) -> int | None:
        """The exit status of the running fork once the zygote reports it (None while it
        runs, up to ``timeout``; a zygote that is gone reports it killed, and is ``lost``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            reply = self._message(deadline)
        except OSError:
            reply = {}
        if reply is None:
            return None
        if "status" not in reply:
            self.lost = True
            return -signal.SIGKILL
        return int(reply["status"])

    def _message(self, deadline: float | None) -> dict[str, Any] | None:
        """The zygote's next message; None past the deadline, OSError when it is gone."""
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([self.ctl], [], [], remaining)[0]:
            return None
        data = self.ctl.recv(1 << 16)
        if not data:
            raise OSError("the zygote exited")
        return cast(dict[str, Any], json.loads(data))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.ctl.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
