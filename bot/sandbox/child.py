"""The trampoline and the worker: what runs between the service's fork+exec and the command's
exec, privileged (it may join cgroups, drop its uid, confine itself).

The service runs this file as a script (``trampoline._TRAMPOLINE``), never calls into it: it
needs only the standard library (and ``confine.py`` beside it, loaded by path) and imports
nothing else of this package, so it works however the service was installed, and ``-I`` keeps
the environment and the working folder out of it. The service imports it only for ``_under``
and the constants.

The trampoline joins the sandbox's cgroups and a fresh session keyring, then either execs
bubblewrap, which makes the namespaces and the file system and runs this file again as the
worker (``--worker FD``, the spec in a memfd), or, without namespaces, forks the worker itself.
The worker drops to the dedicated uid, sets ``no_new_privs`` and rlimits, applies Landlock and
seccomp (``confine``), reports the layers it finds on a pipe only the service reads, and execs
the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import resource
import signal
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

MIB = 1024 ** 2
TMPFS_BYTES = 64 * MIB  # each private /tmp, /var/tmp, /dev/shm (RAM: the cgroup counts it)
REFUSED = 125  # the trampoline's exit status when it refused to run the command

PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_JOIN_SESSION_KEYRING = 1
NAMESPACES = (("mnt", "mount-namespace"), ("pid", "pid-namespace"), ("net", "network-namespace"),
              ("ipc", "ipc-namespace"), ("uts", "uts-namespace"), ("cgroup", "cgroup-namespace"),
              ("user", "user-namespace"))


class _Refused(Exception):
    """The trampoline will not run the command; the message says why, in one line."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc().prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl: {os.strerror(err)}")


