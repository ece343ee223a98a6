"""The alignment feature: which events make jobs, what a hostile pull request gets, and how
every job ends with a completed check run."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from github import GithubException
from service import Service
from sqlalchemy import insert, update

from alignbot.bot import reminders
from alignbot.bot.alignment import (
    CONFIG_PATH,
    JOB_KIND,
    SUPERSEDED,
    TOO_LARGE,
    AlignmentJob,
    on_check_run_rerequested,
    on_pull_request,
)
from alignbot.bot.demo import NUMBER, OWNER, REPO, _files, _sha, deliver, wait_for
from alignbot.bot.engine_report import empty_report
from alignbot.bot.github import ApiOptions, GitHubApp, RateLimited
from alignbot.bot.output import CHECK_NAME
from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.seeds import pull_request_seed
from alignbot.bot.storage import INSTALLATIONS, JOBS, make_engine, migrate, transaction, utcnow
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.webhooks import Event
from alignbot.bot.worker import Worker

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = Path(__file__).parent / "fixtures"


def _event(name: str, action: str | None = None, **changes: Any) -> Event:
    stem = f"{name}.{action}" if action else name
    file = FIXTURES / "github" / "webhooks" / f"{stem}.json"
    payload = json.loads(file.read_text())
    for dotted, value in changes.items():
        target = payload
        *path, last = dotted.split("__")
        for part in path:
            target = target[part]
        target[last] = value
    return Event(name=name, action=action, delivery_id="d-1", payload=payload)


def test_pull_request_events_make_one_superseding_job() -> None:
    (request,) = on_pull_request(_event("pull_request", "opened"))
    payload = request.payload
    assert request.kind == "align" and request.supersede
    assert request.key == f"{payload['repo']}#{payload['number']}"
    assert len(payload["head_sha"]) == 40 and payload["installation_id"] > 0


def test_drafts_and_deleted_forks_make_no_job() -> None:
    assert on_pull_request(_event("pull_request", "opened", pull_request__draft=True)) == []
    event = _event("pull_request", "synchronize")
    event.payload["pull_request"]["head"]["repo"] = None
    assert on_pull_request(event) == []
    event.payload.pop("installation", None)
    event.payload["pull_request"]["head"]["repo"] = {"full_name": "x/y"}
    assert on_pull_request(event) == []


def test_rerequested_check_run_reruns_its_pull_requests() -> None:
    event = _event("check_run", "rerequested")
    event.payload["check_run"]["name"] = CHECK_NAME
    event.payload["check_run"]["pull_requests"] = [{"number": 7, "id": 1}]
    (request,) = on_check_run_rerequested(event)
    assert request.payload["number"] == 7
    assert request.payload["head_sha"] == event.payload["check_run"]["head_sha"]
    event.payload["check_run"]["name"] = "someone else's check"
    assert on_check_run_rerequested(event) == []


@pytest.mark.slow
def test_hostile_spec_is_contained_and_no_secret_is_posted(github_server: Any,
                                                           tmp_path: Path) -> None:
    github = github_server
    base = _files(ROOT / "examples" / "fastops")
    head = {**base, "alignment/steal.py": (FIXTURES / "hostile_pr" / "alignment" / "steal.py")
            .read_bytes(),
            ".github/alignbot.yml": base[".github/alignbot.yml"].replace(
                b"draws: 12", b'draws: 1\nspecs: ["alignment/*.py"]')}
    head[".github/alignbot.yml"] = head[".github/alignbot.yml"].replace(
        b'specs: ["activations.softplus", "activations.mish"]', b'specs: ["steal.*"]')
    base_sha, head_sha = _sha(base), _sha(head)
    github.add_installation(4242, OWNER)
    github.add_repo(OWNER, REPO, 4242, files_by_ref={base_sha: base})
    github.add_pull(OWNER, REPO, NUMBER, head_sha, base_sha, "Innocent change", "mallory",
                    head_tree=head, files=[{"filename": "fastops.py", "status": "modified",
                                            "patch": "@@ -1,1 +1,1 @@\n-a\n+b"}],
                    author_association="MEMBER")
    key_file = tmp_path / "app-key.pem"
    key_file.write_text(github.private_key_pem)
    key_file.chmod(0o600)
    service = Service(github, tmp_path)
    service.env.pop("ALIGNBOT_PRIVATE_KEY")
    service.env["ALIGNBOT_PRIVATE_KEY_FILE"] = str(key_file)
    service.start()
    try:
        deliver(github, service.port, "pull_request",
                github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
        wait_for(lambda: bool(github.comments_on(OWNER, REPO, NUMBER)), 300, "the comment")
    finally:
        service.stop()
    (run,) = github.check_runs_for(OWNER, REPO, head_sha)
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    posted = comment.body + json.dumps([u for u in run.updates])
    assert run.conclusion == "failure" and "could not run" in posted
    # the hostile spec ran (its error, with what it read from /proc, is what got posted) …
    assert "exit status 2" in posted and "alignment/steal.py" in posted
    secrets = [line for line in github.private_key_pem.splitlines() if "-----" not in line]
    secrets += ["demo webhook secret", *github.tokens]
    for secret in secrets:  # … but nothing of the app's secrets was in it
        assert secret not in posted
    assert "network: connected" not in posted


# -- every job ends visibly ------------------------------------------------------------------


INSTALLATION = 4343
FILES = r"/pulls/\d+/files"


@dataclass
class Setup:
    github: GitHubServer
    queue: SqlJobQueue
    job: AlignmentJob
    head: str

    def record(self) -> JobRecord:
        """A job for the pull request's head, claimed as the worker claims it."""
        self.queue.enqueue(JobRequest(kind=JOB_KIND, key=f"{OWNER}/{REPO}#{NUMBER}",
                                      supersede=True, payload={
                                          "installation_id": INSTALLATION,
                                          "repo": f"{OWNER}/{REPO}", "number": NUMBER,
                                          "head_sha": self.head, "trigger": "test"}))
        record = self.queue.claim("test/0")
        assert record is not None
        return record

    def run(self) -> Any:
        (run,) = self.github.check_runs_for(OWNER, REPO, self.head)
        return run


