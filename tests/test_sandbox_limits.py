"""Limits per sandbox, not per process: memory for all its processes together, their CPU time
and their number in one cgroup (v2 where it has the controller, else v1), and a disk quota on
its work folder; where a limit cannot be applied, the result says which and why."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from sandbox_repo import needs_bwrap, needs_root, run_hostile

from alignbot.bot.sandbox import MIB, Containment, SandboxLimits, _start_time, cgroup

pytestmark = [needs_root, needs_bwrap]


def _limits(**changes: float) -> SandboxLimits:
    values = {"cpu_seconds": 60, "memory_bytes": 768 * MIB, "processes": 64,
              "file_size": 16 * MIB, "wall_seconds": 120, **changes}
    return SandboxLimits(**values)  # type: ignore[arg-type]


def _together(result: object) -> str:
    out = getattr(result, "stdout_tail", "")
    return next((ln for ln in out.splitlines() if ln.startswith("TOGETHER ")), "")


@pytest.mark.slow
def test_processes_that_fit_one_by_one_are_refused_together(tmp_path: Path) -> None:
    """Four processes of 256 MiB each, under a 768 MiB limit: each fits the per-process
    address-space limit, all four together do not (as four of 2 GiB do under 4 GiB)."""
    limits = _limits()
    targets = {"processes": 4, "mib": 256}
    result = run_hostile("together", tmp_path, targets, limits, Containment(),
                         ["python together.py memory", "exit 9"])
    line = _together(result)
    assert "NOT-ALL-HELD" in line, (line, result.reason, result.stderr_tail[-1500:])
    assert result.reason is not None and (
        "memory limit (768 MiB for all its processes together) was reached" in result.reason)
    assert "memory: 768 MiB for all processes together (cgroup v" in " ".join(result.limits)
    # the same four processes, given room for all of them, all hold their memory
    roomy = run_hostile("together", tmp_path / "roomy", targets, _limits(
        memory_bytes=2048 * MIB), Containment(), ["python together.py memory", "exit 9"])
    assert "ALL-HELD" in _together(roomy) and "NOT-ALL" not in _together(roomy), \
        (roomy.reason, roomy.stderr_tail[-1500:])


def test_a_setup_that_fills_the_disk_stops_at_the_quota(tmp_path: Path) -> None:
    result = run_hostile("together", tmp_path, {"disk_mib": 256}, _limits(
        disk_bytes=64 * MIB), Containment(), ["python together.py disk", "exit 9"])
    line = _together(result)
    match = re.search(r"disk wrote (\d+) MiB then OSError: No space left on device", line)
    assert match and int(match.group(1)) <= 64, (line, result.reason)
    assert result.reason is not None and "disk quota (64 MiB) is full" in result.reason
    assert "disk: 64 MiB for the work folder (tmpfs)" in result.limits


@pytest.mark.slow
def test_processes_together_get_the_cpu_quota(tmp_path: Path) -> None:
    """Two spinning processes for 4 s under a quarter of a core: about one core-second."""
    result = run_hostile("together", tmp_path, {"processes": 2, "seconds": 4}, _limits(
        cpus=0.25), Containment(), ["python together.py cpu", "exit 9"])
    match = re.search(r"cpu used ([\d.]+) s in ([\d.]+) s of wall", _together(result))
    assert match, (result.reason, result.stdout_tail[-1000:], result.stderr_tail[-1000:])
    used, wall = float(match.group(1)), float(match.group(2))
    assert used / wall < 0.4, f"{used} s of CPU in {wall} s"
    # the kernel held them back (on a busy machine they might get little CPU anyway)
    assert re.search(r"CPU: 0.25 cores \(cgroup v\d\), throttled in [1-9]\d* periods",
                     " ".join(result.limits)), result.limits


def test_without_a_cgroup_the_result_says_which_limits_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without a writable cgroup file system (as a default Docker container)."""
    monkeypatch.setattr(cgroup, "hierarchies", lambda *_: [])
    result = run_hostile("together", tmp_path, {"disk_mib": 8}, _limits(),
                         Containment(), ["python together.py disk", "exit 9"])
    assert "ALL-WRITTEN" in _together(result), result.reason
    assert [line for line in result.limits if "not applied" in line] == [
        "memory: not applied (no cgroup hierarchy has the memory controller)",
        "processes: not applied (no cgroup hierarchy has the pids controller)",
        "CPU: not applied (no cgroup hierarchy has the cpu controller)"]
    assert any(line.startswith("per process: 768 MiB of address space") for line in
               result.limits)


