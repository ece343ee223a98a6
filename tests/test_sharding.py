"""bot/sharding.py: a check split into shard jobs, run by several worker processes on
PostgreSQL (bot/stack.py) or by `alignbot serve` on SQLite, merged into one check run and one
comment; the GitHub test server as GitHub and the real sandbox."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from service import INSTALLATION, OWNER, SECRET, Service
from sqlalchemy import Engine, insert, update
from test_stack import _checks_done, _worker_pid

from alignbot.bot.alignment import AlignmentJob
from alignbot.bot.commands import latest_report
from alignbot.bot.demo import _files, _patch, _sha, wait_for
from alignbot.bot.engine_report import empty_report
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.jobs import ALIGN, ALIGN_SHARD
from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.seeds import pull_request_seed
from alignbot.bot.shard_groups import ShardGroups
from alignbot.bot.sharding import Sharding, ShardJob
from alignbot.bot.stack import Stack, github_test_env, quick_check_config
from alignbot.bot.storage import INSTALLATIONS, JOBS, GroupEnd, make_engine, migrate, transaction
from alignbot.bot.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
BASE = _files(ROOT / "examples" / "fastops")
BUGGY = (ROOT / "examples" / "pull-request" / "fastops.py").read_bytes()
CONFIG = BASE[".github/alignbot.yml"].replace(b"draws: 12", b"draws: 3")
TIMEOUT = 240


def open_pull(github: Any, repo: str, config: bytes) -> str:
    """Pull request 1 of ``repo`` (the example library) with the buggy softplus, under
    ``config``. Returns the head's sha."""
    base = {**BASE, ".github/alignbot.yml": config}
    head = {**base, "fastops.py": BUGGY}
    head_sha = _sha(head)
    if INSTALLATION not in github.installations:
        github.add_installation(INSTALLATION, OWNER)
    github.add_repo(OWNER, repo, INSTALLATION, files_by_ref={_sha(base): base})
    github.add_pull(OWNER, repo, 1, head_sha, _sha(base), "Faster softplus", "contributor",
                    head_tree=head, author_association="MEMBER", files=[
                        {"filename": "fastops.py", "status": "modified",
                         "patch": _patch("fastops.py", base["fastops.py"], BUGGY)}])
    return head_sha


def deliver(github: Any, url: str, repo: str, action: str = "opened") -> None:
    headers, body = github.delivery("pull_request", github.webhook(
        f"pull_request.{action}", OWNER, repo, number=1), SECRET)
    reply = httpx.post(f"{url}/webhook", content=body, headers=headers, timeout=30)
    assert reply.status_code == 202, reply.text


def finished(github: Any, repo: str, sha: str) -> bool:
    runs = github.check_runs_for(OWNER, repo, sha)
    return bool(runs) and runs[0].status == "completed" and bool(
        github.comments_on(OWNER, repo, 1))


def posted_once(github: Any, repo: str, sha: str, latest: str | None = None) -> Any:
    """The one check run of ``repo``'s head, completed by one update, and the one comment
    (about the ``latest`` head, default this one)."""
    (run,) = github.check_runs_for(OWNER, repo, sha)
    assert [update["conclusion"] for update in run.updates if "conclusion" in update] == \
        [run.conclusion]
    (comment,) = github.comments_on(OWNER, repo, 1)
    assert (latest or sha)[:12] in comment.body
    return run


def shard_jobs(engine: Engine, repo: str) -> list[JobRecord]:
    return [job for job in SqlJobQueue(engine).list(kind=ALIGN_SHARD)
            if job.key == f"{OWNER}/{repo}#1"]


