"""A warm interpreter that has imported torch and forks one child per script: the oracles
that run PyTorch alone (a repro's control run, the PyTorch-alone scripts) start in
milliseconds instead of the seconds a fresh interpreter takes to import torch.

Only scripts that need nothing but the reference run here; the one run that shows a finding
to a user (the repro against the candidate) always gets a fresh interpreter. The server
imports torch and runs no op before it forks, so no thread pool is copied into a child; each
child gets a session of its own (killed whole on a timeout), its own folder and ``argv``, and
a fresh ``__main__``. There is one server per interpreter and environment (the one the
fresh interpreter would get: its PYTHONPATH and variables). ``ALIGNBOT_FRESH_ORACLES=1``
turns the server off: every script then runs in a fresh interpreter
(benchmarks/per_finding.py ``--cold`` compares the two).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER = r"""
import json, os, runpy, signal, sys
import numpy, torch  # what every script imports: paid once, here
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        code = 1
        try:
            os.chdir(job["cwd"])
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(job[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.stdout = os.fdopen(1, "w", buffering=1)
            sys.stderr = os.fdopen(2, "w", buffering=1)
            sys.argv = [job["script"], *job["args"]]
            sys.path[0] = os.path.dirname(job["script"])
            runpy.run_path(job["script"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    out.write(json.dumps({"pid": pid}) + "\n")
    out.flush()
    _, status = os.waitpid(pid, 0)
    out.write(json.dumps({"status": os.waitstatus_to_exitcode(status)}) + "\n")
    out.flush()
"""


def fresh_only() -> bool:
    """Whether every script must run in a fresh interpreter (``ALIGNBOT_FRESH_ORACLES=1``)."""
    return os.environ.get("ALIGNBOT_FRESH_ORACLES", "") not in ("", "0")


class WarmInterpreter:
    """The server, started on first use in environment ``env`` (None: this process's);
    one script at a time (a lock), any thread."""

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None
                 ) -> None:
        self.python, self.env = python, env
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._child: int | None = None  # the fork running a script
        self._buffer = b""

    def _started(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [self.python, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, start_new_session=True, env=self.env)
            self._buffer = b""
        return self._proc

    def run(self, script: Path, args: list[str], timeout: float) -> tuple[int, str]:
        """Run ``script`` (alone in its folder) in a fork: its exit status and output
        (stdout, then stderr, as :func:`alignbot.checks.repro.run_script` gives them)."""
        folder = script.parent
        job = {"script": str(script), "args": args, "cwd": str(folder),
               "stdout": str(folder / ".stdout"), "stderr": str(folder / ".stderr")}
        with self._lock:
            proc = self._started()
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps(job) + "\n")
                proc.stdin.flush()
                deadline = time.monotonic() + timeout
                started = self._reply(deadline)
                self._child = int(started["pid"]) if started else None
                status = self._reply(deadline) if started else None
                if status is None:
                    self.close()  # the child hung (or the server did): both go
                    return -1, f"the repro did not finish within {timeout:g} s"
                self._child = None
            except BaseException:
                self.close()  # stopped in mid-script: the child goes with the server
                raise
        output = [(folder / name).read_text(errors="replace") for name in (".stdout", ".stderr")]
        return int(status["status"]), output[0][-3000:] + output[1][-3000:]

    def _reply(self, deadline: float) -> dict[str, Any] | None:
        """The server's next line; None past the deadline."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise OSError("the warm interpreter exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        for pid in (self._child, self._proc.pid if self._proc is not None else None):
            if pid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
        self._child, self._buffer = None, b""
        if self._proc is not None:
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self._proc = None


_SHARED: dict[tuple[str, tuple[tuple[str, str], ...]], WarmInterpreter] = {}
KEPT = 4  # servers kept at once (each holds torch); the least recently used goes first


def shared(python: str = sys.executable, env: dict[str, str] | None = None
           ) -> WarmInterpreter:
    """This process's warm interpreter for ``python`` in environment ``env`` (None: this
    process's environment as it is now), started on first use: a script forked from it
    sees the ``sys.path`` and variables a fresh interpreter started with ``env`` sees."""
    environment = dict(os.environ if env is None else env)
    key = (python, tuple(sorted(environment.items())))
    interpreter = _SHARED.pop(key, None) or WarmInterpreter(python, environment)
    _SHARED[key] = interpreter  # the most recently used is last
    while len(_SHARED) > KEPT:
        _SHARED.pop(next(iter(_SHARED))).close()
    return interpreter


def close_all() -> None:
    """Stop this process's warm interpreters and any script they run (a stopped check)."""
    for interpreter in _SHARED.values():
        interpreter.close()
