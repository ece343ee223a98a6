"""What the sandbox's file system is, built by bubblewrap from nothing: the system folders it
needs read-only (``/usr`` and its links, a few files of ``/etc``), the service's allowed paths
read-only, the work folder read-write, fresh ``/proc`` and ``/dev``, empty ``/tmp``, ``/var/tmp``,
``/dev/shm`` and ``/run``, and nothing else of the host. Hidden folders win over allowed ones
(an empty read-only tmpfs over them), and every socket file and FIFO inside an allowed tree is
covered by an empty file: a read-only mount does not stop ``connect()`` or a FIFO's writer.

``bwrap_argv`` is a pure function of what the service allows; ``probe`` asks once per process
whether bubblewrap can make these namespaces here (a container without ``CAP_SYS_ADMIN``
cannot), and says why not.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .child import MIB, TMPFS_BYTES, _under
from .paths import visible

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc holds other services' configuration: only what programs need to start, resolve names
# and check certificates comes in.
ETC = ("alternatives", "ca-certificates", "ca-certificates.conf", "debian_version",
       "gai.conf", "group", "host.conf", "hosts", "ld.so.cache", "ld.so.conf",
       "ld.so.conf.d", "ld.so.preload", "localtime", "lsb-release", "mime.types",
       "nsswitch.conf", "os-release", "passwd", "pki", "protocols", "resolv.conf", "services",
       "ssl", "timezone")
EXTRA = ("/sys/devices/system/cpu", "/sys/devices/system/node")  # thread pools size themselves
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
# /proc files about the whole machine, not the PID namespace: keys' descriptions of the
# service's user, every task on the host
PROC_MASKED = ("/proc/keys", "/proc/key-users", "/proc/sched_debug", "/proc/timer_list")
HIDDEN_TMPFS_BYTES = MIB
SCAN_SECONDS = 300.0  # after this, a tree is scanned again for sockets and FIFOs


def system_paths() -> list[str]:
    """The host's system folders and /etc files the sandbox sees, where they exist."""
    found = [p for p in SYSTEM if os.path.lexists(p)]
    found += [f"/etc/{name}" for name in ETC if os.path.lexists(f"/etc/{name}")]
    found += sorted(f"/etc/{name}" for name in _listdir("/etc") if name.startswith("python3"))
    return found + [p for p in EXTRA if os.path.isdir(p)]


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


@dataclass(frozen=True)
class View:
    """The bubblewrap arguments (everything before ``--``) and the layers they make."""

    argv: list[str]
    layers: list[str]


