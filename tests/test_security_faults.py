"""GitHub's faults end to end, through `alignbot serve` and the GitHub test server: a rate limit
longer than the wait bound, an outage, an outage past the retry horizon, a configuration file
GitHub will not serve (over 1 MB, or a link out of the repository, on the head or the base
branch), and webhooks for an installation GitHub does not know. Webhook in, what GitHub saw
out, and the service's log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from service import NUMBER, OWNER, REPO, Service, completed
from service import open_pull as service_open_pull

from alignbot.bot import alignment
from alignbot.bot.demo import INSTALLATION, _files, _patch, _sha, seed, wait_for
from alignbot.bot.queue import JobRecord, JobState, SqlJobQueue
from alignbot.bot.stack import quick_check_config
from alignbot.bot.storage import make_engine
from alignbot.bot.testing.github import Link

ROOT = Path(__file__).resolve().parent.parent

BUGGY = ROOT / "examples" / "pull-request" / "fastops.py"
CONFIG = ".github/alignbot.yml"
TIMEOUT = 300
# Rate limits over 1 s are not waited out; retries start at 0.5 s and wait at most 2 s.
FAST = {"ALIGNBOT_GITHUB_MAX_WAIT": "1", "ALIGNBOT_GITHUB_RETRY_BASE": "0.5",
        "ALIGNBOT_GITHUB_RETRY_CAP": "2"}


def align_jobs(service: Service) -> list[JobRecord]:
    """The service's align jobs, read from its database."""
    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        return SqlJobQueue(engine).list(kind=alignment.JOB_KIND)
    finally:
        engine.dispose()


def finished(service: Service) -> bool:
    jobs = align_jobs(service)
    return bool(jobs) and jobs[-1].state in (JobState.DONE, JobState.FAILED)


def posted_or_failed(github: Any, service: Service, head: str) -> bool:
    """The check run and comment are out, or the job failed (then the test fails at once)."""
    jobs = align_jobs(service)
    return completed(github, head) or (bool(jobs) and jobs[-1].state is JobState.FAILED)


def open_pull(github: Any, service: Service) -> str:
    """Pull request #1 as in the demo, delivered as opened; its head sha."""
    _, head = seed(github, BUGGY)
    return deliver_opened(github, service, head)


def quick_pull(github: Any) -> str:
    """Pull request #1 whose check fails in its sandbox's setup (exit status 3) after half a
    second: the whole path of a job (check run, archive, sandbox, completion, comment)
    without the engine's minutes, for the faults that do not depend on what the check finds;
    not delivered yet. Its head sha."""
    base = {CONFIG: quick_check_config(0.5), "ops.py": b"def op(x):\n    return x\n"}
    return service_open_pull(github, base, {**base, "ops.py": b"def op(x):\n    return 2 * x\n"})


def deliver_opened(github: Any, service: Service, head: str) -> str:
    reply = service.deliver(github, "pull_request",
                            github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER))
    assert reply.status_code == 202, reply.text
    return head


def assert_no_traceback(service: Service) -> None:
    log = service.log_text()
    assert "Traceback" not in log, log[log.index("Traceback") - 2000:][:6000]


