"""bot/workdir.py: each worker process's work folder, swept once its process is gone (real
processes, one of them SIGKILLed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from service import Service

from alignbot.bot.workdir import LOCK, PREFIX, WorkFolder, sweep

HOLD = ("import sys, time\nfrom pathlib import Path\nfrom alignbot.bot.workdir import WorkFolder\n"
        "folder = WorkFolder.create(Path(sys.argv[1]))\n"
        "(folder.path / 'alignbot-pr-x').mkdir()\n"
        "print(folder.path, flush=True)\ntime.sleep(600)\n")


def holder(base: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process that made its work folder under ``base`` and lives on."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(base)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_sweep_removes_the_folders_of_dead_processes_only(tmp_path: Path) -> None:
    live, live_folder = holder(tmp_path)
    dead, dead_folder = holder(tmp_path)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        starting = tmp_path / f"{PREFIX}starting"  # between mkdtemp and its lock
        starting.mkdir()
        unlocked = tmp_path / f"{PREFIX}unlocked"  # no lock file, long ago: not judged
        unlocked.mkdir()
        os.utime(unlocked, (time.time() - 3600, time.time() - 3600))
        engine = tmp_path / "alignbot-worker-x"  # a candidate worker's folder (checks/)
        engine.mkdir()
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (tmp_path / f"{PREFIX}link").symlink_to(outside)
        mine = WorkFolder.create(tmp_path)  # this process's own, alive

        assert sweep(tmp_path) == [dead_folder]
        assert live_folder.is_dir() and (live_folder / "alignbot-pr-x").is_dir()
        assert starting.is_dir() and unlocked.is_dir() and engine.is_dir()
        assert outside.is_dir() and (mine.path / LOCK).exists()
        assert sweep(tmp_path) == []
        mine.close()
        assert not mine.path.exists()
    finally:
        live.kill()
        live.wait()
    assert sweep(tmp_path) == [live_folder]


@pytest.mark.slow
def test_the_service_checks_out_in_its_folder_and_sweeps_a_killed_ones(
        github_server: Any, tmp_path: Path) -> None:
    """`alignbot serve` starts by removing the folder of a SIGKILLed predecessor (with the
    checkout it left) and keeps its own while it runs; once it stopped (uvicorn ends on the
    SIGTERM it caught, before exit handlers run) the next start's sweep takes that one."""
    base = tmp_path / "work"
    base.mkdir()
    dead, dead_folder = holder(base)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    (tmp_path / "service").mkdir()
    service = Service(github_server, tmp_path / "service", ALIGNBOT_SANDBOX_DIR=str(base))
    service.start()
    try:
        assert not dead_folder.exists()
        (own,) = base.glob(PREFIX + "*")
        assert (own / LOCK).exists() and sweep(base) == []
    finally:
        service.stop()
    assert sweep(base) == [own]
