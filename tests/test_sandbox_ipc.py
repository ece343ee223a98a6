"""The sandbox sees no host IPC: every socket file of the host (its /proc/net/unix and a walk of
its file system) and abstract sockets, FIFOs, files in shared folders (/run, /dev/shm,
/var/tmp), world-writable folders, System V shared memory, the service's session keyring,
signals and ptrace to the host's and a sibling sandbox's processes, and the host's /proc. The
same probe (``fixtures/hostile/ipc``) runs on the host first and reaches them all, then in each
kind of sandbox and reaches none."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import select
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sandbox_repo import (
    HOSTILE,
    SYSTEM_PYTHON,
    bwrap_problem,
    needs_root,
    printed,
    run_hostile,
)

from alignbot.bot import sandbox
from alignbot.bot.config import load_config
from alignbot.bot.sandbox import GIB, Containment, SandboxLimits, run_check, view

LIMITS = SandboxLimits(cpu_seconds=120, memory_bytes=2 * GIB, processes=64, wall_seconds=180)
LIBC = ctypes.CDLL(None, use_errno=True)
KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
ADD_KEY = {"x86_64": 248, "aarch64": 217}.get(os.uname().machine)
IPC_CREAT, IPC_RMID = 0o1000, 0

pytestmark = [needs_root, pytest.mark.skipif(not Path("/run").is_dir(), reason="no /run")]


@dataclass
class HostIpc:
    """What a host running the service may have: sockets, FIFOs and files in the usual shared
    folders and inside a folder the service exposes, an abstract socket, a System V segment, a
    key in the service's session keyring, and processes (one of them another sandbox's)."""

    token: str
    exposed: Path
    folders: list[Path] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    listeners: list[socket.socket] = field(default_factory=list)
    fifos: list[tuple[Path, int]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    victims: list[dict[str, Any]] = field(default_factory=list)
    key_name: str = ""
    canary: str = ""
    shm_key: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def containment(self, **changes: Any) -> Containment:
        return Containment(**{"expose": (self.exposed,), **changes})

    def targets(self) -> dict[str, Any]:
        return {"sockets": host_sockets(), "abstract": [f"alignbot-test-{self.token}",
                                                        f"alignbot-test-{self.token}-dgram"],
                "fifos": [str(p) for p, _ in self.fifos], "files": [str(p) for p in self.files],
                "shm_key": self.shm_key, "key_name": self.key_name, "victims": self.victims,
                # what the sandbox is given to read: the folders on the way to it are
                # bubblewrap's mount points (a checkout in /tmp puts one in /tmp)
                "exposed": [str(self.exposed), *sandbox.exposed_paths(self.containment())]}

    def serve(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select(self.listeners, [], [], 0.2)
            for sock in ready:
                if sock.type == socket.SOCK_STREAM:
                    with contextlib.suppress(OSError):
                        conn, _ = sock.accept()
                        conn.close()
                        self.received.append(f"connection to {sock.getsockname()!r}")
                else:
                    with contextlib.suppress(OSError):
                        sock.recv(64)
                        self.received.append(f"datagram to {sock.getsockname()!r}")

    def drain(self) -> list[str]:
        """What reached the host since the last call: connections, datagrams, FIFO writes."""
        time.sleep(0.5)
        got = []
        for path, fd in self.fifos:
            with contextlib.suppress(BlockingIOError):
                if os.read(fd, 64):
                    got.append(f"fifo {path}")
        got += self.received
        self.received = []
        return got


def host_sockets() -> list[str]:
    """Every pathname socket on this host: its /proc/net/unix, then a walk of every mount."""
    found = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[7].startswith("/"):
            found.add(parts[7])
    found |= {path for path, mode in view.scan("/", skip=("/proc", "/sys"))
              if stat.S_ISSOCK(mode)}
    return sorted(found)


def _listen(host: HostIpc, address: str, kind: int = socket.SOCK_STREAM) -> None:
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(address)
    if kind == socket.SOCK_STREAM:
        sock.listen(8)
    if not address.startswith("\0"):
        os.chmod(address, 0o777)  # as PostgreSQL's: anyone may connect
        host.paths.append(Path(address))
    sock.setblocking(False)
    host.listeners.append(sock)


def _fifo(host: HostIpc, path: Path) -> None:
    os.mkfifo(path, 0o666)
    path.chmod(0o666)
    host.paths.append(path)
    host.fifos.append((path, os.open(path, os.O_RDONLY | os.O_NONBLOCK)))


def _file(host: HostIpc, path: Path) -> None:
    path.write_text(host.canary)
    path.chmod(0o644)
    host.paths.append(path)
    host.files.append(path)


@pytest.fixture(scope="module")
def host_ipc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostIpc]:
    token = secrets.token_hex(6)
    exposed = tmp_path_factory.mktemp("exposed")
    exposed.chmod(0o755)  # the sandbox's uid may list it: only the masks stand in the way
    found = HostIpc(token, exposed, canary=f"ipccanary{secrets.token_hex(12)}")
    run = Path(f"/run/alignbot-test-{token}")  # like /var/run/postgresql
    shared = Path(f"/run/alignbot-test-{token}-shared")  # like /run/lock: world-writable
    run.mkdir(mode=0o755)
    shared.mkdir()
    shared.chmod(0o1777)
    found.folders += [run, shared]
    for path in (run / "s.sock", Path(f"/dev/shm/alignbot-test-{token}.sock"),
                 Path(f"/var/tmp/alignbot-test-{token}.sock"), exposed / "s.sock"):
        _listen(found, str(path))
    _listen(found, str(run / "d.sock"), socket.SOCK_DGRAM)
    _listen(found, f"\0alignbot-test-{token}")
    _listen(found, f"\0alignbot-test-{token}-dgram", socket.SOCK_DGRAM)
    for path in (run / "fifo", Path(f"/dev/shm/alignbot-test-{token}.fifo"), exposed / "fifo"):
        _fifo(found, path)
    for path in (run / "canary", shared / "canary", Path(f"/dev/shm/alignbot-test-{token}"),
                 Path(f"/var/tmp/alignbot-test-{token}")):
        _file(found, path)
    found.shm_key = 0x41000000 + secrets.randbelow(1 << 20)
    shm = LIBC.shmget(found.shm_key, 4096, IPC_CREAT | 0o666)
    assert shm >= 0, os.strerror(ctypes.get_errno())
    LIBC.shmat.restype = ctypes.c_void_p
    address = LIBC.shmat(shm, None, 0)
    ctypes.memmove(address, found.canary.encode(), len(found.canary))
    found.key_name = f"alignbot-test-{token}"
    key = -1
    if ADD_KEY is not None:
        payload = found.canary.encode()
        key = LIBC.syscall(ADD_KEY, b"user", found.key_name.encode(), payload, len(payload), -3)
    marker = f"600.{secrets.randbelow(10 ** 9):09d}"
    service = subprocess.Popen(["sleep", marker])  # one of the service's own processes
    found.victims.append({"pid": service.pid, "marker": marker})
    thread = threading.Thread(target=found.serve, daemon=True)
    thread.start()
    yield found
    found.stop.set()
    thread.join()
    service.kill()
    service.wait()
    for sock in found.listeners:
        sock.close()
    for _, fd in found.fifos:
        os.close(fd)
    for path in found.paths:
        path.unlink(missing_ok=True)
    for folder in found.folders:
        shutil.rmtree(folder, ignore_errors=True)
    LIBC.shmdt(ctypes.c_void_p(address))
    LIBC.shmctl(shm, IPC_RMID, None)
    if key >= 0 and KEYCTL is not None:
        LIBC.syscall(KEYCTL, 21, key)  # KEYCTL_INVALIDATE


@pytest.fixture
def host(host_ipc: HostIpc) -> HostIpc:
    """The module's host, with nothing left from earlier tests to drain (the control
    connects to everything, and a test that fails stops before its own drain)."""
    host_ipc.drain()
    return host_ipc


@pytest.mark.slow
def test_the_probe_reaches_everything_from_the_host(host: HostIpc, tmp_path: Path) -> None:
    """The control: run where the service runs, the probe reaches each thing it tries."""
    repo = tmp_path / "ipc"
    shutil.copytree(HOSTILE / "ipc", repo)
    targets = {**host.targets(), "victims": []}  # it would kill them
    (repo / "targets.json").write_text(json.dumps(targets))
    done = subprocess.run([SYSTEM_PYTHON or "python3", "probe.py"], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("IPC-RESULT "))
    found = json.loads(bytes.fromhex(line.split()[1]))
    reached = " ".join(found["reached"])
    for path in host.paths:
        if path.is_socket():
            assert f"socket {path}" in reached, reached
    for path in targets["sockets"]:  # the rest of the host: each live one, stale files not
        assert f"socket {path}" in reached or not _live(path), path
    assert f"socket @alignbot-test-{host.token}" in reached
    for what in ("fifo", "file", "sysv-shm", "shared-folder-not-empty"):
        assert what + " " in reached, reached
    if ADD_KEY is not None:
        assert "keyring " in reached
    if _has_vsock():
        assert "vsock-socket" in reached
    assert host.drain()


def _live(path: str) -> bool:
    """Whether the service itself can reach a socket file now: one another run left behind,
    or that went away during the walk, is no target."""
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_UNIX, kind) as sock, contextlib.suppress(OSError):
            sock.settimeout(2)
            sock.connect(path)
            return True
    return False


def _has_vsock() -> bool:
    try:
        socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    except (OSError, AttributeError):
        return False
    return True


def _sibling(stop: threading.Event, marker: str, tmp_path: Path) -> threading.Thread:
    """Another pull request's sandbox, sleeping while the probe runs."""
    repo = tmp_path / "sibling"
    shutil.copytree(HOSTILE / "setup_fails", repo)
    config = load_config("candidate:\n  preset: torch\n  setup: ['sleep " + marker + "']\n")

    def run() -> None:
        run_check(repo, config, [], LIMITS, Containment(), stop=stop)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _pid_of(marker: str) -> int:
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and marker.encode() in (entry / "cmdline").read_bytes():
                    return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"no process with {marker}")