@pytest.mark.slow
def test_a_rate_limit_longer_than_the_wait_bound_reschedules_the_job(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service = make_service(**FAST, ALIGNBOT_GITHUB_RETRY_HORIZON="60")
    # the check run's completion is refused for 5 s, five times the 1 s the service may wait
    github.secondary_rate_limit(r"/check-runs/\d+$", count=1, retry_after=5, method="PATCH")
    head = deliver_opened(github, service, quick_pull(github))
    wait_for(lambda: posted_or_failed(github, service, head), TIMEOUT,
             "the check run after the rate limit")
    wait_for(lambda: finished(service), TIMEOUT, "its job to be recorded done or failed")

    assert completed(github, head), align_jobs(service)[-1].error
    (run,) = github.check_runs_for(OWNER, REPO, head)  # the rerun found the same check run
    assert run.status == "completed" and run.conclusion == "failure"
    assert github.count("POST", r"/check-runs$") == 1
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert "exit status 3" in comment.body  # the sandbox ran, twice
    patches = [status for method, path, status in github.requests
               if method == "PATCH" and "/check-runs/" in path]
    assert patches[0] == 403 and patches[-1] == 200
    (job,) = align_jobs(service)
    assert (job.state, job.attempts, job.retries) == (JobState.DONE, 1, 0)
    log = service.log_text()
    assert f"job {job.id} (align {OWNER}/{REPO}#{NUMBER}): rate limited, rescheduled in" in log
    assert_no_traceback(service)


@pytest.mark.slow
def test_an_outage_of_the_whole_api_is_retried_until_it_ends(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    # each request retried once (not 5 times over about 15 s): the outage outlasts
    # those retries many times over, so the worker's own retries must see it through
    service = make_service(**FAST, ALIGNBOT_GITHUB_RETRY_HORIZON="120",
                           ALIGNBOT_GITHUB_REQUEST_RETRIES="1")
    head = quick_pull(github)
    github.outage(".", seconds=12, status=503)
    deliver_opened(github, service, head)
    wait_for(lambda: posted_or_failed(github, service, head), TIMEOUT,
             "the check run after the outage")
    wait_for(lambda: finished(service), TIMEOUT, "its job to be recorded done or failed")

    assert completed(github, head), align_jobs(service)[-1].error
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.status == "completed" and run.conclusion == "failure"
    (comment,) = github.comments_on(OWNER, REPO, NUMBER)
    assert "exit status 3" in comment.body
    assert github.count(None, ".") > 0 and any(s == 503 for _, _, s in github.requests)
    (job,) = align_jobs(service)
    assert job.state is JobState.DONE and job.attempts == 1 and job.retries >= 2
    assert "transient failure 2, retry in" in service.log_text()
    assert_no_traceback(service)


@pytest.mark.slow
def test_an_outage_past_the_retry_horizon_gives_up_once(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service = make_service(**FAST, ALIGNBOT_GITHUB_RETRY_HORIZON="3")
    github.outage(r"^/_codeload/", seconds=600, status=502)  # the archive host is down
    head = open_pull(github, service)
    wait_for(lambda: finished(service), TIMEOUT, "the job to give up")

    (job,) = align_jobs(service)
    assert job.state is JobState.FAILED and job.error is not None
    assert job.error.startswith("gave up after ") and "(retry horizon 3 s)" in job.error
    assert "TransientError" in job.error and "502" in job.error
    log = service.log_text()
    prefix = f"job {job.id} (align {OWNER}/{REPO}#{NUMBER}): failed: gave up after "
    assert log.count(prefix) == 1
    assert_no_traceback(service)
    if not hasattr(alignment.AlignmentJob, "give_up"):
        pytest.skip("bot/alignment.py has no give_up yet: the check run stays in progress")
    (run,) = github.check_runs_for(OWNER, REPO, head)  # created before the download failed
    assert run.status == "completed" and run.conclusion == "failure"


@pytest.mark.slow
def test_a_config_over_1_mb_fails_the_check_without_crashing(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service = make_service()
    seed(github, BUGGY)
    base = _files(ROOT / "examples" / "fastops")
    tree = {**base, "fastops.py": BUGGY.read_bytes(),
            CONFIG: base[CONFIG] + b"# padding\n" * 110_000}
    assert len(tree[CONFIG]) > 1024 * 1024
    head = _sha(tree)
    github.push(OWNER, REPO, NUMBER, head, tree=tree, files=[
        {"filename": "fastops.py", "status": "modified",
         "patch": _patch("fastops.py", base["fastops.py"], tree["fastops.py"])}])
    deliver_opened(github, service, head)
    wait_for(lambda: finished(service), TIMEOUT, "the job")

    assert any(status == 403 for method, path, status in github.requests
               if path.endswith("/contents/" + CONFIG))  # GitHub refused it as too large
    assert_no_traceback(service)
    (run,) = github.check_runs_for(OWNER, REPO, head)  # the pull request is told why
    assert run.status == "completed" and run.conclusion == "failure"
    text = " ".join(str(run.output.get(key) or "") for key in ("title", "summary", "text"))
    assert "1 MB" in text and CONFIG in text


def quiet_pull(github: Any, base: dict[str, bytes], head: dict[str, bytes],
               association: str = "MEMBER") -> str:
    """Pull request #1 from ``base`` to ``head``, changing only NOTES (its check needs no
    sandbox), delivered as opened to nobody yet; its head sha."""
    return service_open_pull(github, base, {**head, "NOTES": b"notes\n"}, title="Notes",
                             association=association)


def check_text(run: Any) -> str:
    return " ".join(str(run.output.get(key) or "") for key in ("title", "summary", "text"))


@pytest.mark.slow
@pytest.mark.parametrize("known", [True, False])
def test_webhooks_for_an_installation_github_does_not_know_log_one_line(
        github_server: Any, make_service: Any, known: bool) -> None:
    github = github_server
    service = make_service()
    base = _files(ROOT / "examples" / "fastops")
    quiet_pull(github, base, base)
    opened = github.webhook("pull_request.opened", OWNER, REPO, number=NUMBER)
    made = github.add_comment(OWNER, REPO, NUMBER, "/help", "mia")
    commented = github.webhook("issue_comment.created", OWNER, REPO, comment_id=made.id)
    installation = INSTALLATION
    if known:  # the App was uninstalled after GitHub sent these
        github.remove_installation(INSTALLATION)
    else:  # webhooks naming an installation that was never this App's
        installation = 999_999
        for payload in (opened, commented):
            payload["installation"]["id"] = installation
    for event, payload in (("pull_request", opened), ("issue_comment", commented)):
        assert service.deliver(github, event, payload).status_code == 202
    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        queue = SqlJobQueue(engine)
        wait_for(lambda: len(queue.list()) == 2 and all(
            job.state in (JobState.DONE, JobState.FAILED) for job in queue.list()),
            TIMEOUT, "both jobs to end")
    finally:
        engine.dispose()

    assert_no_traceback(service)
    assert github.count("POST", rf"/app/installations/{installation}/access_tokens$") == 1
    said = [line for line in service.log_text().splitlines()
            if f"does not know installation {installation}" in line]
    assert len(said) == 2, said  # one line for each webhook's job
    assert github.check_runs_for(OWNER, REPO) == []
    assert [c for c in github.comments_on(OWNER, REPO, NUMBER) if c.user.type == "Bot"] == []


@pytest.mark.slow
@pytest.mark.parametrize("target", ["/etc/alignbot.yml", "../../alignbot.yml", "missing.yml"])
def test_a_config_that_is_a_symbolic_link_out_of_the_repository_fails_the_check(
        github_server: Any, make_service: Any, target: str) -> None:
    github = github_server
    service = make_service()
    base = _files(ROOT / "examples" / "fastops")
    head = deliver_opened(github, service, quiet_pull(github, base, {
        **base, CONFIG: Link(target.encode())}))
    wait_for(lambda: finished(service), TIMEOUT, "the job")

    assert_no_traceback(service)
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.status == "completed" and run.conclusion == "failure"
    text = check_text(run)
    assert f"{CONFIG} is a symbolic link to '{target}'" in text and "regular file" in text
    assert align_jobs(service)[-1].state is JobState.DONE
    assert any(f"{target[:12]}" in c.body for c in github.comments_on(OWNER, REPO, NUMBER))


@pytest.mark.slow
def test_a_config_linked_to_a_file_of_the_repository_is_read(
        github_server: Any, make_service: Any) -> None:
    github = github_server
    service = make_service()
    base = _files(ROOT / "examples" / "fastops")
    head = deliver_opened(github, service, quiet_pull(github, base, {
        **base, "config/alignbot.yml": base[CONFIG], CONFIG: Link(b"../config/alignbot.yml")}))
    wait_for(lambda: finished(service), TIMEOUT, "the job")
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert run.conclusion == "success", check_text(run)


@pytest.mark.slow
@pytest.mark.parametrize("unreadable", ["too large", "a link out of the repository"])
def test_an_unreadable_base_config_leaves_trust_at_its_defaults_and_ends_visibly(
        github_server: Any, make_service: Any, unreadable: str) -> None:
    """The trust gate reads the base branch's config; GitHub will not hand it over. Trust
    defaults apply (an outsider's pull request waits), and the head's check run says so."""
    github = github_server
    service = make_service()
    base = _files(ROOT / "examples" / "fastops")
    broken = (base[CONFIG] + b"# padding\n" * 110_000 if unreadable == "too large"
              else Link(b"/etc/alignbot.yml"))
    head = deliver_opened(github, service, quiet_pull(
        github, {**base, CONFIG: broken}, base, association="CONTRIBUTOR"))
    wait_for(lambda: finished(service), TIMEOUT, "the job")

    assert_no_traceback(service)
    (job,) = align_jobs(service)
    assert job.state is JobState.DONE, job.error
    (run,) = github.check_runs_for(OWNER, REPO, head)
    assert (run.status, run.conclusion) == ("completed", "action_required")
    assert "/ok-to-test" in check_text(run) and head[:12] in check_text(run)
    log = service.log_text()
    assert log.count("trust defaults apply") == 1