def untimed(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings without the wall time their shrinking took."""
    return [{**finding, "shrink": {**finding["shrink"], "seconds": None}}
            if finding.get("shrink") else finding for finding in findings]


def untimed_text(text: str) -> str:
    """Check-run output without the check's time and the shrinkers' times."""
    return re.sub(r"\| time \| \d+ s \|", "| time |", re.sub(r", [0-9.]+ s\)", ")", text))


def merged_report(engine: Engine, repo: str) -> dict[str, Any]:
    (report,) = [job.result["report"] for job in shard_jobs(engine, repo)
                 if job.result and "report" in job.result]
    return dict(report)


@pytest.mark.slow
@pytest.mark.services
def test_shards_run_on_several_workers_and_merge_into_the_whole_check(
        github_server: Any, postgres_url: str, tmp_path: Path) -> None:
    github = github_server
    sha = open_pull(github, "sharded", CONFIG + b"shards: 2\n")
    engine = make_engine(postgres_url)
    # a sharded check has no merge-base baseline yet: compare both without it
    env = github_test_env(github, postgres_url, ALIGNBOT_WORKERS="1", ALIGNBOT_BASELINE="false")
    with Stack(env, tmp_path / "stack", workers=2) as stack:
        started = time.monotonic()
        deliver(github, stack.url, "sharded")
        wait_for(lambda: finished(github, "sharded", sha), TIMEOUT, "the sharded check")
        sharded_seconds = time.monotonic() - started
        # pushed again without shards: the same pull request, so the same seed
        tree = {**BASE, ".github/alignbot.yml": CONFIG, "fastops.py": BUGGY}
        whole_sha = _sha(tree)
        github.push(OWNER, "sharded", 1, whole_sha, tree=tree)
        started = time.monotonic()
        deliver(github, stack.url, "sharded", "synchronize")
        wait_for(lambda: finished(github, "sharded", whole_sha), TIMEOUT, "the whole check")
        whole_seconds = time.monotonic() - started
        pids = {worker.pid for worker in stack.workers}
        shard_counts = {worker.pid: _checks_done(httpx.get(
            worker.metrics_url or "", timeout=10).text, ALIGN_SHARD) for worker in stack.workers}
    print(f"sharded (2 shards, 2 workers): {sharded_seconds:.1f} s; whole: {whole_seconds:.1f} s")

    shards = shard_jobs(engine, "sharded")
    assert [(job.payload["shard"], job.state) for job in shards] == \
        [(1, JobState.DONE), (2, JobState.DONE)]
    assert {_worker_pid(job.worker or "") for job in shards} == pids  # one shard each
    assert shard_counts == {pid: 1 for pid in pids}  # each worker's /metrics counts its own
    (whole_job,) = [job for job in SqlJobQueue(engine).list(kind=ALIGN)
                    if job.payload["head_sha"] == whole_sha]
    assert whole_job.result is not None
    merged, whole = merged_report(engine, "sharded"), whole_job.result["report"]
    engine.dispose()
    assert merged["specs"] == whole["specs"] == ["activations.mish", "activations.softplus"]
    assert untimed(merged["findings"]) == untimed(whole["findings"]) and merged["findings"]
    assert merged["programs_run"] == whole["programs_run"]

    split = posted_once(github, "sharded", sha, latest=whole_sha)
    alone = posted_once(github, "sharded", whole_sha)
    assert (split.conclusion, split.output["title"], split.annotations) == \
        (alone.conclusion, alone.output["title"], alone.annotations)
    for part in ("summary", "text"):  # the same but for the times taken
        assert untimed_text(split.output[part]) == untimed_text(alone.output[part]), part
    assert split.conclusion == "failure" and "grad-mismatch" in split.output["text"]


@pytest.mark.slow
def test_sharded_check_in_one_sqlite_service(github_server: Any, tmp_path: Path) -> None:
    """`alignbot serve` alone (SQLite): three shards (the third has no spec), its two
    worker threads, one check run and one comment."""
    github = github_server
    sha = open_pull(github, "sharded", CONFIG + b"shards: 3\n")
    service = Service(github, tmp_path, ALIGNBOT_WORKERS="2")
    service.start()
    try:
        started = time.monotonic()
        deliver(github, service.url, "sharded")
        wait_for(lambda: finished(github, "sharded", sha), TIMEOUT, "the sharded check")
        print(f"sharded (3 shards, 2 threads): {time.monotonic() - started:.1f} s")
    finally:
        service.stop()
    run = posted_once(github, "sharded", sha)
    assert run.conclusion == "failure" and "grad-mismatch" in run.output["text"]
    engine = make_engine(f"sqlite:///{tmp_path / 'alignbot.db'}")
    assert [job.state for job in shard_jobs(engine, "sharded")] == [JobState.DONE] * 3
    report = merged_report(engine, "sharded")
    latest = latest_report(SqlJobQueue(engine), f"{OWNER}/sharded", 1)  # what /findings reads
    engine.dispose()
    assert report["specs"] == ["activations.mish", "activations.softplus"]
    assert latest is not None and latest[0] == sha
    assert [f["kind"] for f in latest[1]] == [f["kind"] for f in report["findings"]]


@pytest.mark.slow
def test_a_failing_shard_completes_the_check_run_with_its_reason(
        github_server: Any, tmp_path: Path) -> None:
    """Every shard's setup fails (exit status 3): the first to fail ends the check, once;
    the other posts nothing."""
    github = github_server
    config = quick_check_config(0.5).replace(b'"ops.py"', b'"fastops.py"')
    sha = open_pull(github, "failing", config + b"shards: 2\n")
    service = Service(github, tmp_path, ALIGNBOT_WORKERS="2")
    service.start()
    try:
        deliver(github, service.url, "failing")
        wait_for(lambda: finished(github, "failing", sha), TIMEOUT, "the failing check")
        engine = make_engine(f"sqlite:///{tmp_path / 'alignbot.db'}")
        queue = SqlJobQueue(engine)
        wait_for(lambda: all(job.state is JobState.DONE
                             for job in shard_jobs(engine, "failing")), 60, "both shards")
    finally:
        service.stop()
    run = posted_once(github, "failing", sha)
    assert run.conclusion == "failure"
    text = f"{run.output['title']}\n{run.output['summary']}\n{run.output['text']}"
    assert "exit status 3" in text
    shards = shard_jobs(engine, "failing")
    (parent,) = queue.list(kind=ALIGN)
    group = ShardGroups(queue).get(parent.id)
    engine.dispose()
    assert group is not None and group.ended is GroupEnd.FAILED
    (ender,) = [job for job in shards if job.id == group.ended_by]
    assert f"shard {ender.payload['shard']}/2" in text
    (other,) = [job for job in shards if job.id != group.ended_by]
    assert other.result is not None and "skipped" in other.result


def running_shards(engine: Engine, repo: str, count: int) -> bool:
    return len([job for job in shard_jobs(engine, repo)
                if job.state is JobState.RUNNING]) == count


@pytest.mark.slow
def test_a_newer_push_supersedes_every_shard_and_cancels_once(
        github_server: Any, tmp_path: Path) -> None:
    """Both shards sit in their sandboxes (a 60 s setup); a push supersedes them: the
    sandboxes are killed, the old head's check run is cancelled by one update, and the new
    head is checked."""
    github = github_server
    slow = quick_check_config(60).replace(b'"ops.py"', b'"fastops.py"') + b"shards: 2\n"
    old = open_pull(github, "pushed", slow)
    service = Service(github, tmp_path, ALIGNBOT_WORKERS="3")
    service.start()
    engine = make_engine(f"sqlite:///{tmp_path / 'alignbot.db'}")
    try:
        deliver(github, service.url, "pushed")
        wait_for(lambda: running_shards(engine, "pushed", 2), 60, "both shards to run")
        time.sleep(1)  # into their sandboxes
        quick = quick_check_config(0.1).replace(b'"ops.py"', b'"fastops.py"')
        tree = {**BASE, ".github/alignbot.yml": quick, "fastops.py": BUGGY}
        new = _sha(tree)
        github.push(OWNER, "pushed", 1, new, tree=tree, files=[
            {"filename": "fastops.py", "status": "modified",
             "patch": _patch("fastops.py", BASE["fastops.py"], BUGGY)}])
        started = time.monotonic()
        headers, body = github.delivery("pull_request", github.webhook(
            "pull_request.synchronize", OWNER, "pushed", number=1), SECRET)
        assert httpx.post(f"{service.url}/webhook", content=body, headers=headers,
                          timeout=30).status_code == 202
        wait_for(lambda: finished(github, "pushed", new) and all(
            job.state is JobState.SUPERSEDED for job in shard_jobs(engine, "pushed")) and
            github.check_runs_for(OWNER, "pushed", old)[0].status == "completed",
            60, "the new head's check and the old shards' end")
        seconds = time.monotonic() - started
    finally:
        service.stop()
        engine.dispose()
    assert seconds < 30  # the 60 s sandboxes were killed, not waited for
    (run,) = github.check_runs_for(OWNER, "pushed", old)
    assert [update["conclusion"] for update in run.updates if "conclusion" in update] == \
        ["cancelled"]
    assert new[:12] in run.output["title"]
    (comment,) = github.comments_on(OWNER, "pushed", 1)
    assert new[:12] in comment.body and old[:12] not in comment.body


@pytest.mark.slow
@pytest.mark.services
def test_a_shard_whose_worker_dies_runs_again_and_posts_once(
        github_server: Any, postgres_url: str, tmp_path: Path) -> None:
    """The worker of shard 1 is SIGKILLed in its sandbox; its lease expires, the other
    worker runs it again, and the merged check is posted once."""
    github = github_server
    slower = CONFIG.replace(b"candidate:\n", b"candidate:\n  setup: [\"sleep 2\"]\n")
    sha = open_pull(github, "killed", slower + b"shards: 2\n")
    engine = make_engine(postgres_url)
    queue = SqlJobQueue(engine)
    env = github_test_env(github, postgres_url, ALIGNBOT_WORKERS="1",
                          ALIGNBOT_JOB_LEASE_SECONDS="3")
    with Stack(env, tmp_path / "stack", workers=2) as stack:
        deliver(github, stack.url, "killed")
        wait_for(lambda: running_shards(engine, "killed", 2), 60, "both shards to run")
        (first,) = [job for job in shard_jobs(engine, "killed") if job.payload["shard"] == 1]
        (victim,) = [w for w in stack.workers if w.pid == _worker_pid(first.worker or "")]
        victim.kill()
        wait_for(lambda: finished(github, "killed", sha), TIMEOUT, "the check")
    rerun = queue.get(first.id)
    engine.dispose()
    assert rerun is not None and rerun.state is JobState.DONE and rerun.attempts == 2
    assert _worker_pid(rerun.worker or "") != victim.pid
    run = posted_once(github, "killed", sha)
    assert run.conclusion == "failure" and "grad-mismatch" in run.output["text"]


def in_process(github: Any, tmp_path: Path, sandbox: Any) -> tuple[SqlJobQueue, Worker]:
    """The App's check and shard handlers on a SQLite queue, run by one worker, with
    ``sandbox`` standing for what comes out of the pull request's sandbox."""
    engine = make_engine(f"sqlite:///{tmp_path / 'jobs.db'}")
    migrate(engine)
    queue = SqlJobQueue(engine)
    groups = ShardGroups(queue)
    app = GitHubApp(github.app_id, github.private_key_pem, ApiOptions(
        base_url=github.url, seconds_between_writes=0, max_wait=1, retries=1))
    check = AlignmentJob(app=app, queue=queue, sandbox=sandbox, max_shards=4,
                         sharding=Sharding(groups), engine=engine)
    return queue, Worker(queue, {ALIGN: check, ALIGN_SHARD: ShardJob(check, groups)},
                         name="w")


def enqueue_check(queue: SqlJobQueue, repo: str, sha: str) -> None:
    queue.enqueue(JobRequest(ALIGN, f"{OWNER}/{repo}#1", supersede=True,
                             supersedes=(ALIGN_SHARD,), payload={
                                 "installation_id": INSTALLATION, "repo": f"{OWNER}/{repo}",
                                 "number": 1, "head_sha": sha, "trigger": "test"}))


def by_shard(write: Any) -> Any:
    """A sandbox whose report is ``write(K)`` for shard K (what pull-request code could
    write there)."""
    def sandbox(root: Path, config: Any, args: list[str], *rest: Any, **kwargs: Any
                ) -> SandboxResult:
        shard = int(args[args.index("--shard") + 1].split("/")[0])
        return SandboxResult(write(shard), 0, None, "", "", 0.1)
    return sandbox


def report(seed: int, *specs: str) -> dict[str, Any]:
    return {**empty_report(seed).dump(), "specs": list(specs), "specs_run": len(specs)}


@pytest.mark.parametrize(("hostile", "reason"), [
    # shard 2 claims shard 1's spec too
    (lambda seed, shard: report(seed, "activations.mish", *(("activations.softplus",) * (
        shard - 1))), "spec activations.mish is in reports 1 and 2"),
    # shard 2 speaks for shard 1's spec, and shard 1 says it ran none
    (lambda seed, shard: report(seed, *(("activations.mish", "activations.softplus")
                                        if shard == 2 else ())),
     "shard 1/2 reports specs (none), but its share is activations.mish"),
    # shard 2's report is another run's (another seed)
    (lambda seed, shard: report(seed + shard - 1, f"s{shard}"), "is not from this check"),
    # shard 2's report is not a report
    (lambda seed, shard: report(seed, f"s{shard}") if shard == 1 else {"findings": 1},
     "shard 2/2: the engine's report was invalid"),
])
def test_shard_reports_that_do_not_belong_together_fail_the_check(
        github_server: Any, tmp_path: Path, hostile: Any, reason: str) -> None:
    """What comes out of a sandbox is the pull request's to write: shard reports that
    overlap, come from another seed or are no report fail the one check run, with why."""
    github = github_server
    sha = open_pull(github, "hostile", CONFIG + b"shards: 2\n")
    seed = pull_request_seed(f"{OWNER}/hostile", 1)
    queue, worker = in_process(github, tmp_path, by_shard(lambda shard: hostile(seed, shard)))
    enqueue_check(queue, "hostile", sha)
    while worker.run_once():
        pass
    run = posted_once(github, "hostile", sha)
    assert run.conclusion == "failure"
    assert reason in f"{run.output['title']}\n{run.output['summary']}\n{run.output['text']}"
    # a replay of the shard that did not merge: it sees the check ended and posts nothing
    (parent,) = queue.list(kind=ALIGN)
    group = ShardGroups(queue).get(parent.id)
    assert group is not None and group.ended is not None
    (other,) = [job for job in shard_jobs(queue.engine, "hostile") if job.id != group.ended_by]
    with transaction(queue.engine) as conn:
        conn.execute(update(JOBS).where(JOBS.c.id == other.id).values(state="queued"))
    assert worker.run_once()
    assert (queue.get(other.id) or other).result == {
        "skipped": f"its check ended ({group.ended})"}
    posted_once(github, "hostile", sha)


def test_shards_superseded_before_any_ran_cancel_the_old_check_run_once(
        github_server: Any, tmp_path: Path) -> None:
    """The check is split, then a newer push comes before a worker took a shard: the new
    head's check ends the old one, cancelled, before checking its own head."""
    github = github_server
    old = open_pull(github, "queued", CONFIG + b"shards: 2\n")
    queue, worker = in_process(github, tmp_path, lambda *a, **k: SandboxResult(
        report(0), 0, None, "", "", 0.1))
    enqueue_check(queue, "queued", old)
    assert worker.run_once()  # the split; both shards wait in the queue
    tree = {**BASE, ".github/alignbot.yml": CONFIG, "fastops.py": BUGGY + b"\n# 2\n"}
    new = _sha(tree)
    github.push(OWNER, "queued", 1, new, tree=tree)
    enqueue_check(queue, "queued", new)
    assert [job.state for job in shard_jobs(queue.engine, "queued")] == \
        [JobState.SUPERSEDED] * 2
    assert worker.run_once()  # the new head's check
    (run,) = github.check_runs_for(OWNER, "queued", old)
    assert [update["conclusion"] for update in run.updates if "conclusion" in update] == \
        ["cancelled"]
    assert new[:12] in run.output["title"]


def test_the_shards_of_a_removed_installation_stop(github_server: Any, tmp_path: Path) -> None:
    """The App is uninstalled after the check was split: its shards ask GitHub for nothing."""
    github = github_server
    sha = open_pull(github, "removed", CONFIG + b"shards: 2\n")
    sandboxes: list[list[str]] = []

    def sandbox(root: Path, config: Any, args: list[str], *rest: Any, **kwargs: Any
                ) -> SandboxResult:
        sandboxes.append(args)
        return SandboxResult(report(0), 0, None, "", "", 0.1)

    queue, worker = in_process(github, tmp_path, sandbox)
    enqueue_check(queue, "removed", sha)
    assert worker.run_once()  # the split
    with transaction(queue.engine) as conn:
        conn.execute(insert(INSTALLATIONS).values(
            id=INSTALLATION, account_login=OWNER, repositories=[], deleted=True))
    while worker.run_once():
        pass
    assert [job.result for job in shard_jobs(queue.engine, "removed")] == \
        [{"skipped": "the App was uninstalled"}] * 2
    assert sandboxes == []
    (run,) = github.check_runs_for(OWNER, "removed", sha)
    assert run.status == "in_progress"  # no token to complete it with


def test_a_pull_request_closed_while_sharded_cancels_the_check_run_once(
        github_server: Any, tmp_path: Path) -> None:
    github = github_server
    sha = open_pull(github, "closed", CONFIG + b"shards: 2\n")
    queue, worker = in_process(github, tmp_path, lambda *a, **k: SandboxResult(
        report(0), 0, None, "", "", 0.1))
    enqueue_check(queue, "closed", sha)
    assert worker.run_once()  # the split
    github.update_pull(OWNER, "closed", 1, state="closed")
    while worker.run_once():
        pass
    (run,) = github.check_runs_for(OWNER, "closed", sha)
    assert [update["conclusion"] for update in run.updates if "conclusion" in update] == \
        ["cancelled"]
    assert run.output["title"] == "superseded: the pull request was closed"
    assert github.comments_on(OWNER, "closed", 1) == []


def test_a_check_split_before_its_worker_died_is_not_split_or_reopened_again(
        github_server: Any, tmp_path: Path) -> None:
    """The align job's worker died after the split; the shards merged and completed the check
    run; the align job runs again once its lease expired: it neither splits again nor sets
    the completed check run in progress."""
    github = github_server
    sha = open_pull(github, "rerun", CONFIG + b"shards: 2\n")
    seed = pull_request_seed(f"{OWNER}/rerun", 1)
    queue, worker = in_process(github, tmp_path, by_shard(lambda shard: report(
        seed, ("activations.mish", "activations.softplus")[shard - 1])))
    enqueue_check(queue, "rerun", sha)
    while worker.run_once():
        pass
    run = posted_once(github, "rerun", sha)
    assert run.conclusion == "success"
    (parent,) = queue.list(kind=ALIGN)
    with transaction(queue.engine) as conn:  # as reclaim_expired puts it back
        conn.execute(update(JOBS).where(JOBS.c.id == parent.id).values(state="queued"))
    assert worker.run_once() and not worker.run_once()
    assert len(shard_jobs(queue.engine, "rerun")) == 2
    run = posted_once(github, "rerun", sha)
    assert run.status == "completed" and not any(
        update.get("status") == "in_progress" for update in run.updates[1:])
