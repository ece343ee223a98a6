"""The per-job folders: a root-owned top with the sandbox's work folder (a size-limited tmpfs
where the service may mount one: the disk quota; a copy of the checkout, home, tmp, out and a
virtual environment), the scrubbed environment and the engine's command line
(``alignbot.bot.engine_command``), the report read back without following links, and the removal of
what a previous life of the service left (``remove_stale``: folders, their mounts, cgroups)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import site
import stat
import tempfile
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import nesting
from ..engine_command import engine_argv
from . import cgroup
from .child import MIB
from .paths import exposed_paths, hidden_paths
from .plan import UID_BASE, UID_COUNT, Containment, _Plan, _size
from .scrub import _scrub_data
from .trampoline import _sweep

if TYPE_CHECKING:
    from ..config import RepoConfig

REPORT_MAX_BYTES = 16 * MIB
OWNER_FILE = "owner.json"
PREFIX = "alignbot-sandbox-"
UNRECORDED_STALE_SECONDS = 600  # a folder without its owner record yet: made a moment ago?
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
INODE_BYTES = 16 * 1024  # the quota's tmpfs holds one file per this many bytes of its size


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[19]) if len(fields) > 19 else None


def _write_owner(top: Path, uid: int | None) -> None:
    record = {"pid": os.getpid(), "start": _start_time(os.getpid()), "uid": uid}
    fd = os.open(top / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle)


def _read_owner(top: Path) -> dict[str, Any] | None:
    """The owner record, trusted only when the service's own user wrote it (the sandbox
    cannot write there as a dedicated uid)."""
    try:
        fd = os.open(top / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        try:
            record = json.loads(handle.read(4096))
        except ValueError:
            return None
    return record if isinstance(record, dict) else None


def _alive(record: dict[str, Any]) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    start = _start_time(pid)
    return start is not None and start == record.get("start")


def own_folders(base: Path | None, prefix: str) -> Iterator[tuple[Path, os.stat_result]]:
    """The folders named ``prefix`` + anything under ``base`` (default: the temp folder) that
    belong to this user, not links, with their ``lstat``."""
    root = Path(base) if base is not None else Path(tempfile.gettempdir())
    try:
        candidates = sorted(root.glob(prefix + "*"))
    except OSError:
        return
    for folder in candidates:
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            yield folder, info


def remove_stale(base_dir: Path | None = None) -> list[Path]:
    """Remove the work folders (and kill the dedicated uids) that a service which is no longer
    running left in ``base_dir``; folders of live services are left alone."""
    removed: list[Path] = []
    for top, info in own_folders(base_dir, PREFIX):
        record = _read_owner(top)
        if record is None:
            if time.time() - info.st_mtime < UNRECORDED_STALE_SECONDS:
                continue
        elif _alive(record):
            continue
        uid = (record or {}).get("uid")
        if os.geteuid() == 0 and isinstance(uid, int) and \
                UID_BASE <= uid < UID_BASE + UID_COUNT:
            _sweep(uid)
        _unmount(top / "work")
        shutil.rmtree(top, ignore_errors=True)
        removed.append(top)
    return removed + cgroup.remove_stale(PREFIX, _alive)


@dataclass
class _Workspace:
    """``top`` (root-owned, 0711, random name) holds ``empty`` and ``work`` (the sandbox's, 0700, a
    size-limited tmpfs where the service may mount one):
    ``repo`` (a copy of the checkout), ``home``, ``tmp``, ``out`` and ``venv`` (a virtual
    environment layered over the service's, so setup commands can ``pip install``)."""

    top: Path
    containment: Containment
    quota: str = ""  # the disk quota applied, or why there is none
    cgroup: cgroup.Cgroup | None = None  # made by run_check; each command joins it

    @property
    def work(self) -> Path:
        return self.top / "work"

    @property
    def repo(self) -> Path:
        return self.work / "repo"

    @property
    def empty(self) -> Path:
        """An empty file the sandbox sees in place of hidden files, sockets and FIFOs."""
        return self.top / "empty"

    @property
    def venv(self) -> Path:
        return self.work / "venv"

    @classmethod
    def create(cls, repo_dir: Path, plan: _Plan, containment: Containment,
               disk_bytes: int = 0) -> _Workspace:
        base = containment.base_dir
        top = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base)).resolve()
        ws = cls(top, containment)
        try:
            os.chmod(top, 0o711)
            _write_owner(top, plan.uid if plan.dedicated else None)
            ws.empty.touch(mode=0o444)
            ws.work.mkdir(mode=0o700)
            ws.quota = _mount_quota(ws.work, disk_bytes, plan)
            shutil.copytree(repo_dir, ws.repo, symlinks=True)
            for name in ("home", "tmp", "out"):
                (ws.work / name).mkdir(mode=0o700)
            ws._make_venv()
            if plan.mode == "uid":
                _chown_tree(ws.work, plan.uid, plan.gid)
        except BaseException as exc:
            full = isinstance(exc, OSError) and ws.quota_full()  # copytree's errors are text
            _unmount(ws.work)
            shutil.rmtree(top, ignore_errors=True)
            if full:
                raise OSError(errno.ENOSPC, "the work folder's quota is full") from exc
            raise
        return ws

    def quota_full(self) -> bool:
        """Whether the work folder's quota is (nearly) used up: less than a MiB is left."""
        if not os.path.ismount(self.work):
            return False
        try:
            info = os.statvfs(self.work)
        except OSError:
            return False
        return info.f_bavail * info.f_frsize < MIB

    @property
    def cgroup_name(self) -> str:
        """The sandbox's cgroups: the work folder's name, then the service's pid and start."""
        return cgroup.group_name(self.top.name, os.getpid(), _start_time(os.getpid()))

    def _make_venv(self) -> None:
        venv.EnvBuilder(symlinks=True, with_pip=False).create(self.venv)
        lib = next((self.venv / "lib").glob("python3*")) / "site-packages"
        dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
        (lib / "_alignbot_service.pth").write_text("".join(
            f"import site; site.addsitedir({d!r})\n" for d in dirs))
        pip = self.venv / "bin" / "pip"
        pip.write_text(f'#!/bin/sh\nexec "{self.venv}/bin/python" -m pip "$@"\n')
        pip.chmod(0o755)

    def environment(self) -> dict[str, str]:
        """The whole environment of the sandbox: nothing is inherited from the service."""
        threads = str(min(4, os.cpu_count() or 1))
        tmp = str(self.work / "tmp")
        return {
            "PATH": f"{self.venv}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.work / "home"), "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "USER": "alignbot", "LOGNAME": "alignbot",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(self.repo),  # the candidate's prelude imports the repository
            "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            # Threads count against RLIMIT_NPROC and glibc arenas against RLIMIT_AS.
            "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads, "TORCHINDUCTOR_COMPILE_THREADS": "1",
            "MALLOC_ARENA_MAX": "2",
        }

    def engine_argv(self, config: RepoConfig, check_args: list[str]) -> list[str]:
        """The engine's command line here: this environment's interpreter, this checkout,
        the report in ``out``."""
        return engine_argv(config, check_args, python=self.venv / "bin" / "python",
                           repo=self.repo, report=self.work / "out" / "report.json")

    def exposed(self) -> list[str]:
        """What the sandbox must be able to read: interpreters, the engine, its templates."""
        return exposed_paths(self.containment)

    def hidden(self) -> list[str]:
        return hidden_paths(self.containment)

    def remove(self, plan: _Plan) -> None:
        if plan.dedicated:
            _sweep(plan.uid)
        _unmount(self.work)
        shutil.rmtree(self.top, ignore_errors=True)


