"""The kernel filters the sandbox's worker applies last (``bot/sandbox/confine.py``), each tried
in a forked process that applies them as the worker does: what they deny, and that what a
candidate needs (threads, subprocesses, pipes, socket pairs, its own abstract sockets and
signals) still works."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from alignbot.bot.sandbox import confine

pytestmark = pytest.mark.skipif(confine.seccomp_program(confine.SyscallPolicy()) is None,
                                reason=f"no syscall table for {platform.machine()}")
LIBC = ctypes.CDLL(None, use_errno=True)
NR = confine._ARCHES[platform.machine()].numbers if platform.machine() in confine._ARCHES \
    else {}


def _confined(policy: confine.SyscallPolicy, attempt: Callable[[], object],
              files: confine.FilePolicy | None = None) -> str:
    """``attempt()`` in a child that set no_new_privs, Landlock and ``policy`` first: its
    result, or the name of the error it raised."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            LIBC.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
            confine.landlock(files, None)
            confine.seccomp(policy)
            outcome = repr(attempt())
        except OSError as exc:
            outcome = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        except BaseException as exc:  # reported to the parent
            outcome = type(exc).__name__
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        outcome = handle.read().decode()
    os.waitpid(pid, 0)
    return outcome


def _syscall(name: str, *args: object) -> int:
    result = LIBC.syscall(NR[name], *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


DEFAULT = confine.SyscallPolicy()


@pytest.mark.parametrize(("name", "args"), [
    ("keyctl", (0, -3, 0)),  # KEYCTL_GET_KEYRING_ID of the session keyring
    ("add_key", (b"user", b"x", b"y", 1, -3)),
    ("unshare", (0x10000000,)),  # CLONE_NEWUSER
    ("setns", (0, 0)),
    ("mount", (b"none", b"/tmp", b"tmpfs", 0, None)),
    ("ptrace", (16, 1, 0, 0)),  # PTRACE_ATTACH to init
    ("io_uring_setup", (1, None)),
    ("bpf", (0, None, 0)),
    ("perf_event_open", (None, 0, -1, -1, 0)),
    ("userfaultfd", (0,)),
])
def test_syscalls_that_reach_the_hosts_kernel_state_are_denied(name: str, args: tuple[object, ...]
                                                               ) -> None:
    assert _confined(DEFAULT, lambda: _syscall(name, *args)) == "EPERM"


def test_clone_into_new_namespaces_is_denied_but_threads_and_processes_work() -> None:
    def clone_user_namespace() -> int:
        return _syscall("clone", 0x10000000 | signal.SIGCHLD, 0, 0, 0, 0)

    assert _confined(DEFAULT, clone_user_namespace) == "EPERM"
    assert _confined(DEFAULT, lambda: _syscall("clone3", None, 0)) == "ENOSYS"  # libc falls back

    def everyday() -> str:
        results: list[int] = []
        thread = threading.Thread(target=lambda: results.append(1))
        thread.start()
        thread.join()
        done = subprocess.run(["sh", "-c", "echo $((6 * 7))"], capture_output=True, text=True)
        a, b = socket.socketpair()
        a.send(b"x")
        return f"{results} {done.stdout.strip()} {b.recv(1)!r} {os.pipe() != ()}"

    assert _confined(DEFAULT, everyday) == repr("[1] 42 b'x' True")


def test_sockets_that_pass_by_a_network_namespace_are_denied() -> None:
    """vsock reaches the hypervisor's host from inside any network namespace (made, never
    connected, here)."""
    assert _confined(DEFAULT, lambda: socket.socket(confine.AF_VSOCK, socket.SOCK_STREAM)) \
        == "EACCES"
    assert _confined(DEFAULT, lambda: socket.socket(socket.AF_INET).fileno() > 0) == "True"
    assert _confined(DEFAULT, lambda: socket.socket(socket.AF_UNIX).fileno() > 0) == "True"


def test_without_namespaces_no_socket_and_no_system_v_ipc() -> None:
    closed = confine.SyscallPolicy(ipc=True, socket_families=frozenset())
    assert _confined(closed, lambda: socket.socket(socket.AF_UNIX)) == "EACCES"
    assert _confined(closed, lambda: socket.socket(socket.AF_INET)) == "EACCES"
    assert _confined(closed, lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)) == \
        "EACCES"
    assert _confined(closed, lambda: len(socket.socketpair())) == "2"  # reaches nothing
    assert _confined(closed, lambda: _syscall("shmget", 0x414c4947, 4096, 0o1666)) == "EPERM"
    network = confine.SyscallPolicy(ipc=True, socket_families=frozenset(
        {confine.AF_INET, confine.AF_INET6}))
    assert _confined(network, lambda: socket.socket(socket.AF_INET).fileno() > 0) == "True"
    assert _confined(network, lambda: socket.socket(socket.AF_UNIX)) == "EACCES"


needs_scopes = pytest.mark.skipif(confine.landlock_abi() < 6,
                                  reason="Landlock ABI 6 (Linux 6.12) scopes sockets and signals")


@needs_scopes
def test_landlock_scopes_abstract_sockets_and_signals_to_the_sandbox() -> None:
    name = f"\0alignbot-confine-{os.getpid()}"
    host = socket.socket(socket.AF_UNIX)
    host.bind(name)
    host.listen()
    outside = subprocess.Popen(["sleep", "60"])
    try:
        assert _confined(DEFAULT, lambda: socket.socket(socket.AF_UNIX).connect(name)) == \
            "EPERM"
        assert _confined(DEFAULT, lambda: os.kill(outside.pid, signal.SIGTERM)) == "EPERM"
        assert outside.poll() is None

        def inside() -> str:  # what the sandbox makes itself it may use
            own = socket.socket(socket.AF_UNIX)
            own.bind(name + "-own")
            own.listen()
            socket.socket(socket.AF_UNIX).connect(name + "-own")
            child = subprocess.Popen(["sleep", "60"])
            child.send_signal(signal.SIGTERM)
            return str(child.wait())

        assert _confined(DEFAULT, inside) == repr(str(-signal.SIGTERM))
    finally:
        outside.kill()
        outside.wait()
        host.close()


def test_landlock_file_policy_keeps_a_sandbox_without_namespaces_to_its_trees(
        tmp_path: Path) -> None:
    if confine.landlock_abi() < 1:
        pytest.skip("no Landlock")
    work, shared = tmp_path / "work", tmp_path / "shared"
    work.mkdir()
    shared.mkdir()
    (shared / "canary").write_text("host")
    os.mkfifo(shared / "fifo")
    files = confine.FilePolicy(read=["/usr", "/etc", "/proc"], write=[str(work)],
                               devices=["/dev/null"])

    def attempt() -> str:
        (work / "mine").write_text("ok")
        with open("/dev/null", "w") as null:
            null.write("x")
        results = [(work / "mine").read_text(), str(len(os.listdir("/usr")) > 0)]
        for what in (lambda: (shared / "canary").read_text(),
                     lambda: os.open(shared / "fifo", os.O_WRONLY | os.O_NONBLOCK),
                     lambda: os.listdir("/tmp")):
            try:
                results.append(repr(what()))
            except OSError as exc:
                results.append(errno.errorcode[exc.errno or 0])
        return " ".join(results)

    assert _confined(DEFAULT, attempt, files) == repr("ok True EACCES EACCES EACCES")
