"""Each worker process's own work folder, and the sweep of those left by dead processes."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

from .sandbox.workspace import own_folders

PREFIX = "alignbot-checkouts-"  # not the engine's alignbot-worker-: those are not ours
LOCK = ".alive"


class WorkFolder:
    """A folder only this process writes in (the pull requests' checkouts go there),
    ``PREFIX`` + random under ``base``, with an exclusive ``flock`` on its ``.alive`` file held
    while the process lives. The kernel drops the lock when the process dies, however it dies
    (SIGKILL, out of memory), so ``sweep`` at a later start, on the same host, removes exactly
    the folders whose process is gone."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def create(cls, base: Path | None = None) -> WorkFolder:
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base)).resolve()
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: no one else can hold it
        return cls(path, fd)

    def close(self) -> None:
        """Remove the folder and drop the lock (at a clean exit)."""
        if self._fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._fd)
        self._fd = None


def sweep(base: Path | None = None) -> list[Path]:
    """Remove the work folders under ``base`` (default: the temp folder) that belong to this
    user and whose ``.alive`` lock no process holds; a folder of a live process is left alone."""
    removed: list[Path] = []
    for folder, _ in own_folders(base, PREFIX):
        try:  # no lock file: not (yet) such a folder, or not ours to judge: left alone
            fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held (OSError): alive
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed
