"""Who runs the pull request's code and within what: the limits, the containment the
service asks for, and the plan chosen from it (the mode, the uid, whether it is dedicated,
whether bubblewrap makes its namespaces)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from . import view
from .child import MIB
from .containment import Containment as Containment
from .containment import Mode as Mode

GIB = 1024 ** 3
UID_BASE, UID_COUNT = 1_900_000_000, 1_000_000  # dedicated uids: no files, no processes



@dataclass(frozen=True)
class SandboxLimits:
    """What one sandbox may use. In a cgroup, for all its processes together: ``memory_bytes``
    (the files it writes in its tmpfs folders count too: they are RAM), ``processes``
    (threads count) and ``cpus`` (cores' worth of CPU time per second); per process, as
    rlimits: ``cpu_seconds``, ``memory_bytes`` of address space, ``file_size``, and
    ``processes`` per uid. ``disk_bytes``: the work folder's size (a tmpfs; 0: no quota).
    One wall-clock limit for setup and the engine together."""

    cpu_seconds: int = 600
    memory_bytes: int = 4 * GIB
    processes: int = 256
    file_size: int = 1 * GIB
    wall_seconds: float = 900
    network: bool = False
    cpus: float = 4.0
    disk_bytes: int = 2 * GIB



def _size(n: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"



@dataclass(frozen=True)
class _Plan:
    mode: Mode
    uid: int
    gid: int
    dedicated: bool  # a uid of its own: safe to kill(-1) as it afterwards
    bwrap: str | None = None  # the bubblewrap that makes the namespaces
    no_bwrap: str = ""  # else why there are none


def _plan(containment: Containment) -> _Plan | str:
    """The uid and mode, or why the sandbox refuses to run."""
    mode = containment.mode
    root = os.geteuid() == 0
    if mode == "auto":
        mode = "uid" if root else "userns"
    if mode == "uid":
        if not root:
            return "dropping to another uid needs the service to run as root"
        uid = containment.uid if containment.uid is not None else \
            UID_BASE + secrets.randbelow(UID_COUNT)
        if uid == 0:
            return "the sandbox uid cannot be 0"
        return _Plan("uid", uid, uid, containment.uid is None, *_bwrap(containment, True))
    if mode == "none" and not containment.allow_unisolated:
        return ("no isolation was asked for (mode `none`) and unisolated runs are not "
                "allowed: the pull request's code could read the service's files")
    found = _bwrap(containment, False) if mode == "userns" else (None, "mode `none`")
    return _Plan(mode, os.getuid(), os.getgid(), False, *found)


def _bwrap(containment: Containment, root: bool) -> tuple[str | None, str]:
    """The bubblewrap to use, or None and why not (turned off, not installed, or it cannot
    make namespaces here)."""
    if not containment.namespaces:
        return None, "namespaces turned off"
    if not containment.bwrap:
        return None, "bubblewrap turned off"
    found = view.find_bwrap(containment.bwrap)
    if found is None:
        return None, (f"bubblewrap (`{containment.bwrap}`) is not installed: the Debian "
                      "package `bubblewrap`")
    problem = view.probe(found, root)
    if problem is not None:
        return None, f"bubblewrap cannot make namespaces here: {problem}"
    return found, ""