def bwrap_argv(bwrap: str, *, root: bool, network: bool, expose: Sequence[str],
               hide: Sequence[str], workspace: str, empty: str = "/dev/null",
               masks: Iterable[str] = (), inside_uid: int = 1000) -> View:
    """The sandbox's namespaces and file system: ``expose`` read-only, ``workspace``
    read-write, ``hide`` (files and folders) covered inside what is exposed, ``masks`` (socket
    files and FIFOs) covered by ``empty`` (an empty file: bubblewrap's mounts are ``nodev``,
    so /dev/null could not even be read). Deeper paths are mounted later, and at one path a
    hide comes after an expose: the same rule as ``paths.visible``."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "alignbot-sandbox",
            "--proc", "/proc", "--dev", "/dev"]
    layers = ["bubblewrap"]
    if not network:
        args.append("--unshare-net")
    if root:  # privileged: the worker keeps only what it needs to drop to the sandbox's uid
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns", "--uid", str(inside_uid), "--gid",
                 str(inside_uid), "--cap-drop", "ALL"]
    system = system_paths()
    trees = [*system, *expose]
    ops: list[tuple[str, int, list[str]]] = []  # (path, order at the same depth, arguments)
    for path in system:
        if os.path.islink(path) and path in SYSTEM:
            ops.append((path, 0, ["--symlink", os.readlink(path), path]))
        else:
            ops.append((path, 0, ["--ro-bind", path, path]))
    for path in SCRATCH:
        ops.append((path, 0, ["--perms", "1777", "--size", str(TMPFS_BYTES), "--tmpfs", path]))
    for path in expose:
        ops.append((path, 0, ["--ro-bind", path, path]))
    ops.append((workspace, 0, ["--bind", workspace, workspace]))
    shown_hidden: list[str] = []
    late: list[str] = []  # remounted read-only once everything inside them is mounted
    for path in hide:
        if path in SCRATCH or not any(_under(path, t) for t in trees) or \
                not os.path.lexists(path):
            continue  # not in the view at all: nothing to cover
        if os.path.isdir(path) and not os.path.islink(path):
            ops.append((path, 1, ["--perms", "0755", "--size", str(HIDDEN_TMPFS_BYTES),
                                  "--tmpfs", path]))
            late += ["--remount-ro", path]
        else:
            ops.append((path, 1, ["--ro-bind", empty, path]))
        shown_hidden.append(path)
    kept = [*trees, workspace]
    covered = 0
    for path in masks:
        if any(_under(path, k) for k in kept) and visible(path, kept, hide):
            ops.append((path, 2, ["--ro-bind", empty, path]))
            covered += 1
    ops += _folders_on_the_way(ops, binds=[*trees, workspace])
    for _, _, part in sorted(ops, key=lambda op: (op[0].count("/"), op[1], op[0])):
        args += part
    for path in PROC_MASKED:
        if os.path.exists(path):
            args += ["--ro-bind", empty, path]
    args += ["--dir", "/run", "--symlink", "../run", "/var/run", *late, "--remount-ro", "/"]
    layers += ["system-view", "private-tmp", "empty-run"]
    if shown_hidden:  # how many, not which: the check run is public
        layers.append(f"hidden-service-paths:{len(shown_hidden)}")
    if covered:
        layers.append(f"masked-special-files:{covered}")
    return View(args, layers)


def _folders_on_the_way(ops: list[tuple[str, int, list[str]]], binds: Sequence[str]
                        ) -> list[tuple[str, int, list[str]]]:
    """Folders bubblewrap must make on the way to a mount point (it makes them 0700 itself,
    out of the sandbox user's reach): 0755, unless they lie in a tree bound from the host,
    where they are the host's."""
    targets = {path for path, _, _ in ops} | {"/proc", "/dev"}
    made: list[tuple[str, int, list[str]]] = []
    seen: set[str] = set()
    for path in targets:
        parent = os.path.dirname(path)
        while parent != "/" and parent not in seen:
            seen.add(parent)
            if parent not in targets and not any(_under(parent, b) and parent != b
                                                 for b in binds):
                made.append((parent, -1, ["--perms", "0755", "--dir", parent]))
            parent = os.path.dirname(parent)
    return made


# --------------------------------------------------------------------------- special files

_scans: dict[str, tuple[float, list[str]]] = {}
_rescanning: set[str] = set()
_scan_lock = threading.Lock()


def special_files(trees: Iterable[str], now: float | None = None) -> list[str]:
    """Every socket file and FIFO under ``trees`` (links not followed). A tree is scanned
    the first time it is asked for; after ``SCAN_SECONDS`` its last scan is still used while a
    thread scans it again, so that only a service's first sandbox waits for a scan."""
    now = time.monotonic() if now is None else now
    found: list[str] = []
    for tree in dict.fromkeys(trees):
        with _scan_lock:
            cached = _scans.get(tree)
            stale = cached is not None and now - cached[0] > SCAN_SECONDS and \
                tree not in _rescanning
            if stale:
                _rescanning.add(tree)
        if cached is None:
            cached = (now, _scan(tree))
            with _scan_lock:
                _scans[tree] = cached
        elif stale:
            threading.Thread(target=_rescan, args=(tree,), daemon=True,
                             name="alignbot-sandbox-scan").start()
        found += cached[1]
    return sorted(set(found))


def _rescan(tree: str) -> None:
    result = _scan(tree)
    with _scan_lock:
        _scans[tree] = (time.monotonic(), result)
        _rescanning.discard(tree)


def _scan(tree: str) -> list[str]:
    return [path for path, _ in scan(tree)]


def scan(tree: str, skip: Sequence[str] = ()) -> list[tuple[str, int]]:
    """Each socket file and FIFO under ``tree`` with its mode, links not followed, folders in
    ``skip`` left out."""
    try:
        info = os.lstat(tree)
    except OSError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        special = stat.S_ISSOCK(info.st_mode) or stat.S_ISFIFO(info.st_mode)
        return [(tree, info.st_mode)] if special else []
    found: list[tuple[str, int]] = []
    stack = [tree]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and entry.path not in skip:
                stack.append(entry.path)
            elif stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                found.append((entry.path, mode))
    return found


# --------------------------------------------------------------------------- the probe

_probes: dict[tuple[str, bool], str | None] = {}


def find_bwrap(name: str | None) -> str | None:
    """The bubblewrap executable named by the setting (a name on PATH or a path), or None."""
    if not name:
        return None
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/bin:/bin")


def probe(bwrap: str, root: bool) -> str | None:
    """None when ``bwrap`` can make the sandbox's namespaces here; else its one-line error."""
    key = (bwrap, root)
    if key not in _probes:
        try:
            with tempfile.TemporaryDirectory(prefix="alignbot-probe-") as folder:
                view = bwrap_argv(bwrap, root=root, network=False, expose=[], hide=[],
                                  workspace=folder)
                done = subprocess.run([*view.argv, "--", "/bin/true"], capture_output=True,
                                      timeout=30, stdin=subprocess.DEVNULL)
            lines = done.stderr.decode(errors="replace").strip().splitlines()
            _probes[key] = None if done.returncode == 0 else \
                (lines[-1] if lines else f"exit status {done.returncode}")
        except (OSError, subprocess.SubprocessError) as exc:
            _probes[key] = str(exc)
    return _probes[key]
