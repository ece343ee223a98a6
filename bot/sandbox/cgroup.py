"""One control group per sandbox, made under the service's own: memory for all its processes
together, their number and their CPU time, each from cgroup v2 where that controller is there
and from a v1 hierarchy where it is not (a hybrid host), and a reliable kill of everything in it.

``Cgroup.create`` makes the groups and writes the limits (the service, before the trampoline
runs); the trampoline writes its own pid into each ``cgroup.procs`` before anything untrusted
runs, so every process of the sandbox is born inside. What could not be made is said in
``missing``, one reason per limit, for the check run. The group's name carries the service's
pid and start time, so a restarted service removes what a dead one left (``remove_stale``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONTROLLERS = ("memory", "pids", "cpu")
SERVICE_LEAF = "alignbot-service"  # where the service's own processes move on cgroup v2
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class Hierarchy:
    """One mounted hierarchy: ``version`` 1 or 2, the folder of this process's cgroup in it,
    and the controllers a child made there can use."""

    version: int
    here: Path
    controllers: frozenset[str]


def hierarchies(mountinfo: str | None = None, membership: str | None = None
                ) -> list[Hierarchy]:
    """The hierarchies mounted here, from ``/proc/self/mountinfo`` and ``/proc/self/cgroup``."""
    try:
        mountinfo = mountinfo if mountinfo is not None else \
            Path("/proc/self/mountinfo").read_text()
        membership = membership if membership is not None else \
            Path("/proc/self/cgroup").read_text()
    except OSError:
        return []
    paths: dict[str, str] = {}
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    found: list[Hierarchy] = []
    seen: set[tuple[int, str]] = set()
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if tail[0] == "cgroup2":
            key, version = "", 2
        else:
            options = set(tail[2].split(","))
            key = next((k for k in paths if k and set(k.split(",")) <= options and
                        set(k.split(",")) & set(CONTROLLERS)), "")
            version = 1
        if (version == 1 and not key) or key not in paths or (version, key) in seen:
            continue
        inside = os.path.relpath(paths[key], root) if _under(paths[key], root) else None
        if inside is None:
            continue
        here = Path(point) / ("" if inside == "." else inside)
        if version == 2 and here.name == SERVICE_LEAF:
            here = here.parent  # the service moved itself there; its groups are siblings
        controllers = _v2_controllers(here) if version == 2 else \
            frozenset(key.split(",")) & frozenset(CONTROLLERS)
        seen.add((version, key))
        found.append(Hierarchy(version, here, controllers))
    return found


def _unescape(text: str) -> str:
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text


def _under(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def _v2_controllers(here: Path) -> frozenset[str]:
    try:
        return frozenset((here / "cgroup.controllers").read_text().split()) & \
            frozenset(CONTROLLERS)
    except OSError:
        return frozenset()


@dataclass(frozen=True)
class CgroupLimits:
    memory_bytes: int
    processes: int
    cpus: float


@dataclass
class Cgroup:
    """The groups made for one sandbox (one per hierarchy used), the limits applied, and why
    each missing one is missing."""

    dirs: list[Path] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)  # controller -> its group

    @classmethod
    def create(cls, name: str, limits: CgroupLimits,
               found: list[Hierarchy] | None = None) -> Cgroup:
        """Groups named ``name`` for each controller, from v2 first; never raises."""
        group = cls()
        found = hierarchies() if found is None else found
        v2 = next((h for h in found if h.version == 2), None)
        wanted = {"memory": limits.memory_bytes > 0, "pids": limits.processes > 0,
                  "cpu": limits.cpus > 0}
        problems: dict[str, str] = {}
        if v2 is not None:
            usable = _enable(v2.here, {c for c in v2.controllers if wanted[c]}, problems)
            made = group._make(v2.here / name, problems, "v2")
            if made is not None:
                for controller in usable:
                    group.files[controller] = made
        for controller in CONTROLLERS:
            if not wanted[controller] or controller in group.files:
                continue
            v1 = next((h for h in found if h.version == 1 and controller in h.controllers),
                      None)
            if v1 is None:
                problems.setdefault(controller, "no cgroup hierarchy has the "
                                                f"{controller} controller")
                continue
            made = group._make(v1.here / name, problems, controller)
            if made is not None:
                group.files[controller] = made
        group._limit(limits, problems)
        for controller in CONTROLLERS:
            if wanted[controller] and controller not in group.files:
                group.missing.append(f"{_LABEL[controller]}: not applied "
                                     f"({problems.get(controller, 'no cgroup')})")
        return group

    def _make(self, path: Path, problems: dict[str, str], what: str) -> Path | None:
        if path in self.dirs:
            return path
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            reason = f"cannot make a cgroup under {path.parent}: {exc.strerror}"
            for controller in (CONTROLLERS if what == "v2" else (what,)):
                problems.setdefault(controller, reason)
            return None
        self.dirs.append(path)
        return path

    def _limit(self, limits: CgroupLimits, problems: dict[str, str]) -> None:
        writes = {
            "memory": [("memory.max", str(limits.memory_bytes)), ("memory.swap.max", "0"),
                       ("memory.limit_in_bytes", str(limits.memory_bytes)),
                       ("memory.memsw.limit_in_bytes", str(limits.memory_bytes))],
            "pids": [("pids.max", str(limits.processes))],
            "cpu": [("cpu.max", f"{round(limits.cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}"),
                    ("cpu.cfs_period_us", str(CPU_PERIOD_US)),
                    ("cpu.cfs_quota_us", str(round(limits.cpus * CPU_PERIOD_US)))],
        }
        for controller, group in list(self.files.items()):
            wrote = 0
            for name, value in writes[controller]:
                target = group / name
                if not target.exists():
                    continue
                try:
                    target.write_text(value)
                    wrote += 1
                except OSError as exc:
                    if name in ("memory.swap.max", "memory.memsw.limit_in_bytes"):
                        continue  # no swap accounting: nothing to limit
                    problems[controller] = f"cannot write {target}: {exc.strerror}"
                    wrote = 0
                    break
            if not wrote:
                problems.setdefault(controller, f"{group} has no {controller} files")
                del self.files[controller]
                continue
            version = "v2" if (group / "cgroup.controllers").exists() else "v1"
            self.applied.append(f"{_LABEL[controller]}: {_VALUE[controller](limits)} "
                                f"(cgroup {version})")

    @property
    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files the trampoline joins."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def counters(self) -> dict[str, int]:
        """How often the memory and process limits were hit so far."""
        found: dict[str, int] = {}
        memory, pids = self.files.get("memory"), self.files.get("pids")
        if memory is not None:
            found["memory"] = _field(memory / "memory.events", "oom_kill") + \
                _field(memory / "memory.oom_control", "oom_kill")
        if pids is not None:
            found["pids"] = _field(pids / "pids.events", "max")
        return found

    def report(self) -> list[str]:
        """The limits applied, the CPU's saying how often the quota held the group back."""
        cpu = self.files.get("cpu")
        throttled = _field(cpu / "cpu.stat", "nr_throttled") if cpu is not None else 0
        return [f"{line}, throttled in {throttled} periods of {CPU_PERIOD_US // 1000} ms"
                if line.startswith(_LABEL["cpu"] + ":") and throttled else line
                for line in self.applied]

    def kill(self) -> None:
        """SIGKILL every process in the groups: ``cgroup.kill`` on v2, else until empty."""
        for folder in self.dirs:
            kill_file = folder / "cgroup.kill"
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    kill_file.write_text("1")
        give_up = time.monotonic() + 10
        while time.monotonic() < give_up:
            pids = {pid for folder in self.dirs for pid in _pids(folder)}
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left and remove the groups (a group is removed once it is empty)."""
        self.kill()
        for folder in self.dirs:
            _rmdir(folder)


_LABEL = {"memory": "memory", "pids": "processes", "cpu": "CPU"}


def _gib(n: int) -> str:
    return f"{n / 1024 ** 3:g} GiB" if n >= 1024 ** 3 else f"{n / 1024 ** 2:g} MiB"


_VALUE = {"memory": lambda lim: f"{_gib(lim.memory_bytes)} for all processes together",
          "pids": lambda lim: f"at most {lim.processes}",
          "cpu": lambda lim: f"{lim.cpus:g} cores"}


def _enable(here: Path, controllers: set[str], problems: dict[str, str]) -> set[str]:
    """Let children of ``here`` use ``controllers`` on cgroup v2. A cgroup with processes of
    its own cannot (the "no internal processes" rule), so the service's processes move into a
    leaf of their own first, as container init systems do."""
    control = here / "cgroup.subtree_control"
    try:
        active = set(control.read_text().split())
    except OSError as exc:
        for c in controllers:
            problems[c] = f"cannot read {control}: {exc.strerror}"
        return set()
    todo = controllers - active
    if not todo:
        return controllers
    request = " ".join(f"+{c}" for c in sorted(todo))
    try:
        control.write_text(request)
    except OSError as exc:
        if exc.errno != errno.EBUSY or not _move_into_leaf(here):
            for c in todo:
                problems[c] = f"cannot enable it in {control}: {exc.strerror}"
            return controllers & active
        try:
            control.write_text(request)
        except OSError as again:
            for c in todo:
                problems[c] = f"cannot enable it in {control}: {again.strerror}"
            return controllers & active
    return controllers


def _move_into_leaf(here: Path) -> bool:
    leaf = here / SERVICE_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for _ in range(5):  # processes may fork while they are moved
            pids = _pids(here)
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    (leaf / "cgroup.procs").write_text(str(pid))
    except OSError:
        return False
    return not _pids(here)


def _pids(folder: Path) -> set[int]:
    try:
        return {int(p) for p in (folder / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def _field(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _rmdir(folder: Path) -> None:
    give_up = time.monotonic() + 5
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:  # EBUSY while the last processes are being reaped
            if exc.errno != errno.EBUSY or time.monotonic() > give_up:
                return
            time.sleep(0.05)


def group_name(folder: str, pid: int, start: int | None) -> str:
    """A sandbox's group name: its work folder's, then who made it (``pid-start``)."""
    return f"{folder}.{pid}-{start or 0}"


def remove_stale(prefix: str, alive: Callable[[dict[str, Any]], bool]) -> list[Path]:
    """Kill and remove the groups named ``prefix``… whose service (``pid-start`` at the end
    of the name) ``alive`` says is gone; ``alive`` takes ``{"pid": …, "start": …}``."""
    removed: list[Path] = []
    for hierarchy in hierarchies():
        try:
            children = [p for p in hierarchy.here.iterdir()
                        if p.is_dir() and p.name.startswith(prefix)]
        except OSError:
            continue
        for folder in children:
            owner = folder.name.rsplit(".", 1)[-1]
            pid, _, start = owner.partition("-")
            if not (pid.isdigit() and start.isdigit()):
                continue
            if alive({"pid": int(pid), "start": int(start) or None}):
                continue
            stale = Cgroup(dirs=[folder])
            stale.remove()
            removed.append(folder)
    return removed