def make_setup(github: GitHubServer, tmp_path: Path, config: bytes) -> Setup:
    """A pull request that changes only its README (no spec to run: no sandbox needed)."""
    base = _files(ROOT / "examples" / "fastops")
    head = {**base, CONFIG_PATH: config, "README.md": b"faster\n"}
    base_sha, head_sha = _sha(base), _sha(head)
    github.add_installation(INSTALLATION, OWNER)
    github.add_repo(OWNER, REPO, INSTALLATION, files_by_ref={base_sha: base})
    github.add_pull(OWNER, REPO, NUMBER, head_sha, base_sha, "Docs", "contributor",
                    head_tree=head, files=[{"filename": "README.md", "status": "modified",
                                            "patch": "@@ -0,0 +1,1 @@\n+faster"}],
                    author_association="MEMBER")
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    migrate(engine)
    queue = SqlJobQueue(engine)
    app = GitHubApp(github.app_id, github.private_key_pem, ApiOptions(
        base_url=github.url, seconds_between_writes=0, max_wait=1, retries=1))
    return Setup(github, queue, AlignmentJob(app=app, queue=queue, engine=engine), head_sha)


@pytest.fixture()
def setup(github_server: GitHubServer, tmp_path: Path) -> Iterator[Setup]:
    yield make_setup(github_server, tmp_path, (ROOT / "examples" / "fastops" / CONFIG_PATH)
                     .read_bytes())


def test_a_job_that_fails_completes_its_check_run_then_raises(setup: Setup) -> None:
    record = setup.record()
    setup.github.fail_next(FILES, status=422)  # after the check run exists, not retried
    with pytest.raises(GithubException):
        setup.job(record)
    run = setup.run()
    assert run.status == "completed" and run.conclusion == "failure"
    assert "alignbot failed while checking this head (GithubException)" in run.output["summary"]


def test_a_rate_limited_job_leaves_its_check_run_in_progress_for_the_retry(setup: Setup
                                                                           ) -> None:
    record = setup.record()
    setup.github.secondary_rate_limit(FILES, retry_after=60)
    with pytest.raises(RateLimited):
        setup.job(record)
    assert setup.run().status == "in_progress"
    # the retry finds the same check run and completes it
    assert (setup.job(record) or {})["conclusion"] == "success"
    assert setup.run().status == "completed" and setup.run().conclusion == "success"


def test_a_superseded_job_cancels_its_check_run(setup: Setup) -> None:
    record = setup.record()
    setup.record()  # a newer push of the same pull request supersedes it
    assert setup.job(record) == {"skipped": SUPERSEDED}
    run = setup.run()
    assert run.status == "completed" and run.conclusion == "cancelled"
    assert SUPERSEDED in run.output["title"] and SUPERSEDED in run.output["summary"]
    assert setup.github.comments_on(OWNER, REPO, NUMBER) == []


def test_give_up_completes_the_check_run_with_the_reason(setup: Setup) -> None:
    record = setup.record()
    setup.github.secondary_rate_limit(FILES, retry_after=60)
    with pytest.raises(RateLimited):
        setup.job(record)
    assert setup.run().status == "in_progress"
    reason = "GitHub was unreachable for 30 minutes; push again or re-run the check"
    setup.job.give_up(record, reason)
    run = setup.run()
    assert run.status == "completed" and run.conclusion == "failure"
    assert "GitHub was unreachable for 30 minutes" in run.output["summary"]


