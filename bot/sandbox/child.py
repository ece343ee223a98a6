"""The trampoline and the namespace's init: what runs between the service's fork+exec and
the command's exec, privileged (it may unshare, mount and change uids).

The service runs this file as a script (``runner._TRAMPOLINE``), never calls into it: it
needs only the standard library and imports nothing from this package, so it works however
the service was installed, and ``-I`` keeps the environment and the working folder out of
it. The service imports it only for ``_under`` and the constants.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import resource
import signal
import socket
import stat
import struct
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

# --------------------------------------------------------------------------- the trampoline
# Everything below runs in the trampoline process (this file as a script), never in the
# service: it may unshare, mount and change uids.

MIB = 1024 ** 2
TMPFS_BYTES = 64 * MIB  # each private /tmp, /var/tmp, /dev/shm (RAM, not counted by RLIMIT_AS)
REFUSED = 125  # the trampoline's exit status when it refused to run the command

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
