"""Attacks on the sandbox through a real `alignbot serve` and the GitHub test server: pull
requests whose configuration names the service's files, whose setup and spec code walk the
whole file system for them, whose setup logs in to the App's PostgreSQL through its Unix
socket, and whose processes try to outlive a service killed mid-check."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sandbox_repo import needs_bwrap
from service import OWNER, REPO, SECRET, Service, completed, open_pull

from alignbot.bot.demo import free_port, wait_for
from alignbot.bot.sandbox import cgroup
from alignbot.bot.testing.github import Link

TIMEOUT = 240
FILES = Path(__file__).parent / "fixtures" / "hostile" / "walk"

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/self/status").exists(),
                                 reason="the service sandboxes as root here (a dedicated uid)"),
              needs_bwrap]


class Setup:
    """The service's files and secrets, laid out as an operator would: a key file in its own
    folder, the SQLite database (with its -wal/-shm files) in the service's folder."""

    def __init__(self, tmp_path: Path, github: Any) -> None:
        self.root = tmp_path
        tmp_path.chmod(0o755)  # like /srv/alignbot: only hiding keeps the sandbox out
        self.keys = tmp_path / "keys"
        self.keys.mkdir(mode=0o755)
        self.key = self.keys / "app.pem"
        self.key.write_text(github.private_key_pem)
        self.key.chmod(0o644)  # readable: only hiding stands between it and the sandbox
        self.data = tmp_path / "service-0"
        self.sandboxes = tmp_path / "sandboxes"
        self.canary = f"canary-{secrets.token_hex(16)}"
        lines = [ln for ln in github.private_key_pem.splitlines() if ln and "-----" not in ln]
        self.key_line = lines[len(lines) // 2]

    def env(self) -> dict[str, str]:
        return {"ALIGNBOT_PRIVATE_KEY_FILE": str(self.key),
                "ALIGNBOT_WEBHOOK_SECRETS": f"{SECRET},{self.canary}",
                "ALIGNBOT_SANDBOX_DIR": str(self.sandboxes)}

    def needles(self) -> dict[str, Any]:
        """What the walk looks for, hex-encoded so that the file itself is no hit."""
        return {"key": self.key_line.encode().hex(), "secret": self.canary.encode().hex(),
                "names": ["alignbot.db", "app.pem", "service.log"],
                "paths": [str(self.key), str(self.data / "alignbot.db"),
                          str(self.data / "alignbot.db-wal"), str(self.data / "alignbot.db-shm"),
                          str(self.keys), str(self.data)]}


@pytest.fixture()
def setup(tmp_path: Path, github_server: Any) -> Setup:
    return Setup(tmp_path, github_server)


def _config(**candidate: Any) -> str:
    section = {"preset": "torch", **candidate}
    return json.dumps({"candidate": section, "draws": 1, "specs": ["probe_spec.py"],
                       "ops": [{"paths": ["ops.py"], "specs": ["activations.softplus"]}]})


def _pull(github: Any, number: int, config: str, extra: dict[str, bytes] | None = None,
          files: Path = FILES) -> str:
    """Pull request ``number`` whose head has ``config`` (JSON is YAML), the files of the
    hostile repository ``files`` and ``extra``, and changes ops.py."""
    base = {"README.md": b"a kernel library\n", "ops.py": b"x = 0\n"}
    head = {**base, **{p.name: p.read_bytes() for p in files.iterdir() if p.is_file()},
            **(extra or {}), ".github/alignbot.yml": config.encode(),
            "ops.py": f"x = {number}\n".encode()}
    return open_pull(github, base, head, number=number, title=f"Probe {number}")


def _open(github: Any, service: Service, pulls: dict[int, str]) -> dict[int, Any]:
    """Deliver ``pull_request.opened`` for each pull request; its completed check run."""
    for number in pulls:
        reply = service.deliver(github, "pull_request",
                                github.webhook("pull_request.opened", OWNER, REPO, number=number))
        assert reply.status_code == 202, reply.text
    for number, sha in pulls.items():
        def done(sha: str = sha, number: int = number) -> bool:
            return completed(github, sha, number=number)

        wait_for(done, TIMEOUT, f"the check run of pull request #{number}")
    return {n: github.check_runs_for(OWNER, REPO, sha)[0] for n, sha in pulls.items()}


def _text(run: Any) -> str:
    return "\n".join(str(run.output.get(k, "")) for k in ("title", "summary", "text"))


def _everything_posted(github: Any, numbers: list[int]) -> str:
    runs = [json.dumps(update) for run in github.check_runs_for(OWNER, REPO)
            for update in run.updates]
    comments = [c.body for n in numbers for c in github.comments_on(OWNER, REPO, n)]
    return "\n".join(runs + comments)


def _assert_no_secret(posted: str, setup: Setup) -> None:
    for value in (setup.key_line, setup.canary):
        for form in (value, value[::-1], value.encode().hex()):
            assert form not in posted, "a service secret came back"


@pytest.mark.slow
def test_setup_and_spec_code_find_no_service_file_anywhere(
        github_server: Any, make_service: Any, setup: Setup) -> None:
    """#1 walks every readable path; #2 does the same behind a `candidate.python` whose
    folder holds both the key's folder and the database's (once enough to expose them)."""
    github = github_server
    needles = json.dumps(setup.needles()).encode()
    service = make_service(setup.data, **setup.env())
    started = time.monotonic()
    runs = _open(github, service, {
        1: _pull(github, 1, _config(setup=["python walk.py"]), {"needles.json": needles}),
        2: _pull(github, 2, _config(setup=["python walk.py"],
                                    python=str(setup.root / "bin" / "python")),
                 {"needles.json": needles}),
    })
    seconds = time.monotonic() - started
    walked = _text(runs[1])
    assert runs[1].conclusion == "failure", walked
    assert "WALK files=" in walked, walked  # the walk ran and its summary came back
    files = int(walked.split("WALK files=")[1].split()[0])
    assert files > 1000, walked  # it saw the system, so it would have seen the service
    assert "hits=0 " in walked, walked
    refused = _text(runs[2])
    assert runs[2].conclusion == "failure"
    assert "refused: candidate.python" in refused and "WALK" not in refused, refused
    _assert_no_secret(_everything_posted(github, [1, 2]), setup)
    print(f"walk and refusal took {seconds:.1f} s")


@pytest.mark.slow
def test_configs_naming_service_paths_get_a_failed_check_run_saying_why(
        github_server: Any, make_service: Any, setup: Setup) -> None:
    github = github_server
    service = make_service(setup.data, **setup.env())
    link = f"ln -s {setup.keys} keys"
    cases = {
        1: (_config(python=str(setup.keys / "bin" / "python")),
            "refused: candidate.python"),
        2: (_config(python=str(setup.data / "bin" / "python")),
            "refused: candidate.python"),
        3: (_config(python="keys/bin/python", setup=[link]),
            "is a link that leads outside the repository"),
        4: (_config(python="../../keys/bin/python"), "cannot appear here"),
        5: (json.dumps({"candidate": {"preset": "torch"}, "specs": ["/etc/*.py"],
                        "ops": [{"paths": ["ops.py"], "specs": ["activations.softplus"]}]}),
            "write paths relative to the repository root"),
        6: (_config(python=str(setup.root / "x" / ".." / "keys" / "python")),
            "cannot appear here"),
        7: (_config(python="/proc/1/root" + str(setup.keys / "python")),
            "refused: candidate.python"),
    }
    started = time.monotonic()
    runs = _open(github, service, {n: _pull(github, n, config) for n, (config, _) in
                                   cases.items()})
    seconds = time.monotonic() - started
    for number, (_, why) in cases.items():
        text = _text(runs[number])
        assert runs[number].status == "completed" and runs[number].conclusion == "failure"
        assert why in text, f"#{number}: {text}"
    assert "HOSTILE-RAN" not in _everything_posted(github, list(cases))
    _assert_no_secret(_everything_posted(github, list(cases)), setup)
    print(f"{len(cases)} refusals took {seconds:.1f} s")


@pytest.mark.slow
def test_links_in_the_archive_that_leave_the_repository_fail_the_check_run(
        github_server: Any, make_service: Any, setup: Setup) -> None:
    """A tarball whose links lead to the key's folder or out of the repository: refused before
    anything runs, and the check run is completed saying why (never left in progress)."""
    github = github_server
    service = make_service(setup.data, **setup.env())
    cases = {
        1: {"keys": Link(str(setup.keys).encode())},
        2: {"escape.py": Link(b"../../../../../../etc/passwd")},
        3: {"lib/deep.pem": Link(b"../../" + str(setup.key).lstrip("/").encode())},
    }
    runs = _open(github, service, {n: _pull(github, n, _config(setup=["python walk.py"]), extra)
                                   for n, extra in cases.items()})
    for number, run in runs.items():
        text = _text(run)
        assert run.status == "completed" and run.conclusion == "failure", f"#{number}: {text}"
        assert "archive was refused" in text, f"#{number}: {text}"
        assert "WALK" not in text
    _assert_no_secret(_everything_posted(github, list(cases)), setup)


def _processes(marker: str) -> dict[int, int]:
    """pid -> uid of every live process whose command line holds ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
        if marker.encode() in cmdline and fields["State"].strip()[:1] not in "ZX":
            found[int(entry.name)] = int(fields["Uid"].split()[1])
    return found


def _of_uid(uid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = dict(ln.split(":", 1) for ln in status.splitlines() if ":" in ln)
        if fields and int(fields["Uid"].split()[1]) == uid and \
                fields["State"].strip()[:1] not in "ZX":
            pids.append(int(entry.name))
    return pids


def _live(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    state = next(ln for ln in status.splitlines() if ln.startswith("State:"))
    return state.split()[1] not in ("Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if f"\nPPid:\t{pid}\n" in status:
            found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_sandbox_processes_and_folders_die_with_a_killed_service(
        github_server: Any, make_service: Any, setup: Setup) -> None:
    github = github_server
    marker = f"600.{secrets.randbelow(10 ** 6):06d}"
    detach = (f"setsid sh -c 'sleep {marker} & sleep {marker}' > /dev/null 2>&1 < /dev/null &"
              f" sleep {marker}")
    service = make_service(setup.data, **setup.env())
    sha = _pull(github, 1, _config(setup=[detach]))
    service.deliver(github, "pull_request",
                    github.webhook("pull_request.opened", OWNER, REPO, number=1))
    wait_for(lambda: len(_processes(marker)) >= 3, TIMEOUT, "the detached sleeps to start")
    sandboxed = _processes(marker)
    (uid,) = set(sandboxed.values())
    assert uid != 0
    assert service.proc is not None
    trampolines = _children(service.proc.pid)
    assert trampolines  # the setup command's trampoline, a child of the service
    folders = list(setup.sandboxes.glob("alignbot-sandbox-*"))
    assert folders
    # its cgroups, read while it runs: once the service is dead, any service's start on this
    # host (another test's, running alongside) may sweep them
    groups = [p for h in cgroup.hierarchies() for p in h.here.glob(f"{folders[0].name}.*")]
    assert groups, "the sandbox had no cgroup"

    service.kill()
    killed = time.monotonic()
    while (_processes(marker) or _of_uid(uid)) and time.monotonic() - killed < 5:
        time.sleep(0.05)
    assert _processes(marker) == {}, "sandbox processes outlived the service"
    assert _of_uid(uid) == [], "processes of the sandbox's uid outlived the service"
    assert not [pid for pid in trampolines if _live(pid)], "the trampoline outlived the service"
    print(f"everything was gone {time.monotonic() - killed:.2f} s after the SIGKILL")

    # A SIGKILLed service cannot clean up: its work folder (and its quota's mount) and its
    # cgroups stay until the next start.
    assert list(setup.sandboxes.glob("alignbot-sandbox-*")) == folders
    assert os.path.ismount(folders[0] / "work")
    github.update_pull(OWNER, REPO, 1, state="closed")  # the re-run job then skips
    service.start()
    assert list(setup.sandboxes.glob("alignbot-sandbox-*")) == []
    assert not os.path.ismount(folders[0] / "work")
    assert [p for p in groups if p.exists()] == []
    assert github.check_runs_for(OWNER, REPO, sha)  # the job had started: it was mid-check


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class Postgres:
    """A PostgreSQL for the App's database listening on its Unix socket alone, in the folder
    Debian puts it (/var/run/postgresql), with trust authentication: the worst case."""

    folder: str
    port: int
    database: str

    @property
    def url(self) -> str:
        return (f"postgresql+psycopg://postgres@/{self.database}?host={self.folder}"
                f"&port={self.port}")

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(host=self.folder, port=self.port, user="postgres",
                             dbname=self.database, autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []


def _pg_as(command: list[str]) -> None:
    subprocess.run(["su", "postgres", "-s", "/bin/sh", "-c", " ".join(command)], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)


@pytest.fixture(scope="module")
def postgres_socket() -> Iterator[Postgres]:
    binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                      key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not binaries or shutil.which("su") is None:
        pytest.skip("PostgreSQL's server is not installed (scripts/postgres.sh installs it)")
    folder = Path("/var/run/postgresql")
    if not folder.is_dir():
        folder.mkdir(mode=0o2775, parents=True)
        shutil.chown(folder, "postgres", "postgres")
    data = Path(tempfile.mkdtemp(prefix="alignbot-pg-socket-"))
    shutil.chown(data, "postgres")
    pg = Postgres(str(folder), free_port(), "alignbot")  # a port of its own: no other server's
    bin_dir = binaries[-1]
    _pg_as([f"{bin_dir}/initdb", "-D", str(data), "-A", "trust", "-U", "postgres"])
    _pg_as([f"{bin_dir}/pg_ctl", "-D", str(data), "-l", f"{data}/server.log", "-w", "-o",
            f"\"-p {pg.port} -k {folder} -c listen_addresses='' -c fsync=off\"", "start"])
    try:
        Postgres(pg.folder, pg.port, "postgres").query(f"CREATE DATABASE {pg.database}")
        yield pg
    finally:
        _pg_as([f"{bin_dir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"])
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.slow
def test_setup_code_cannot_reach_the_apps_postgresql_on_its_unix_socket(
        github_server: Any, make_service: Any, setup: Setup, postgres_socket: Postgres) -> None:
    """The App keeps its jobs in a PostgreSQL that trusts whoever reaches its socket; the
    pull request's setup code tries to copy ``jobs`` and to run a program on the host."""
    github, pg = github_server, postgres_socket
    token = secrets.token_hex(6)
    mark = Path(f"/tmp/alignbot-pg-program-{token}")
    targets = {"folder": pg.folder, "port": pg.port, "database": pg.database,
               "table": f"stolen_{token}", "file": str(mark)}
    service = make_service(setup.data, **setup.env(), ALIGNBOT_DATABASE_URL=pg.url)
    config = json.dumps({"candidate": {"preset": "torch", "setup": ["python pg.py"]},
                         "ops": [{"paths": ["ops.py"], "specs": ["activations.softplus"]}]})
    runs = _open(github, service, {1: _pull(github, 1, config, {
        "targets.json": json.dumps(targets).encode()}, files=FILES.parent / "postgres")})
    text = _text(runs[1])
    assert runs[1].conclusion == "failure"
    assert "python pg.py\\` failed with exit status 7" in text, text  # it ran, to its end
    assert pg.query("SELECT count(*) FROM jobs")[0][0] >= 1  # the host reaches it: the App's
    assert pg.query(f"SELECT to_regclass('stolen_{token}') IS NULL") == [(True,)], \
        "the pull request read the App's jobs"
    assert not mark.exists(), "the pull request ran a program on the host"
    assert "Sandbox: " in text and "network-namespace" in text and "Limits: memory" in text
