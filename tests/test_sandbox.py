"""The sandbox: each hostile repository in fixtures/hostile/ is contained, the result says
what happened, and no canary secret of the service comes back on any channel."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import threading
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sandbox_repo import bwrap_problem, needs_bwrap

from alignbot.bot import sandbox
from alignbot.bot.config import RepoConfig, load_config
from alignbot.bot.sandbox import (
    GIB,
    MIB,
    Containment,
    SandboxLimits,
    SandboxResult,
    run_check,
    runner,
    scrub,
)

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
LIMITS = SandboxLimits(cpu_seconds=20, memory_bytes=2 * GIB, processes=64, file_size=16 * MIB,
                       wall_seconds=40)
# a walk of every readable file: as long as the service's environments are large (a checkout
# under /tmp keeps its venvs visible whole)
WALK_LIMITS = SandboxLimits(cpu_seconds=120, memory_bytes=2 * GIB, processes=64,
                            file_size=16 * MIB, wall_seconds=240)
ALLOWED_ENV = set(sandbox._Workspace(Path("/"), Containment()).environment())


def _can_contain() -> str | None:
    if sys.platform != "linux":
        return "the sandbox needs Linux"
    if os.geteuid() == 0:
        return None
    return bwrap_problem()  # not root: bubblewrap's user namespace, or nothing


pytestmark = pytest.mark.skipif(_can_contain() is not None, reason=str(_can_contain()))


@dataclass
class Secrets:
    """Canaries the sandbox must never hand back, and where they are."""

    values: list[str]
    exposed: Path  # visible to the sandbox (root-owned, 0755): app.pem 0600, hidden.pem
    service: Path  # a root-owned folder of the service, visible: must not be writable
    elsewhere: Path  # a 0600 file that is not exposed at all
    port: int
    accepted: list[str] = field(default_factory=list)

    def containment(self, mode: sandbox.Mode = "auto", hide_key: bool = False) -> Containment:
        hide = [self.exposed / "hidden.pem"] + ([self.exposed / "app.pem"] if hide_key else [])
        return Containment(mode=mode, expose=(self.exposed, self.service), hide=tuple(hide))

    def targets(self) -> dict[str, Any]:
        return {"secret_files": [str(self.exposed / "app.pem"),
                                 str(self.exposed / "hidden.pem"), str(self.elsewhere)],
                "service_dirs": [str(self.service)], "port": self.port}


@pytest.fixture(scope="module")
def canaries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secrets]:
    root = tmp_path_factory.mktemp("service")
    values = [f"canary{name}{secrets.token_hex(12)}" for name in ("env", "file", "proc", "net")]
    env_value, file_value, proc_value, net_value = values
    exposed, service = root / "exposed", root / "service"
    for folder in (exposed, service):
        folder.mkdir()
        folder.chmod(0o755)
    for name in ("app.pem", "hidden.pem"):
        (exposed / name).write_text(f"{file_value}\n")
        (exposed / name).chmod(0o600)
    elsewhere = root / "db.sqlite"
    elsewhere.write_text(file_value)
    elsewhere.chmod(0o600)
    # A process of the service's user with a canary in its /proc/<pid>/environ.
    holder = subprocess.Popen(["sleep", "600"], env={"ALIGNBOT_CANARY_PROC": proc_value})
    old = os.environ.get("ALIGNBOT_CANARY_ENV")
    os.environ["ALIGNBOT_CANARY_ENV"] = env_value
    listener = socket.create_server(("127.0.0.1", 0))
    found = Secrets(values, exposed, service, elsewhere, listener.getsockname()[1])

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            found.accepted.append("connection")
            with conn:
                conn.sendall(net_value.encode())

    threading.Thread(target=serve, daemon=True).start()
    yield found
    listener.close()
    holder.kill()
    holder.wait()
    if old is None:
        os.environ.pop("ALIGNBOT_CANARY_ENV", None)
    else:
        os.environ["ALIGNBOT_CANARY_ENV"] = old


def _check_args(config: RepoConfig, repo: Path) -> list[str]:
    files = [str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()]
    args: list[str] = []
    for path in config.spec_files(files):
        args += ["--spec-file", path]
    return args


def _run(name: str, tmp_path: Path, canaries: Secrets, limits: SandboxLimits = LIMITS,
         containment: Containment | None = None, stop: threading.Event | None = None
         ) -> SandboxResult:
    repo = tmp_path / name
    shutil.copytree(HOSTILE / name, repo)
    targets = canaries.targets()
    (repo / "targets.json").write_text(json.dumps(targets))
    (repo / "targets.txt").write_text("".join(f"{p}\n" for p in targets["secret_files"]))
    config = load_config((repo / ".github" / "alignbot.yml").read_text())
    result = run_check(repo, config, _check_args(config, repo), limits,
                       containment or canaries.containment(), stop=stop)
    _assert_no_canary(result, canaries)
    return result


def _assert_no_canary(result: SandboxResult, canaries: Secrets) -> None:
    everything = json.dumps([result.report, result.reason, result.stdout_tail,
                             result.stderr_tail, result.isolation])
    for value in canaries.values:
        for form in (value, value[::-1], value.encode().hex()):
            assert form not in everything, f"a canary came back: {form}"
    assert not canaries.accepted, "the sandbox reached the host's loopback"


def _uid(result: SandboxResult) -> int | None:
    for layer in result.isolation:
        if layer.startswith("uid:"):
            return int(layer[4:])
    return None


def _processes_of(uid: int) -> list[int]:
    """Live processes (not zombies waiting for their parent) running as ``uid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = dict(ln.split(":", 1) for ln in (entry / "status").read_text()
                              .splitlines() if ":" in ln)
            except OSError:
                continue
            if int(fields["Uid"].split()[1]) == uid and fields["State"].strip()[:1] not in "ZX":
                pids.append(int(entry.name))
    return pids