def _confine() -> ModuleType:
    """``confine.py``: the package's module in the service, loaded by path in the script."""
    if __package__:
        from . import confine
        return confine
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "confine.py")
    spec = importlib.util.spec_from_file_location("alignbot_sandbox_confine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def host_namespaces() -> dict[str, int]:
    """This process's namespaces (inode numbers): the worker compares its own with them."""
    found = {}
    for name, _ in NAMESPACES:
        with contextlib.suppress(OSError):
            found[name] = os.stat(f"/proc/self/ns/{name}").st_ino
    return found


# --------------------------------------------------------------------------- the trampoline

def _main(argv: Sequence[str]) -> NoReturn:
    if len(argv) == 2 and argv[0] == "--sweep":
        _sweep_as(int(argv[1]))
    if len(argv) == 2 and argv[0] == "--worker":
        _worker_main(int(argv[1]))
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
        for procs in spec["cgroups"]:  # before anything else: every child is born inside
            Path(procs).write_text(str(os.getpid()))
        layers = ["fresh-keyring"] if _fresh_keyring() else []
        if spec["bwrap"]:
            spec["layers"] = layers
            _exec_bwrap(spec)
        layers += _unisolated_checks(spec)
    except Exception as exc:
        why = str(exc) if isinstance(exc, _Refused) else f"the sandbox could not be set up: {exc}"
        _report(status_fd, {"refused": why})
        os._exit(REFUSED)
    child = os.fork()
    if child == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _exec_worker(spec, layers)
    os.close(status_fd)
    _, status = os.waitpid(child, 0)
    os._exit(_status_code(status))


def _fresh_keyring() -> bool:
    """Leave the service's session keyring for a new, empty one (its keys are possessed, so
    readable, by everything that shares it)."""
    number = _KEYCTL.get(os.uname().machine)
    if number is None:
        return False
    return _libc().syscall(number, _KEYCTL_JOIN_SESSION_KEYRING, None) >= 0


def _exec_bwrap(spec: dict[str, Any]) -> NoReturn:
    """Exec bubblewrap, which runs the worker inside; the spec travels in a memfd."""
    fd = os.memfd_create("alignbot-sandbox-spec", 0)  # inherited: not close-on-exec
    os.write(fd, json.dumps(spec).encode())
    os.lseek(fd, 0, os.SEEK_SET)
    argv = [*spec["bwrap"], "--", *spec["worker"], "--worker", str(fd)]
    os.execv(argv[0], argv)


def _die(sweep_uid: int | None) -> NoReturn:
    """The service is gone: kill what runs as the dedicated uid (without a PID namespace
    nothing else would), then leave; the worker follows by its own parent-death signal."""
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


def _unisolated_checks(spec: dict[str, Any]) -> list[str]:
    """Without namespaces nothing is hidden: refuse when a hidden folder is readable by the
    sandbox's uid, or an exposed one is out of its reach."""
    if spec["mode"] == "userns" and not spec["allow_unisolated"]:
        raise _Refused("not root and bubblewrap cannot make a user namespace here "
                       f"({spec['no_bwrap']}): the pull request's code would run as the "
                       "service's user")
    uid, gid = _ids(spec)
    if spec["mode"] == "uid":
        for path in spec["hide"]:
            if path not in spec["tmp"] and _readable(path, uid, gid):
                raise _Refused(f"without a mount namespace {path} cannot be hidden and "
                               f"the sandbox user (uid {uid}) could read it; make it "
                               "unreadable to other users or allow mount namespaces")
    for path in spec["expose"]:
        blocked = _blocked(path, uid, gid)
        if blocked:
            raise _Refused(f"the sandbox user (uid {spec['uid']}) cannot reach {path}: "
                           f"{blocked}; install it where every user can read it, or run "
                           "where mount namespaces are allowed")
    return [f"no-namespaces ({spec['no_bwrap']})"]


def _ids(spec: dict[str, Any]) -> tuple[int, int]:
    """The uid and gid the command will run as."""
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


# --------------------------------------------------------------------------- the worker

def _worker_main(fd: int) -> NoReturn:
    """Inside bubblewrap: read the spec, check what the namespaces are, run the command."""
    with os.fdopen(fd, "rb") as handle:
        spec = json.loads(handle.read())
    status_fd = int(spec["status_fd"])
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        layers = [*spec["layers"], *_observed(spec)]
    except Exception as exc:
        _report(status_fd, {"refused": f"the sandbox could not be set up: {exc}"})
        os._exit(REFUSED)
    _exec_worker(spec, layers)


def _observed(spec: dict[str, Any]) -> list[str]:
    """The namespaces this process is in, compared with the service's, and the file system
    as bubblewrap left it; bubblewrap's own layers (what the view holds) follow."""
    host = spec["host_ns"]
    layers = [layer for name, layer in NAMESPACES
              if name in host and os.stat(f"/proc/self/ns/{name}").st_ino != host[name]]
    if "mount-namespace" not in layers or "pid-namespace" not in layers:
        raise _Refused("bubblewrap did not make the mount and PID namespaces")
    if os.readlink("/proc/self") == str(os.getpid()):
        layers.append("fresh-proc")
    if os.statvfs("/").f_flag & os.ST_RDONLY:
        layers.append("read-only-filesystem")
    return [*layers, *spec["view_layers"]]


def _exec_worker(spec: dict[str, Any], layers: list[str]) -> NoReturn:
    # Nothing may be imported from here on: after the uid changes, the interpreter's own
    # files may be out of reach (they are when there is no mount namespace to expose them).
    status_fd = int(spec["status_fd"])
    try:
        confine = _confine()
        if spec["mode"] == "uid":
            uid, gid = int(spec["uid"]), int(spec["gid"])
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            if os.getresuid() != (uid, uid, uid) or os.getgroups():
                raise OSError("the uid did not change")
            layers.append(f"uid:{uid}")
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        layers.append("no-new-privileges")
        _set_rlimits(spec["rlimits"])
        policy = spec["confine"]
        files = confine.FilePolicy(**policy["files"]) if policy["files"] else None
        layers += confine.landlock(files, policy["unix_sockets"])
        families = policy["socket_families"]
        layers += confine.seccomp(confine.SyscallPolicy(
            ipc=policy["ipc"], socket_families=None if families is None else frozenset(families)))
    except Exception as exc:
        why = str(exc) if isinstance(exc, _Refused) else f"the sandbox could not be set up: {exc}"
        _report(status_fd, {"refused": why})
        os._exit(REFUSED)
    _report(status_fd, {"layers": layers})
    try:
        os.umask(0o077)
        os.chdir(spec["cwd"])
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as exc:  # report and leave; never fall back into the trampoline
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


if __name__ == "__main__":
    _main(sys.argv[1:])