def test_give_up_is_best_effort(setup: Setup) -> None:
    record = setup.record()
    setup.github.secondary_rate_limit(FILES, retry_after=60)
    with pytest.raises(RateLimited):
        setup.job(record)
    setup.github.fail_next(r"/check-runs", status=422, count=5)
    setup.job.give_up(record, "GitHub was unreachable")  # logs, does not raise
    assert setup.run().status == "in_progress"


def test_a_config_over_one_megabyte_fails_the_check(github_server: GitHubServer,
                                                    tmp_path: Path) -> None:
    config = (ROOT / "examples" / "fastops" / CONFIG_PATH).read_bytes()
    setup = make_setup(github_server, tmp_path, config + b"#" * (1024 * 1024 + 1) + b"\n")
    result = setup.job(setup.record())
    assert result is not None and result["conclusion"] == "failure"
    run = setup.run()
    assert run.status == "completed" and run.conclusion == "failure"
    assert TOO_LARGE in run.output["summary"]
    (comment,) = github_server.comments_on(OWNER, REPO, NUMBER)
    assert TOO_LARGE in comment.body


SLOW_SETUP = b"""\
candidate:
  prelude: import torch
  setup: ["sleep 120"]
ops:
  - paths: ["README.md"]
    specs: ["activations.softplus"]
"""


@pytest.mark.slow
def test_a_newer_push_stops_the_running_sandbox_and_names_its_head(
        github_server: GitHubServer, tmp_path: Path) -> None:
    """The check of the old head is in its sandbox (a two-minute setup) when a newer push
    supersedes it: the sandbox is killed within seconds and the check run says which head
    replaced it; nothing is commented for the old head."""
    setup = make_setup(github_server, tmp_path, SLOW_SETUP)
    request = JobRequest(kind=JOB_KIND, key=f"{OWNER}/{REPO}#{NUMBER}", supersede=True,
                         payload={"installation_id": INSTALLATION, "repo": f"{OWNER}/{REPO}",
                                  "number": NUMBER, "head_sha": setup.head, "trigger": "test"})
    old = setup.queue.enqueue(request)
    worker = Worker(setup.queue, {JOB_KIND: setup.job}, heartbeat=0.2)
    thread = threading.Thread(target=worker.run_once)
    thread.start()
    try:
        wait_for(lambda: bool(github_server.check_runs_for(OWNER, REPO, setup.head)), 60,
                 "the old head's check run")
        time.sleep(1)  # into the setup command
        tree = {**_files(ROOT / "examples" / "fastops"), CONFIG_PATH: SLOW_SETUP,
                "README.md": b"faster still\n"}
        newer = _sha(tree)
        github_server.push(OWNER, REPO, NUMBER, newer, tree=tree, files=[
            {"filename": "README.md", "status": "modified", "patch": "@@ -1 +1 @@\n+still"}])
        pushed = time.monotonic()
        setup.queue.enqueue(dataclasses.replace(request, payload={
            **request.payload, "head_sha": newer}))
        wait_for(lambda: setup.run().status == "completed", 60, "the old check run to end")
        assert time.monotonic() - pushed < 10  # not the two minutes of its setup
    finally:
        thread.join(timeout=60)
    run = setup.run()
    assert run.conclusion == "cancelled"
    assert run.output["title"] == f"superseded by {newer[:12]}"
    assert setup.queue.get(old).state is JobState.SUPERSEDED  # type: ignore[union-attr]
    assert github_server.comments_on(OWNER, REPO, NUMBER) == []


def test_a_removed_installation_is_skipped_and_the_live_ones_checks_and_sweeps_go_on(
        setup: Setup) -> None:
    """Installation 4545 was uninstalled (the ``installations`` row says so) after a check of
    one of its pull requests was queued: that job asks GitHub for no token, while the live
    installation's check and reminder sweep run."""
    github, queue = setup.github, setup.queue
    engine = queue.engine
    with transaction(engine) as conn:
        conn.execute(insert(INSTALLATIONS), [
            {"id": INSTALLATION, "account_login": OWNER, "repositories": [f"{OWNER}/{REPO}"],
             "deleted": False},
            {"id": 4545, "account_login": "gone-org", "repositories": ["gone-org/lib"],
             "deleted": True}])
    gone = queue.enqueue(JobRequest(kind=JOB_KIND, key="gone-org/lib#1", supersede=True,
                                    payload={"installation_id": 4545, "repo": "gone-org/lib",
                                             "number": 1, "head_sha": "d" * 40,
                                             "trigger": "test"}))
    live = queue.enqueue(JobRequest(kind=JOB_KIND, key=f"{OWNER}/{REPO}#{NUMBER}",
                                    supersede=True, payload={
                                        "installation_id": INSTALLATION,
                                        "repo": f"{OWNER}/{REPO}", "number": NUMBER,
                                        "head_sha": setup.head, "trigger": "test"}))
    sweeps = reminders.enqueue_due(engine, queue)
    job = dataclasses.replace(setup.job, engine=engine)
    worker = Worker(queue, {JOB_KIND: job, reminders.JOB_KIND: reminders.SweepJob(
        setup.job.app, engine, reminders.SweepOptions(write_interval=0))})
    while worker.run_once():
        pass

    records = {record.id: record for record in queue.list()}
    assert records[gone].state is JobState.DONE
    assert records[gone].result == {"skipped": "the App was uninstalled"}
    assert github.count("POST", r"^/app/installations/4545/access_tokens$") == 0
    assert records[live].state is JobState.DONE and setup.run().status == "completed"
    assert len(github.comments_on(OWNER, REPO, NUMBER)) == 1
    assert [records[s].key for s in sweeps] == [f"{OWNER}/{REPO}".lower()]
    assert records[sweeps[0]].state is JobState.DONE