V2_ONLY = """\
25 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
"""
HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_hierarchies_are_found_from_the_mount_table() -> None:
    found = cgroup.hierarchies(V2_ONLY, "0::/docker/abc\n")
    assert [(h.version, str(h.here)) for h in found] == [(2, "/sys/fs/cgroup/docker/abc")]
    found = cgroup.hierarchies(HYBRID, "12:pids:/a\n4:memory:/b/c\n2:cpu,cpuacct:/\n"
                                       "1:name=systemd:/x\n0::/\n")
    assert {(h.version, str(h.here), h.controllers) for h in found} == {
        (1, "/sys/fs/cgroup/cpu,cpuacct", frozenset({"cpu"})),
        (1, "/sys/fs/cgroup/memory/b/c", frozenset({"memory"})),
        (1, "/sys/fs/cgroup/pids/a", frozenset({"pids"})),
        (2, "/sys/fs/cgroup/unified", cgroup._v2_controllers(Path("/sys/fs/cgroup/unified")))}
    # a service that moved itself into its leaf makes its sandboxes' groups beside the leaf
    moved = cgroup.hierarchies(V2_ONLY, f"0::/docker/abc/{cgroup.SERVICE_LEAF}\n")
    assert str(moved[0].here) == "/sys/fs/cgroup/docker/abc"


def test_a_group_holds_its_processes_and_kills_them_all(tmp_path: Path) -> None:
    """The real cgroup file system: a group is made, a process tree joins it, ``kill`` ends
    every process in it (including one that left its session), ``remove`` leaves nothing."""
    # named as a live service names its groups (its pid and start time): a sweep of stale
    # groups that another test runs meanwhile (test_sandbox_workspace) leaves it alone
    name = cgroup.group_name(f"alignbot-sandbox-test{secrets.token_hex(4)}", os.getpid(),
                             _start_time(os.getpid()))
    group = cgroup.Cgroup.create(name, cgroup.CgroupLimits(256 * MIB, 16, 1.0))
    if not group.dirs:
        pytest.skip(f"no cgroup can be made here: {group.missing}")
    procs = " ".join(f"echo $$ > {p};" for p in group.procs)
    marker = f"600.{secrets.randbelow(10 ** 9):09d}"
    shell = subprocess.Popen(["sh", "-c", f"{procs} setsid sleep {marker} & exec sleep {marker}"])
    time.sleep(0.5)
    members = {pid for folder in group.dirs for pid in cgroup._pids(folder)}
    assert shell.pid in members and len(members) == 2, members
    group.remove()
    assert shell.wait(timeout=10) == -9
    assert not any(folder.exists() for folder in group.dirs)
    assert "memory: 256 MiB for all processes together (cgroup v" in " ".join(group.applied)


def test_a_checkout_larger_than_the_quota_is_refused_saying_so(tmp_path: Path) -> None:
    result = run_hostile("setup_fails", tmp_path, {}, _limits(disk_bytes=MIB), Containment(),
                         files={"weights.bin": os.urandom(2 * MIB)})
    assert result.reason == ("the pull request's checkout does not fit the work folder's disk "
                             "quota of 1 MiB (ALIGNBOT_SANDBOX_DISK_BYTES)")
