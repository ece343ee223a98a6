"""End to end: `alignbot serve` as it runs in the container, the GitHub test server as GitHub.

A signed webhook ends in a completed check run and one comment; a second push edits the same
comment; a redelivery changes nothing; a service killed mid-job finishes after a restart and
still posts once.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from service import NUMBER, OWNER, REPO, SECRET, Service, completed, open_pull

from alignbot.bot.demo import _files, _patch, _sha, deliver, seed, wait_for
from alignbot.bot.stack import quick_check_config

ROOT = Path(__file__).resolve().parent.parent

BUGGY = ROOT / "examples" / "pull-request" / "fastops.py"
FIXED = ROOT / "examples" / "fastops" / "fastops.py"
TIMEOUT = 300


@pytest.fixture()
def service(make_service: Any) -> Service:
    return make_service()  # type: ignore[no-any-return]


def _push(github: Any, source: Path, label: str) -> str:
    base = _files(ROOT / "examples" / "fastops")
    tree = {**base, "fastops.py": source.read_bytes(), "NOTES": label.encode()}
    sha = _sha(tree)
    github.push(OWNER, REPO, NUMBER, sha, tree=tree, files=[
        {"filename": "fastops.py", "status": "modified",
         "patch": _patch("fastops.py", base["fastops.py"], tree["fastops.py"])}])
    return sha


@pytest.mark.slow
def test_pull_request_end_to_end(github_server: Any, service: Service) -> None:
    github = github_server
    _, head = seed(github, BUGGY)
    payload = github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER)
    headers, body = github.delivery("pull_request", payload, SECRET)
    reply = httpx.post(f"http://127.0.0.1:{service.port}/webhook", content=body,
                       headers=headers, timeout=30)
    assert reply.status_code == 202 and reply.json() == {"status": "queued", "jobs": 1}
    wait_for(lambda: completed(github, head), TIMEOUT, "the first check run")

    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.name == "alignbot / op alignment" and run.conclusion == "failure"
    assert any("annotations" in update.get("output", {}) for update in run.updates)
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert comment.user.login == "alignbot[bot]"
    assert "grad-mismatch" in comment.body and "torch.nn.functional.softplus" in comment.body
    assert head[:12] in comment.body

    # the same delivery again: a no-op
    again = httpx.post(f"http://127.0.0.1:{service.port}/webhook", content=body,
                       headers=headers, timeout=30)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    time.sleep(2)
    assert len(github.check_runs_for(OWNER, REPO)) == 1
    assert len(github.comments_on(OWNER, REPO, NUMBER)) == 1

    # a second push that fixes the bug: the same comment, edited in place
    fixed = _push(github, FIXED, "fixed")
    deliver(github, service.port, "pull_request",
            github.webhook("pull_request.synchronize", OWNER, REPO, number=NUMBER))
    wait_for(lambda: completed(github, fixed), TIMEOUT, "the second check run")
    (second,) = github.check_runs_for(OWNER, REPO, fixed)
    assert second.conclusion == "success"
    (edited,) = github.comments_on(OWNER, REPO, NUMBER)
    assert edited.id == comment.id and fixed[:12] in edited.body and "agree" in edited.body


@pytest.mark.slow
def test_killed_service_finishes_the_job_after_a_restart_and_posts_once(
        github_server: Any, service: Service) -> None:
    github = github_server
    # the check spends 5 s in its sandbox, then fails its setup: time enough to be killed
    # mid-job on a busy machine, without the engine's minute for a check nobody reads
    base = {".github/alignbot.yml": quick_check_config(5), "ops.py": b"def op(x):\n    return x\n"}
    head = open_pull(github, base, {**base, "ops.py": b"def op(x):\n    return 2 * x\n"})
    deliver(github, service.port, "pull_request",
            github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
    wait_for(lambda: bool(github.check_runs_for(OWNER, REPO, head)), TIMEOUT,
             "the job to start")
    service.kill()  # mid-job: the check run is in progress, nothing else is posted yet
    assert github.check_runs_for(OWNER, REPO, head)[0].status == "in_progress"
    service.start()
    wait_for(lambda: completed(github, head), TIMEOUT, "the job after the restart")
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.conclusion == "failure"
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert "exit status 3" in comment.body


@pytest.mark.slow
def test_a_job_past_the_job_timeout_is_stopped_and_its_check_run_says_so(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service = make_service(ALIGNBOT_JOB_TIMEOUT_SECONDS="4")
    # a setup of two minutes: the job, not the sandbox's own 15 minutes, ends it
    base = {".github/alignbot.yml": quick_check_config(120),
            "ops.py": b"def op(x):\n    return x\n"}
    head = open_pull(github, base, {**base, "ops.py": b"def op(x):\n    return 2 * x\n"})
    started = time.monotonic()
    deliver(github, service.port, "pull_request",
            github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
    wait_for(lambda: bool(github.check_runs_for(OWNER, REPO, head)) and all(
        run.status == "completed" for run in github.check_runs_for(OWNER, REPO, head)),
        TIMEOUT, "the check run to end")
    assert time.monotonic() - started < 60  # not the setup's two minutes
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.conclusion == "failure"
    assert ("alignbot stopped checking this head: it ran past the job timeout (4 s)"
            in run.output["summary"]), run.output
    assert "ran past the job timeout" in service.log_text()


# --------------------------------------------------------------------------- roles


@pytest.mark.parametrize("argv", [["worker"], ["serve", "--no-worker"]])
def test_a_split_role_on_sqlite_is_one_line_and_exit_2(
        argv: list[str], github_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from alignbot.bot.cli import main

    for name, value in Service(github_server, tmp_path).env.items():
        if name.startswith("ALIGNBOT_"):
            monkeypatch.setenv(name, value)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"alignbot: error: alignbot {' '.join(argv)} shares the job queue")
    assert "needs PostgreSQL" in line and "`alignbot serve` alone" in line
    assert not (tmp_path / "alignbot.db").exists()  # refused before touching the database