def test_a_worker_that_lost_its_job_posts_nothing_and_the_new_holder_posts_once(
        github_server: GitHubServer, tmp_path: Path) -> None:
    """The first worker stalls in the merge base's check past its lease and the job is
    reclaimed: it neither checks the head, completes the check run nor comments; the worker
    that runs the job again takes the base's report from the cache, checks the head, finds
    the same check run, completes it and comments once."""
    setup = make_setup(github_server, tmp_path, SLOW_SETUP)
    queue = SqlJobQueue(setup.queue.engine, lease=5)
    calls: list[str] = []

    def sandbox(root: Path, config: Any, args: list[str], *rest: Any, **kwargs: Any
                ) -> SandboxResult:
        calls.append("base" if "--no-minimize" in args else "head")
        if len(calls) == 1:  # the stall: no heartbeat came (lease 5 s), another worker reclaims
            with transaction(queue.engine) as conn:
                conn.execute(update(JOBS).values(updated_at=utcnow() - timedelta(seconds=10)))
            assert len(queue.reclaim_expired()) == 1
        return SandboxResult(dict(empty_report().dump()), 0, None, "", "", 0.1)

    job = dataclasses.replace(setup.job, queue=queue, sandbox=sandbox)
    job_id = queue.enqueue(JobRequest(kind=JOB_KIND, key=f"{OWNER}/{REPO}#{NUMBER}",
                                      supersede=True, payload={
                                          "installation_id": INSTALLATION,
                                          "repo": f"{OWNER}/{REPO}", "number": NUMBER,
                                          "head_sha": setup.head, "trigger": "test"}))
    assert Worker(queue, {JOB_KIND: job}, heartbeat=60, name="stalled").run_once()
    assert setup.run().status == "in_progress"  # left for the new holder, not failed
    assert github_server.comments_on(OWNER, REPO, NUMBER) == []
    assert Worker(queue, {JOB_KIND: job}, name="other").run_once()
    run = setup.run()  # the one check run, found again by its external id
    assert run.status == "completed" and run.conclusion == "success"
    assert len(github_server.comments_on(OWNER, REPO, NUMBER)) == 1
    record = queue.get(job_id)
    assert record is not None and record.state is JobState.DONE and record.attempts == 2
    assert record.worker == "other/once" and calls == ["base", "head"]


def test_every_push_of_a_pull_request_checks_with_its_seed_and_align_seed_overrides(
        github_server: GitHubServer, tmp_path: Path) -> None:
    """Three pushes of the same code (new head shas): the same seed, the pull request's, so
    the same draws and findings; ``/align --seed`` still picks its own."""
    config = (b'candidate:\n  prelude: import torch\nops:\n  - paths: ["README.md"]\n'
              b'    specs: ["activations.softplus"]\nbaseline:\n  enabled: false\n')
    setup = make_setup(github_server, tmp_path, config)
    seeds: list[int] = []

    def sandbox(root: Path, config: Any, args: list[str], *rest: Any, **kwargs: Any
                ) -> SandboxResult:
        seeds.append(int(args[args.index("--seed") + 1]))
        return SandboxResult(empty_report(seeds[-1]).dump(), 0, None, "", "", 0.1)

    setup.job.sandbox = sandbox  # type: ignore[assignment]
    tree = {**_files(ROOT / "examples" / "fastops"), CONFIG_PATH: config,
            "README.md": b"faster\n"}
    for push in range(3):
        if push:  # the same files, a new commit (a rebase, an empty commit)
            setup.head = f"{push:040x}"
            github_server.push(OWNER, REPO, NUMBER, setup.head, tree=tree)
        assert (setup.job(setup.record()) or {})["conclusion"] == "success"
    record = setup.record()
    record.payload["seed"] = 7
    setup.job(record)
    assert seeds == [pull_request_seed(f"{OWNER}/{REPO}", NUMBER)] * 3 + [7]
