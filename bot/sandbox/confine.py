"""The kernel filters the worker applies last, after it dropped its uid and just before it runs
the command: Landlock (scopes, the file-system allow-list where there is no mount namespace,
pathname Unix sockets where the kernel can) and a seccomp filter (syscalls that reach the host's
kernel state: keyrings, namespaces, mounts, ptrace, io_uring; sockets and System V IPC where the
namespaces that would close them are missing).

Standard library only, like ``child.py``, which loads this file by path when it runs as a
script. Each filter returns the layers it applied; a kernel without it applies none, and the
check run's list says so by what is missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass

# --------------------------------------------------------------------------- Landlock

_LANDLOCK_CREATE, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT = 444, 445, 446  # every architecture
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2  # ABI 6
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_RESOLVE_UNIX = 1 << 16  # ABI 9 (Linux 7.1): connect() to a pathname socket
RESOLVE_UNIX_ABI = 9
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_FS_TRUNCATE = 1 << 14  # ABI 3
READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
_FS_FILE = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | _FS_TRUNCATE | (1 << 15) | FS_RESOLVE_UNIX


@dataclass(frozen=True)
class FilePolicy:
    """Where the sandboxed process may go at all, for a sandbox without a mount namespace:
    ``read`` trees (read and execute), ``write`` trees (everything), ``devices`` (read and
    write the file itself: ``/dev/null``...)."""

    read: Sequence[str] = ()
    write: Sequence[str] = ()
    devices: Sequence[str] = ()


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    try:
        return _syscall(_LANDLOCK_CREATE, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def landlock(files: FilePolicy | None, unix_sockets: Sequence[str] | None) -> list[str]:
    """Restrict this process and what it starts: no abstract Unix socket and no signal outside
    the sandbox (ABI 6), no pathname Unix socket outside the ``unix_sockets`` trees (ABI 9),
    and, with ``files``, no file outside the policy's trees. Needs ``no_new_privs`` first."""
    abi = landlock_abi()
    if abi < 1:
        return []
    handled, layers = 0, []
    rules: list[tuple[str, int]] = []
    if files is not None:
        handled |= _FS_BY_ABI[max(k for k in _FS_BY_ABI if k <= abi)]
        devices = FS_READ_FILE | FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        rules += [(p, READ) for p in files.read] + [(p, handled) for p in files.write] + \
                 [(p, devices) for p in files.devices]
        layers.append("landlock-files")
    if unix_sockets is not None and abi >= RESOLVE_UNIX_ABI:
        handled |= FS_RESOLVE_UNIX
        rules += [(p, FS_RESOLVE_UNIX) for p in unix_sockets]  # rights on one object add up
        layers.append("landlock-unix-sockets")
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    if scoped:
        layers.append("landlock-scopes")
    if not handled and not scoped:
        return []
    attr = struct.pack("QQQ", handled, 0, scoped) if abi >= 6 else struct.pack("QQ", handled, 0)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _syscall(_LANDLOCK_CREATE, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        for path, access in rules:
            _add_rule(ruleset, path, access & handled)
        _syscall(_LANDLOCK_RESTRICT, ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return layers


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a tree that is not there needs no rule
    try:
        if not os.path.isdir(path):  # a file takes only the rights that apply to files
            access &= _FS_FILE
        if access:
            attr = struct.pack("=Qi", access, fd)  # landlock_path_beneath_attr is packed
            buffer = ctypes.create_string_buffer(attr, len(attr))
            _syscall(_LANDLOCK_ADD_RULE, ruleset, ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                     buffer, ctypes.c_uint32(0))
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- seccomp

@dataclass(frozen=True)
class _Arch:
    audit: int
    numbers: dict[str, int]
    x32: bool = False


# What no candidate needs and what reaches past the sandbox: keyrings (the service's session
# keyring), namespaces and mounts (the kernel's largest attack surface), tracing, io_uring (its
# operations pass by every other filter), kernel modules, BPF, the kernel log.
DENIED = ("keyctl", "add_key", "request_key", "unshare", "setns", "mount", "umount2",
          "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
          "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev", "bpf",
          "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
          "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
          "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
          "open_by_handle_at", "name_to_handle_at", "lookup_dcookie")
# System V IPC and POSIX message queues: the host's, where there is no IPC namespace.
IPC = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
       "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
       "mq_timedreceive", "mq_notify", "mq_getsetattr")

_X86_64 = dict(zip(
    (*DENIED, *IPC, "clone", "clone3", "socket"),
    (250, 248, 249, 272, 308, 165, 166, 155, 161, 428, 429, 430, 431, 432, 433, 442, 101, 310,
     311, 321, 298, 323, 425, 426, 427, 246, 320, 175, 313, 176, 169, 167, 168, 163, 179, 103,
     304, 303, 212,
     29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71, 240, 241, 242, 243, 244, 245,
     56, 435, 41), strict=True))
_AARCH64 = dict(zip(
    (*DENIED, *IPC, "clone", "clone3", "socket"),
    (219, 217, 218, 97, 268, 40, 39, 41, 51, 428, 429, 430, 431, 432, 433, 442, 117, 270,
     271, 280, 241, 282, 425, 426, 427, 104, 294, 105, 273, 106, 142, 224, 225, 89, 60, 116,
     265, 264, 18,
     194, 196, 195, 197, 190, 193, 191, 192, 186, 189, 188, 187, 180, 181, 182, 183, 184, 185,
     220, 435, 198), strict=True))
_ARCHES = {"x86_64": _Arch(0xC000003E, _X86_64, x32=True),
           "aarch64": _Arch(0xC00000B7, _AARCH64)}

# clone() flags that make a namespace (CLONE_NEWTIME is clone3/unshare only)
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | \
    0x20000000 | 0x40000000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low word, little-endian)
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
# Socket families that reach past a network namespace: vsock talks to the hypervisor's host
# (a VM's agents), Bluetooth to the machine's radios.
AF_BLUETOOTH, AF_VSOCK = 31, 40
UNNAMESPACED_FAMILIES = (AF_BLUETOOTH, AF_VSOCK)