def _mount_quota(work: Path, size: int, plan: _Plan) -> str:
    """Mount a tmpfs of ``size`` bytes on ``work``: the disk quota; what applied, in words."""
    if size <= 0:
        return "disk: no quota (turned off)"
    uid, gid = (plan.uid, plan.gid) if plan.mode == "uid" else (os.getuid(), os.getgid())
    options = (f"size={size},nr_inodes={max(size // INODE_BYTES, 4096)},mode=0700,"
               f"uid={uid},gid={gid}")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", bytes(work), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                  options.encode()) != 0:
        return f"disk: no quota (the service cannot mount a tmpfs: " \
               f"{os.strerror(ctypes.get_errno())})"
    return f"disk: {_size(size)} for the work folder (tmpfs)"


def _unmount(work: Path) -> None:
    if os.path.ismount(work):
        with contextlib.suppress(OSError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.umount2(bytes(work), MNT_DETACH)


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.lchown(root, uid, gid)
    for base, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.lchown(os.path.join(base, name), uid, gid)



def _read_report(work: Path, folder: str, name: str) -> tuple[dict[str, Any] | None, str]:
    """The report written by untrusted code: no links, no FIFOs, capped, an object with a
    ``findings`` list; scrubbed like the tails."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    try:
        work_fd = os.open(work, flags | os.O_DIRECTORY)
        try:
            dir_fd = os.open(folder, flags | os.O_DIRECTORY, dir_fd=work_fd)
        finally:
            os.close(work_fd)
        try:
            fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except FileNotFoundError:
        return None, "wrote no report"
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, "its report is a link (refused)"
        return None, f"its report cannot be opened ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "its report is not a regular file (refused)"
        data = handle.read(REPORT_MAX_BYTES + 1)
    if len(data) > REPORT_MAX_BYTES:
        return None, f"its report is larger than {_size(REPORT_MAX_BYTES)}"
    too_deep = f"its report is invalid: it nests deeper than {nesting.MAX_DEPTH} levels"
    try:
        report = json.loads(data)
    except RecursionError:
        return None, too_deep
    except ValueError as exc:
        return None, f"its report is not valid JSON ({type(exc).__name__})"
    if not isinstance(report, dict) or not isinstance(report.get("findings"), list):
        return None, "its report is not an object with a `findings` list"
    if nesting.too_deep(report):  # before anything walks it
        return None, too_deep
    return _scrub_data(report), ""