def _assert_machine_fine(result: SandboxResult) -> None:
    assert subprocess.run(["true"]).returncode == 0
    uid = _uid(result)
    if uid is not None:
        give_up = time.monotonic() + 5  # SIGKILLed processes may take a moment to exit
        while _processes_of(uid) and time.monotonic() < give_up:
            time.sleep(0.05)
        assert _processes_of(uid) == [], "the sandbox left processes running"


@pytest.mark.slow
@needs_bwrap
def test_benign_repository_gives_a_real_report(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("benign", tmp_path, canaries)
    assert result.reason is None, result.stderr_tail
    assert result.exit_code == 0
    assert result.report is not None and result.report["specs_run"] >= 1
    assert result.report["findings"] == []
    if os.geteuid() == 0:
        assert _uid(result) is not None
    assert {"network-namespace", "pid-namespace", "read-only-filesystem"} <= set(
        result.isolation)


@pytest.mark.slow
@needs_bwrap
def test_secrets_are_out_of_reach_as_a_dedicated_uid(tmp_path: Path, canaries: Secrets,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("dropping to a dedicated uid needs root")
    monkeypatch.setattr(runner, "TAIL_CHARS", 1_000_000)  # check every byte printed
    result = _run("secrets", tmp_path, canaries)
    assert result.reason is None, result.stderr_tail
    assert "HOSTILE-RAN steal.sh" in result.stdout_tail
    assert result.report is not None
    leak = result.report["leak"]
    assert leak["ran"] and leak["uid"] == _uid(result) != 0
    assert leak["exists-0"] and leak["secret-file-0"] == "PermissionError"  # the uid stops it
    assert leak["secret-file-1"] == ""  # hidden under /dev/null
    assert leak["secret-file-2"] == "FileNotFoundError"  # not exposed: not there at all
    assert leak["write-0"] in ("OSError", "PermissionError")
    assert not (canaries.service / "planted-by-pr.txt").exists()
    assert leak["setuid"] == "PermissionError"
    assert set(leak["env"]) <= ALLOWED_ENV
    assert not any(name.startswith("ALIGNBOT_") for name in leak["env"])
    _assert_machine_fine(result)


@pytest.mark.slow
@needs_bwrap
def test_secrets_are_out_of_reach_in_a_user_namespace(tmp_path: Path, canaries: Secrets,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What a service that is not root gets: its own uid, so its files must be hidden."""
    monkeypatch.setattr(runner, "TAIL_CHARS", 1_000_000)
    result = _run("secrets", tmp_path, canaries,
                  containment=canaries.containment("userns", hide_key=True))
    assert result.reason is None, result.stderr_tail
    assert "user-namespace" in result.isolation
    leak = result.report["leak"] if result.report else {}
    assert leak["secret-file-0"] == leak["secret-file-1"] == ""
    assert leak["secret-file-2"] == "FileNotFoundError"
    assert leak["write-0"] == "OSError"  # EROFS: the service's own files are read-only
    assert not (canaries.service / "planted-by-pr.txt").exists()
    assert set(leak["env"]) <= ALLOWED_ENV


@pytest.mark.slow
def test_a_dedicated_uid_alone_protects_secrets_and_leaves_nothing_behind(
        tmp_path: Path, canaries: Secrets, monkeypatch: pytest.MonkeyPatch) -> None:
    """A container without CAP_SYS_ADMIN: no namespaces, only the uid (and the sweep)."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    monkeypatch.setattr(runner, "TAIL_CHARS", 1_000_000)
    # Setup commands need no interpreter; here the interpreter may be out of the uid's reach.
    monkeypatch.setattr(sandbox._Workspace, "exposed", lambda self: [])
    containment = Containment(namespaces=False)
    result = _run("secrets", tmp_path, canaries, containment=containment)
    assert "HOSTILE-RAN steal.sh as uid=" in result.stdout_tail, result.stderr_tail
    assert f"== {canaries.exposed / 'app.pem'}" in result.stdout_tail
    assert "Permission denied" in result.stdout_tail  # /proc/*/environ, the key file
    assert _uid(result) is not None and "network-namespace" not in result.isolation
    limits = SandboxLimits(wall_seconds=3, memory_bytes=2 * GIB, processes=64)
    result = _run("hang", tmp_path / "again", canaries, limits, containment)
    assert result.reason is not None and "wall-clock limit" in result.reason
    assert "pid-namespace" not in result.isolation
    _assert_machine_fine(result)  # the setsid daemon was swept


@needs_bwrap
def test_no_network_but_loopback(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("network", tmp_path, canaries)
    assert "HOSTILE-RAN interfaces: ['lo']" in result.stdout_tail
    assert "connect-loopback: ConnectionRefusedError" in result.stdout_tail
    assert result.reason is not None  # it stopped the engine itself
    assert "network-namespace" in result.isolation


def test_fork_bomb_hits_the_process_limit(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("forkbomb", tmp_path, canaries)
    assert result.reason is not None
    assert result.reason.startswith("setup command `python bomb.py` failed with exit status")
    # the cgroup says so where there is one; else the output suggests it
    assert "process limit (64) was reached" in result.reason or \
        "process limit of 64 reached" in result.reason, result.reason
    _assert_machine_fine(result)


def test_memory_hog_hits_the_memory_limit(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("memory", tmp_path, canaries)
    assert result.reason is not None and "memory limit of 2 GiB reached" in result.reason
    assert result.reason.startswith("the engine stopped with exit status 2")


def test_an_internal_error_of_the_engine_is_not_blamed_on_the_candidate() -> None:
    line = ("alignbot: error: internal error (a bug in alignbot, exit status 3): KeyError: "
            "'x'; the traceback is in /tmp/alignbot-traceback-1.txt")
    crashed = runner._Run(3, False, b"", f"alignbot: 1/2 programs\n{line}\n".encode(), [], None)
    assert sandbox._engine_failed(crashed, LIMITS) == (
        f"the engine failed on an internal error of alignbot (exit status 3), not of the "
        f"candidate: {line}")
    refused = runner._Run(2, False, b"", b"alignbot: error: --n 0: expected\n", [], None)
    assert sandbox._engine_failed(refused, LIMITS) == (
        "the engine stopped with exit status 2: alignbot: error: --n 0: expected")


@pytest.mark.slow
def test_busy_loop_hits_the_cpu_limit(tmp_path: Path, canaries: Secrets) -> None:
    limits = SandboxLimits(cpu_seconds=3, memory_bytes=2 * GIB, processes=64, wall_seconds=40)
    result = _run("cpu", tmp_path, canaries, limits)
    assert result.reason == "the engine was killed by SIGXCPU: CPU time limit (3 s)"
    _assert_machine_fine(result)


@pytest.mark.slow
def test_hang_hits_the_wall_clock_limit_and_leaves_nothing_behind(
        tmp_path: Path, canaries: Secrets) -> None:
    limits = SandboxLimits(wall_seconds=5, memory_bytes=2 * GIB, processes=64)
    started = time.monotonic()
    result = _run("hang", tmp_path, canaries, limits)
    assert time.monotonic() - started < 20
    assert result.reason == ("setup command `echo HOSTILE-RAN hang; sleep 1000` ran past the "
                             "5 s wall-clock limit")
    assert "HOSTILE-RAN hang" in result.stdout_tail
    _assert_machine_fine(result)


@pytest.mark.slow
def test_stop_kills_the_running_command_at_once_and_leaves_nothing_behind(
        tmp_path: Path, canaries: Secrets) -> None:
    """The job was superseded: its sandbox ends within a second, not at the wall clock."""
    stop = threading.Event()
    stopped_at: list[float] = []

    def supersede() -> None:
        stopped_at.append(time.monotonic())
        stop.set()

    timer = threading.Timer(2.0, supersede)
    timer.start()
    try:
        result = _run("hang", tmp_path, canaries, SandboxLimits(
            wall_seconds=120, memory_bytes=2 * GIB, processes=64), stop=stop)
    finally:
        timer.cancel()
    assert time.monotonic() - stopped_at[0] < 3  # half a second to notice, then the cleanup
    assert result.reason == ("setup command `echo HOSTILE-RAN hang; sleep 1000` was stopped: "
                             "the check was no longer needed")
    assert result.report is None and "HOSTILE-RAN hang" in result.stdout_tail
    _assert_machine_fine(result)


@pytest.mark.slow
def test_big_file_hits_the_file_size_limit(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("bigfile", tmp_path, canaries)
    assert result.reason is not None and "file size limit of 16 MiB reached" in result.reason


def test_report_swapped_for_a_link_is_refused(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("report_link", tmp_path, canaries)
    assert result.report is None
    assert result.reason == "the engine exited with status 0 but its report is a link (refused)"


def test_failing_setup_command_is_named(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("setup_fails", tmp_path, canaries)
    assert result.reason == "setup command `exit 3` failed with exit status 3"
    assert result.exit_code == 3
    assert "$ echo HOSTILE-RAN preparing\nHOSTILE-RAN preparing" in result.stdout_tail
    assert "never reached" not in result.stdout_tail


def test_refuses_when_the_sandbox_user_cannot_reach_an_exposed_path(
        tmp_path: Path, canaries: Secrets) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    locked = tmp_path / "locked"
    (locked / "inner").mkdir(parents=True)
    locked.chmod(0o700)
    containment = Containment(namespaces=False, expose=(locked / "inner",))
    result = _run("benign", tmp_path, canaries, containment=containment)
    assert result.report is None and result.reason is not None
    assert result.reason.startswith("refused: the sandbox user (uid ")
    assert " is mode 0700" in result.reason  # {locked}, or an ancestor of the interpreter


def test_refuses_to_run_unisolated_unless_allowed(tmp_path: Path, canaries: Secrets) -> None:
    result = _run("benign", tmp_path, canaries, containment=Containment(mode="none"))
    assert result.reason is not None and result.reason.startswith("refused: no isolation")


def test_sweep_kills_what_a_dedicated_uid_left_running() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    uid = sandbox.UID_BASE + secrets.randbelow(sandbox.UID_COUNT)
    escaped = subprocess.Popen(["sleep", "600"], user=uid, group=uid, extra_groups=[],
                               start_new_session=True)
    try:
        assert _processes_of(uid) == [escaped.pid]
        sandbox._sweep(uid)
        assert escaped.wait(timeout=10) == -9
        assert _processes_of(uid) == []
    finally:
        escaped.kill()


def test_scrub_redacts_tokens_keys_and_secret_environment_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALIGNBOT_WEBHOOK_SECRETS", "old-secret-123,new-secret-456")
    key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----"
    text = (f"token ghs_{'a' * 36} and ghp_{'B' * 36} {key} "
            "secrets old-secret-123 new-secret-456 jwt "
            "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOjEyMzQ1fQ.c2lnbmF0dXJlc2ln")
    clean = scrub(text)
    for secret in ("ghs_", "ghp_", "MIIEow", "old-secret-123", "new-secret-456", "eyJhbGci"):
        assert secret not in clean
    assert scrub("-----BEGIN PRIVATE KEY-----\nMIIE cut off") == "[redacted private key]"
    assert "MIIEvQ" not in scrub("AAAAMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----")


@pytest.mark.slow
def test_repository_cannot_shadow_the_engine_but_the_prelude_sees_it(
        tmp_path: Path, canaries: Secrets) -> None:
    result = _run("shadow", tmp_path, canaries)
    assert result.reason is None, result.stderr_tail
    assert result.report is not None and result.report["specs_run"] >= 1
    assert "HOSTILE-RAN" not in result.stderr_tail


# --------------------------------------------------------------------------- deny by default


@dataclass
class Service:
    """A service's folders as an operator lays them out: ``root`` (an interpreter folder
    the operator allowed) holds the key's folder and the database's, both hidden."""

    root: Path
    keys: Path
    data: Path
    key_text: str

    def containment(self, **changes: Any) -> Containment:
        values: dict[str, Any] = {"expose": (self.root,), "hide": (self.keys, self.data),
                                  **changes}
        return Containment(**values)


@pytest.fixture()
def service_dirs(tmp_path: Path) -> Service:
    root = tmp_path / "srv"
    keys, data = root / "keys", root / "data"
    for folder in (root, keys, data, root / "venv" / "bin"):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
    key_text = f"-----BEGIN PRIVATE KEY-----\nKEYCANARY{secrets.token_hex(16)}\n"
    for path, text in ((keys / "app.pem", key_text), (data / "alignbot.db", "db"),
                       (data / "alignbot.db-wal", "wal"), (data / "alignbot.db-shm", "shm"),
                       (root / "venv" / "ok.txt", "VISIBLE-OK")):
        path.write_text(text)
        path.chmod(0o644)  # readable: only hiding stands between them and the sandbox
    return Service(root, keys, data, key_text)


def _repo(tmp_path: Path, config: str) -> tuple[Path, RepoConfig]:
    repo = tmp_path / "repo"
    shutil.copytree(HOSTILE / "benign", repo)
    (repo / ".github" / "alignbot.yml").write_text(config)
    return repo, load_config(config)


OUTSIDE = "is outside the repository and the interpreter folders this service allows"
HIDDEN = "is in a folder the sandbox hides from pull requests"


@pytest.mark.parametrize(("python", "why"), [
    ("{keys}/bin/python", HIDDEN),  # under the allowed folder, but hidden wins
    ("{data}/python", HIDDEN),
    ("{keys}/../keys/python", HIDDEN),
    ("{root}/../python", OUTSIDE),
    ("/proc/1/root{keys}/python", OUTSIDE),
    ("/proc/self/cwd/python", OUTSIDE),
    ("/usr/bin/python3", OUTSIDE),
    ("link/bin/python", "is a link that leads outside the repository"),
])
def test_candidate_python_naming_a_service_path_is_refused(
        tmp_path: Path, service_dirs: Service, python: str, why: str) -> None:
    python = python.format(keys=service_dirs.keys, data=service_dirs.data,
                           root=service_dirs.root)
    repo, config = _repo(tmp_path, "candidate:\n  preset: torch\n")
    (repo / "link").symlink_to(service_dirs.keys)  # as a tarball or a setup command makes it
    config = config.model_copy(update={"candidate": config.candidate.model_copy(
        update={"python": python})})
    result = run_check(repo, config, [], LIMITS, service_dirs.containment())
    assert result.report is None and result.reason is not None
    assert result.reason.startswith(f"refused: candidate.python `{python}` "), result.reason
    assert why in result.reason
    assert result.stdout_tail == result.stderr_tail == ""  # nothing ran


def test_an_allowed_folder_that_is_also_hidden_stays_hidden(
        tmp_path: Path, service_dirs: Service) -> None:
    repo, config = _repo(tmp_path, f"candidate:\n  preset: torch\n  python: "
                                   f"{service_dirs.keys}/bin/python\n")
    containment = service_dirs.containment(expose=(service_dirs.root, service_dirs.keys))
    result = run_check(repo, config, [], LIMITS, containment)
    assert result.reason == f"refused: candidate.python `{service_dirs.keys}/bin/python` {HIDDEN}"


@pytest.mark.parametrize(("spec", "why"), [
    ("../outside.py", "leaves the repository"),
    ("/etc/passwd", "leaves the repository"),
    ("linked_spec.py", "is a link that leads outside the repository"),
])
def test_spec_files_outside_the_repository_are_refused(
        tmp_path: Path, service_dirs: Service, spec: str, why: str) -> None:
    repo, config = _repo(tmp_path, "candidate:\n  preset: torch\n")
    (repo / "linked_spec.py").symlink_to(service_dirs.keys / "app.pem")
    result = run_check(repo, config, ["--spec-file", spec], LIMITS, service_dirs.containment())
    assert result.reason == f"refused: spec file `{spec}` {why}"


@pytest.mark.slow
@needs_bwrap
def test_setup_and_spec_code_see_no_hidden_file_inside_an_allowed_folder(
        tmp_path: Path, service_dirs: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk reads every file it can reach; the allowed folder holds the hidden ones,
    and one of them is also on the allow-list itself (hidden wins)."""
    monkeypatch.setattr(runner, "TAIL_CHARS", 1_000_000)
    repo = tmp_path / "walk"
    shutil.copytree(HOSTILE / "walk", repo)
    key_line = service_dirs.key_text.splitlines()[1]
    paths = [str(p) for p in (service_dirs.keys, service_dirs.data,
                              *service_dirs.keys.iterdir(), *service_dirs.data.iterdir())]
    (repo / "needles.json").write_text(json.dumps({
        "key": key_line.encode().hex(), "secret": secrets.token_hex(8),
        "names": ["alignbot.db", "app.pem"], "paths": paths}))
    config = load_config((repo / ".github" / "alignbot.yml").read_text())
    config = config.model_copy(update={"candidate": config.candidate.model_copy(update={
        "setup": [*config.candidate.setup, f"cat {service_dirs.root}/venv/ok.txt"]})})
    containment = service_dirs.containment(expose=(service_dirs.root, service_dirs.keys))
    result = run_check(repo, config, _check_args(config, repo), WALK_LIMITS, containment)
    assert "VISIBLE-OK" in result.stdout_tail, result.stderr_tail  # the allowed folder is there
    assert "WALK files=" in result.stdout_tail and " hits=0 " in result.stdout_tail, \
        result.stdout_tail[-3000:]
    assert result.reason is not None and " hits=0 " in result.reason
    assert "spec-hits=0" in result.reason  # the spec file, in the engine, found none either
    assert key_line not in json.dumps([result.stdout_tail, result.stderr_tail, result.reason])


def test_without_a_mount_namespace_a_readable_hidden_folder_is_refused(
        tmp_path: Path, canaries: Secrets, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    data = Path(tempfile.mkdtemp(prefix="alignbot-test-data-", dir="/var/tmp"))
    try:
        data.chmod(0o755)
        (data / "alignbot.db-wal").write_text("wal")
        (data / "alignbot.db-wal").chmod(0o644)
        monkeypatch.setattr(sandbox._Workspace, "exposed", lambda self: [])
        result = _run("setup_fails", tmp_path, canaries,
                      containment=Containment(namespaces=False, hide=(data,)))
        assert result.reason is not None and result.reason.startswith(
            f"refused: without a mount namespace {data} cannot be hidden and the sandbox "
            "user (uid "), result.reason
        assert result.stdout_tail.count("HOSTILE-RAN") == 1  # the command line, not its output
    finally:
        shutil.rmtree(data)


@pytest.mark.slow
def test_an_interpreter_the_operator_allowed_is_used_and_only_then(
        tmp_path: Path, canaries: Secrets) -> None:
    operator = tmp_path / "opt" / "candidate-venv"
    venv.EnvBuilder(symlinks=True, with_pip=False).create(operator)
    site_dir = next((operator / "lib").glob("python3*")) / "site-packages"
    (site_dir / "service.pth").write_text("".join(  # NumPy and torch from the service's
        f"{d}\n" for d in site.getsitepackages() if os.path.isdir(d)))
    for folder in (tmp_path, tmp_path / "opt"):
        folder.chmod(0o755)
    repo, config = _repo(tmp_path, f"candidate:\n  preset: torch\n  python: "
                                   f"{operator}/bin/python\n")
    args = [*_check_args(config, repo), "--ops", "activations.softplus", "--n", "2"]
    allowed = Containment(expose=(operator,))
    result = run_check(repo, config, args, LIMITS, allowed)
    assert result.reason is None, result.stderr_tail
    assert result.report is not None and result.report["specs_run"] >= 1
    refused = run_check(repo, config, args, LIMITS, Containment())
    assert refused.reason == (f"refused: candidate.python `{operator}/bin/python` {OUTSIDE} "
                              "(ALIGNBOT_SANDBOX_INTERPRETERS)")
