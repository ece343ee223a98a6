"""The sandbox's work folders: the report read back from untrusted code, and the removal of
what a previous life of the service left behind."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_repo import needs_bwrap, run_hostile

from alignbot.bot import sandbox
from alignbot.bot.sandbox import SandboxLimits, workspace

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox needs Linux")


def test_report_reader_refuses_fifos_big_files_and_non_reports(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "fifo.json")
    assert sandbox._read_report(tmp_path, "out", "fifo.json") == (
        None, "its report is not a regular file (refused)")
    (out / "list.json").write_text("[1, 2]")
    assert "not an object" in sandbox._read_report(tmp_path, "out", "list.json")[1]
    (out / "bad.json").write_text("{")
    assert "not valid JSON" in sandbox._read_report(tmp_path, "out", "bad.json")[1]
    monkeypatch.setattr(workspace, "REPORT_MAX_BYTES", 100)
    (out / "big.json").write_text(json.dumps({"findings": [], "pad": "x" * 200}))
    assert "larger than 100 bytes" in sandbox._read_report(tmp_path, "out", "big.json")[1]
    (out / "ok.json").write_text(json.dumps({"findings": [], "m": f"ghs_{'a' * 36}"}))
    assert sandbox._read_report(tmp_path, "out", "ok.json")[0] == {
        "findings": [], "m": "[redacted token]"}
    (tmp_path / "linked").symlink_to(out)
    assert "link" in sandbox._read_report(tmp_path, "linked", "ok.json")[1]


def _record(top: Path, pid: int, start: int | None, uid: int | None) -> None:
    top.mkdir(mode=0o711)
    (top / sandbox.OWNER_FILE).write_text(json.dumps({"pid": pid, "start": start, "uid": uid}))


def test_remove_stale_removes_what_a_dead_service_left_and_nothing_else(
        tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs: the previous life of the service
    uid = sandbox.UID_BASE + secrets.randbelow(sandbox.UID_COUNT)
    other_uid = 54_321  # not a sandbox uid: a forged record must not sweep it
    left = subprocess.Popen(["sleep", "600"], user=uid, group=uid, extra_groups=[],
                            start_new_session=True)
    bystander = subprocess.Popen(["sleep", "600"], user=other_uid, group=other_uid,
                                 extra_groups=[], start_new_session=True)
    try:
        me = os.getpid()
        _record(tmp_path / "alignbot-sandbox-dead", gone.pid, 1, uid)
        _record(tmp_path / "alignbot-sandbox-forged", gone.pid, 1, other_uid)
        _record(tmp_path / "alignbot-sandbox-live", me, sandbox._start_time(me), None)
        _record(tmp_path / "alignbot-sandbox-reused-pid", me, 1, None)
        (tmp_path / "alignbot-sandbox-new").mkdir()  # its record is about to be written
        old = tmp_path / "alignbot-sandbox-old"
        old.mkdir()
        os.utime(old, (time.time() - 3600, time.time() - 3600))
        (tmp_path / "unrelated").mkdir()
        removed = sandbox.remove_stale(tmp_path)
        # what it swept here (the host's stale cgroups a killed run left may come too)
        assert sorted(p.name for p in removed if p.parent == tmp_path) == [
            "alignbot-sandbox-dead", "alignbot-sandbox-forged", "alignbot-sandbox-old",
            "alignbot-sandbox-reused-pid"]
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "alignbot-sandbox-live", "alignbot-sandbox-new", "unrelated"]
        assert left.wait(timeout=10) == -9  # the dead service's sandbox uid was swept
        assert bystander.poll() is None
    finally:
        left.kill()
        bystander.kill()
        left.wait()
        bystander.wait()


def test_the_engine_runs_one_worker_unless_the_check_asks_for_more(tmp_path: Path) -> None:
    from alignbot.bot.config import load_config
    from alignbot.bot.sandbox.plan import Containment

    config = load_config("candidate:\n  preset: torch\n")
    ws = workspace._Workspace(tmp_path, Containment())
    argv = ws.engine_argv(config, ["--ops", "relu*"])
    assert argv[argv.index("--jobs") + 1] == "1"
    assert ws.engine_argv(config, ["--jobs", "3"]).count("--jobs") == 1


@needs_bwrap
@pytest.mark.parametrize("mode", ["auto", "userns"])
def test_the_sandbox_sees_its_work_folder_alone_not_the_services_records(
        tmp_path: Path, mode: sandbox.Mode) -> None:
    """In a user namespace the sandbox runs as the service's own user: the folder above its
    work folder (the owner record that says which service is alive) is not in its view."""
    setup = ["cat ../../owner.json; ls -a ../..; exit 3"]
    result = run_hostile("setup_fails", tmp_path, {}, SandboxLimits(wall_seconds=60),
                         sandbox.Containment(mode=mode), setup)
    assert result.reason == f"setup command `{setup[0]}` failed with exit status 3"
    assert '{"pid"' not in result.stdout_tail
    assert result.stdout_tail.endswith("\n.\n..\nwork\n"), result.stdout_tail  # no record there
    assert "owner.json: No such file or directory" in result.stderr_tail, result.stderr_tail
