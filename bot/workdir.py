"""Each worker process's own work folder, and the sweep of those left by dead processes."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

from .sandbox.workspace import own_folders

PREFIX = "alignbot-worker-"
LOCK = ".alive"
# a folder without its lock file may be one whose process is between mkdtemp and the lock
YOUNG_SECONDS = 60.0


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
    for folder, info in own_folders(base, PREFIX):
        try:
            fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            if time.time() - info.st_mtime < YOUNG_SECONDS:
                continue
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held (OSError): alive
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except OSError:
            continue
        finally:
            if fd is not None:
                os.close(fd)
    return removed