@dataclass(frozen=True)
class SyscallPolicy:
    """``ipc``: deny System V IPC and message queues (no IPC namespace); ``socket_families``:
    the only families ``socket()`` may make (None: any but ``UNNAMESPACED_FAMILIES``; a
    network and a mount namespace close what the others could reach). ``socketpair`` stays
    allowed: it reaches nothing."""

    ipc: bool = False
    socket_families: frozenset[int] | None = None


def seccomp_program(policy: SyscallPolicy, machine: str | None = None) -> bytes | None:
    """The classic-BPF filter for ``policy`` on this machine's architecture, or None where the
    syscall numbers are not known here."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    nr = arch.numbers
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH), (_JEQ, 1, 0, arch.audit), (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        (_LD_W_ABS, 0, 0, _NR)]
    if arch.x32:  # the x32 ABI's numbers would pass by every check below
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    for name in (*DENIED, *(IPC if policy.ipc else ())):
        prog += [(_JEQ, 0, 1, nr[name]), (_RET, 0, 0, _ERRNO | errno.EPERM)]
    # clone3 takes its flags in memory a filter cannot read: ENOSYS, and libc falls back to clone
    prog += [(_JEQ, 0, 1, nr["clone3"]), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    prog += [(_JEQ, 0, 4, nr["clone"]), (_LD_W_ABS, 0, 0, _ARG0),
             (_JSET, 0, 1, _CLONE_NAMESPACES), (_RET, 0, 0, _ERRNO | errno.EPERM),
             (_RET, 0, 0, _ALLOW)]
    if policy.socket_families is not None:  # only these
        families = sorted(policy.socket_families)
        prog += [(_JEQ, 0, 2 + 2 * len(families), nr["socket"]), (_LD_W_ABS, 0, 0, _ARG0)]
        for family in families:
            prog += [(_JEQ, 0, 1, family), (_RET, 0, 0, _ALLOW)]
        prog += [(_RET, 0, 0, _ERRNO | errno.EACCES)]
    else:  # any but those no network namespace closes
        prog += [(_JEQ, 0, 1 + 2 * len(UNNAMESPACED_FAMILIES), nr["socket"]),
                 (_LD_W_ABS, 0, 0, _ARG0)]
        for family in UNNAMESPACED_FAMILIES:
            prog += [(_JEQ, 0, 1, family), (_RET, 0, 0, _ERRNO | errno.EACCES)]
    prog += [(_RET, 0, 0, _ALLOW)]
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def seccomp(policy: SyscallPolicy) -> list[str]:
    """Load the filter for ``policy`` (needs ``no_new_privs``); the layers it applied."""
    program = seccomp_program(policy)
    if program is None:
        return []
    filters = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(filters))
    fprog_buffer = ctypes.create_string_buffer(fprog, len(fprog))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), fprog_buffer, 0, 0):
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
    layers = ["seccomp"]
    if policy.ipc:
        layers.append("seccomp-no-ipc")
    if policy.socket_families is not None:
        layers.append("seccomp-no-unix-sockets" if AF_UNIX not in policy.socket_families
                      else "seccomp-sockets")
        if not policy.socket_families & {AF_INET, AF_INET6}:
            layers.append("seccomp-no-network")
    return layers