MODES = {
    "bubblewrap-uid": ({}, None),
    "bubblewrap-userns": ({"mode": "userns"}, None),
    "no-namespaces": ({"namespaces": False}, "system-python"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_the_sandbox_reaches_no_host_ipc(host: HostIpc, tmp_path: Path, mode: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    changes, python = MODES[mode]
    problem = bwrap_problem()
    if mode.startswith("bubblewrap") and problem:
        pytest.skip(problem)
    if python and SYSTEM_PYTHON is None:
        pytest.skip("no system Python for a sandbox without namespaces")
    monkeypatch.setattr(sandbox.runner, "TAIL_CHARS", 1_000_000)
    stop = threading.Event()
    marker = f"600.{secrets.randbelow(10 ** 9):09d}"
    sibling = _sibling(stop, marker, tmp_path)
    try:
        targets = host.targets()
        targets["victims"] = [*host.victims, {"pid": _pid_of(marker), "marker": marker}]
        setup = None
        if python:  # the service's interpreter is out of the dedicated uid's reach here
            monkeypatch.setattr(sandbox._Workspace, "exposed", lambda self: [])
            setup = [f"{SYSTEM_PYTHON} probe.py", "exit 9"]
        result = run_hostile("ipc", tmp_path, targets, LIMITS, host.containment(**changes),
                             setup)
        for victim in targets["victims"]:
            assert Path(f"/proc/{victim['pid']}").exists(), "a host process was killed"
    finally:
        stop.set()
        sibling.join(timeout=30)
    found = printed(result, "IPC-RESULT")
    reached = [r for r in found["reached"]
               if not (mode == "no-namespaces" and r.startswith("host-proc "))]
    assert reached == [], reached
    assert host.drain() == []
    if mode.startswith("bubblewrap"):  # without namespaces Landlock lets it list nothing
        assert found["walked"] > 1000, found  # it saw the system: it would have seen more
    if mode.startswith("bubblewrap"):
        assert {"bubblewrap", "network-namespace", "ipc-namespace", "pid-namespace"} <= set(
            result.isolation), result.isolation
        assert len(found["proc_pids"]) < 20, found["proc_pids"]  # its own processes alone
    else:
        assert {"seccomp-no-unix-sockets", "seccomp-no-ipc", "landlock-files"} <= set(
            result.isolation), result.isolation
        assert "no-namespaces (namespaces turned off)" in result.isolation  # and why
    assert "fresh-keyring" in result.isolation
