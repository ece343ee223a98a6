"""The candidate's worker process: start it, send it Programs, survive its crashes and hangs."""

from __future__ import annotations

import os
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import zygote as zygotes
from .installs import lacks
from .program import Program
from .runtime.wire import WireError, read_message, write_message
from .runtime.worker import MAX_PACKAGES, MISSING_MARK, PACKAGE_NAME, PACKAGE_VERSION

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
WORKER = Path(__file__).parent / "runtime" / "worker.py"


class CandidateStartError(Exception):
    """The candidate cannot start: no such interpreter, one that lacks a module, or its
    prelude failed. The message is one line; ``detail`` what the worker said (its stderr,
    the prelude's traceback), for ``--verbose``."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class CandidateConfig:
    """How to start a candidate. ``overrides`` maps a torch API name to ``module:attr``."""

    name: str
    prelude: str
    python: str = sys.executable
    overrides: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    start_timeout: float = 180.0
    env: dict[str, str] | None = None
    # folders the candidate can import from (default: where alignbot was started)
    sys_path: tuple[str, ...] = field(default_factory=lambda: (os.getcwd(),))


@dataclass
class RunOutcome:
    """Observations, or how the worker died and at which node."""

    observations: dict[str, Any] | None = None
    died: str | None = None  # "crash" or "timeout"
    node_index: int = -1
    detail: str = ""


class _DeadlineReader:
    """A file-like read() over a pipe that gives up at a deadline."""

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd, self.deadline = fd, deadline

    def read(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([self.fd], [], [], remaining)
        if not ready:
            raise TimeoutError
        return os.read(self.fd, min(size, 1 << 20))


class CandidateProcess:
    """A persistent worker; after a crash or hang it is killed and restarted on next use,
    forked from a zygote that imported torch already where the prelude allows it
    (:mod:`alignbot.checks.zygote`)."""

    def __init__(self, config: CandidateConfig) -> None:
        self.config = config
        self.version = ""
        self.packages: dict[str, str] = {}  # what the prelude imported, with versions
        # what the prelude declares it cannot do, as sent (checks/capabilities.py judges it)
        self.declared: dict[str, Any] = {}
        self.starts = 0
        self._proc: zygotes.Spawned | zygotes.Forked | None = None
        self._zygote: zygotes.Zygote | None = None
        self._warm = not zygotes.fresh_only() and zygotes.imports_torch_first(config.prelude)
        self._deadline: float | None = None
        self._sent = False
        self._stderr_from = 0  # where the running program's stderr begins
        self._dir = tempfile.TemporaryDirectory(prefix="alignbot-worker-")
        self._progress = Path(self._dir.name) / "progress"
        self._stderr_path = Path(self._dir.name) / "stderr"

    def __enter__(self) -> CandidateProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> str:
        self._progress.write_bytes(struct.pack("<q", -1))
        self._stderr_from = 0
        self._proc = self._forked() or self._spawned()
        self.starts += 1
        reply = self._exchange({"cmd": "start", "prelude": self.config.prelude,
                                "overrides": self.config.overrides,
                                "sys_path": list(self.config.sys_path)},
                               self.config.start_timeout)
        if reply is None:
            self.kill()
            raise self._exited_while_starting()
        if not reply.get("ok"):
            self.kill()
            raise self._prelude_failed(reply)
        self.version = str(reply.get("version", ""))
        self.packages = packages(reply.get("packages"))
        declared = reply.get("declared")
        self.declared = dict(declared) if isinstance(declared, dict) else {}
        return self.version

    def _exited_while_starting(self) -> CandidateStartError:
        said = self._stderr_text()
        marked = [line for line in said.splitlines() if line.startswith(MISSING_MARK)]
        if marked:
            module = marked[-1][len(MISSING_MARK):].strip()
            return CandidateStartError(f"the candidate's worker cannot start: "
                                       f"{lacks(self.config.python, [module])}", said)
        tail = self._stderr_tail()
        return CandidateStartError(
            f"the candidate worker exited while starting{': ' + tail if tail else ''}", said)

    def _prelude_failed(self, reply: dict[str, Any]) -> CandidateStartError:
        detail = str(reply.get("traceback") or "")
        missing = reply.get("missing")
        if isinstance(missing, str) and missing:
            return CandidateStartError(f"the candidate's prelude failed: "
                                       f"{lacks(self.config.python, [missing])}", detail)
        return CandidateStartError(f"the candidate's prelude failed: {reply.get('error')}",
                                   detail)

    def _spawned(self) -> zygotes.Spawned:
        stderr = open(self._stderr_path, "wb")  # noqa: SIM115 - handed to the child
        try:
            return zygotes.Spawned(subprocess.Popen(
                [self.config.python, "-u", str(WORKER), str(self._progress)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=self.config.env, start_new_session=True, cwd=self._dir.name))
        except OSError as exc:
            raise CandidateStartError(
                f"cannot start the candidate interpreter {self.config.python!r}: "
                f"{exc.strerror or exc}") from exc
        finally:
            stderr.close()

    def _forked(self) -> zygotes.Forked | None:
        """A worker forked from this candidate's zygote (started on first use); None where
        there is none: the prelude does not import torch first, or the interpreter cannot
        (its workers are then fresh interpreters, which say why)."""
        if not self._warm:
            return None
        if self._zygote is None or not self._zygote.alive():
            try:
                self._zygote = zygotes.Zygote(
                    self.config.python, WORKER, self.config.env, self._dir.name,
                    Path(self._dir.name) / "zygote-stderr")
            except OSError:
                self._warm = False
                return None
        forked = self._zygote.fork([str(self._progress)], self._stderr_path,
                                   self.config.start_timeout)
        if forked is None:
            self._zygote, self._warm = None, False
        return forked

    def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send and wait; None when the worker died, TimeoutError when it hung."""
        if not self._send(message):
            return None
        return self._receive(time.monotonic() + timeout)

    def _send(self, message: dict[str, Any]) -> bool:
        assert self._proc is not None and self._proc.stdin
        try:
            write_message(self._proc.stdin, message)  # type: ignore[arg-type]
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        assert self._proc is not None and self._proc.stdout
        try:
            reader = _DeadlineReader(self._proc.stdout.fileno(), deadline)
            reply: dict[str, Any] = read_message(reader)  # type: ignore[arg-type]
            return reply
        except (WireError, ConnectionResetError):
            return None

    def run(self, program: Program) -> RunOutcome:
        self.submit(program)
        return self.collect()

    def submit(self, program: Program) -> None:
        """Start replaying ``program``; the engine can trace the next one meanwhile.
        At most one program is in flight: ``collect`` before the next ``submit``."""
        assert self._deadline is None, "collect() the previous program first"
        if self._proc is None or self._proc.poll() is not None:
            self.start()
        self._stderr_from = self._stderr_size()
        self._sent = self._send({"cmd": "run", "program": program})
        self._deadline = time.monotonic() + self.config.timeout

    @property
    def pending(self) -> bool:
        return self._deadline is not None

    def collect(self) -> RunOutcome:
        deadline, self._deadline = self._deadline, None
        assert deadline is not None, "nothing was submitted"
        try:
            reply = self._receive(deadline) if self._sent else None
        except TimeoutError:
            index = self._node_index()
            self.kill()
            return RunOutcome(died="timeout", node_index=index,
                              detail=f"no answer within {self.config.timeout:g} s")
        if reply is None:
            index = self._node_index()
            code = self._reap()
            # Only now, with the worker and everything it started gone, is its stderr
            # complete: reading it earlier would make the message depend on timing.
            tail = self._stderr_tail(start=self._stderr_from)
            return RunOutcome(died="crash", node_index=index,
                              detail=_describe_exit(code) + (f"; stderr: {tail}" if tail else ""))
        return RunOutcome(observations=reply["observations"])

    def _node_index(self) -> int:
        try:
            return int(struct.unpack("<q", self._progress.read_bytes()[:8])[0])
        except (OSError, struct.error):
            return -1

    def _reap(self, grace: float = 10.0) -> int | None:
        """The dead worker's exit status (None if it does not exit within ``grace``), once
        its whole process group is killed, so that nothing writes to its stderr any more."""
        proc = self._proc
        if proc is None:
            return None
        deadline = time.monotonic() + grace
        # Wait for the exit without reaping: the unreaped worker keeps its process group's
        # id from being reused, so killing the group cannot hit anyone else.
        while not proc.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        exited = proc.exited()
        proc.kill_group()
        code = proc.wait()
        self.kill()
        return code if exited else None

    def _stderr_size(self) -> int:
        try:
            return self._stderr_path.stat().st_size
        except OSError:
            return 0

    def _stderr_tail(self, limit: int = 600, start: int = 0) -> str:
        """The last ``limit`` bytes the worker wrote to stderr from offset ``start``, on one
        line, with addresses (thread ids in a fatal error's dump) masked: they differ on
        every run."""
        return " ".join(self._stderr_text(start)[-limit:].split())

    def _stderr_text(self, start: int = 0) -> str:
        try:
            data = self._stderr_path.read_bytes()[start:]
        except OSError:
            return ""
        return ADDRESS.sub("0x…", data.decode(errors="replace"))

    def kill(self) -> None:
        self._deadline = None
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill_group()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._proc = None

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                write_message(self._proc.stdin, {"cmd": "exit"})  # type: ignore[arg-type]
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        self._dir.cleanup()


def packages(reply: Any) -> dict[str, str]:
    """The worker's ``[[name, version], …]`` of the packages the prelude imported, as a
    dict; only what looks like a package name and a version (the worker runs the
    candidate's code), at most ``MAX_PACKAGES``."""
    found: dict[str, str] = {}
    for item in reply if isinstance(reply, list) else []:
        if isinstance(item, list) and len(item) == 2 and all(isinstance(i, str) for i in item) \
                and PACKAGE_NAME.fullmatch(item[0]) and PACKAGE_VERSION.fullmatch(item[1]):
            found.setdefault(item[0], item[1])
        if len(found) >= MAX_PACKAGES:
            break
    return found


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker stopped answering"
    if code < 0:
        try:
            return f"the worker was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with status {code}"
