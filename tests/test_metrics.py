"""bot/metrics.py: ``GET /metrics`` of a real `alignbot serve` counts exactly what a test did
to it (signed deliveries, jobs, a sandboxed check, every GitHub request by route, the queue
of the shared database); registries of two apps never mix; labels stay bounded."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from service import OWNER, REPO, SECRET, Service, completed, open_pull
from sqlalchemy import update

from alignbot.bot.api_routes import DOWNLOAD, ROUTES
from alignbot.bot.demo import _files, wait_for
from alignbot.bot.errors import TransientError
from alignbot.bot.github import RateLimited
from alignbot.bot.metrics import Metrics, delivery_outcome, job_outcome, sandbox_outcome
from alignbot.bot.queue import JobRequest, SqlJobQueue
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.storage import JOBS, make_engine, transaction, utcnow
from alignbot.bot.webhooks import Acceptance
from alignbot.bot.worker import JobSuperseded

ROOT = Path(__file__).resolve().parent.parent
# an op file changed, without the bug the example's pull request plants: the engine runs in
# the sandbox and finds nothing (a finding would be minimized, which takes a minute more)
TOUCHED = (ROOT / "examples" / "fastops" / "fastops.py").read_bytes() + b"\n# faster now\n"
CONFIG = b"""candidate:
  prelude: |
    import torch
    import fastops
    fastops.enable()
ops:
  - paths: ["fastops.py"]
    specs: ["activations.softplus"]
draws: 2
"""
JWT_ROUTES = {"/app", "/app/installations/{installation_id}/access_tokens"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (name, sorted labels) -> value."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def scrape(service: Service) -> dict[Any, float]:
    reply = httpx.get(f"{service.url}/metrics", timeout=30)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(reply.text)


@pytest.mark.slow
def test_metrics_count_what_the_service_did(github_server: Any, make_service: Any) -> None:
    github = github_server
    base = {**_files(ROOT / "examples" / "fastops"), ".github/alignbot.yml": CONFIG}
    checked = open_pull(github, base, {**base, "fastops.py": TOUCHED}, number=1)
    # no op file changed: a check run without a sandbox
    quiet = [open_pull(github, base, {**base, "NOTES": f"{n}\n".encode()}, number=n)
             for n in (2, 3)]
    service: Service = make_service()
    opened = [github.webhook("pull_request.opened", OWNER, REPO, number=n) for n in (1, 2, 3)]
    headers, body = github.delivery("pull_request", opened[0], SECRET)
    assert httpx.post(f"{service.url}/webhook", content=body, headers=headers).status_code == 202
    for payload in opened[1:]:
        assert service.deliver(github, "pull_request", payload).status_code == 202
    again = httpx.post(f"{service.url}/webhook", content=body, headers=headers)
    assert again.json()["status"] == "duplicate"
    closed = github.webhook("pull_request.closed", OWNER, REPO, number=2)
    assert service.deliver(github, "pull_request", closed).json()["status"] == "ignored"
    forged, forged_body = github.delivery("pull_request", opened[1], "not the secret")
    assert httpx.post(f"{service.url}/webhook", content=forged_body,
                      headers=forged).status_code == 401

    for number, sha in enumerate((checked, *quiet), start=1):
        wait_for(lambda n=number, sha=sha: completed(github, sha, number=n), 120,
                 "the check runs")
    wait_for(lambda: value(scrape(service), "alignbot_job_duration_seconds_count",
                           kind="align", outcome="done") == 3, 30, "the jobs' durations")

    # a job written by another process (this test) into the shared database: the service's
    # gauges read the database, so they show it; one running for 100 s
    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        queue = SqlJobQueue(engine)
        later = queue.enqueue(JobRequest("reminder-sweep", "elsewhere/repo"))
        stuck = queue.enqueue(JobRequest("command", "elsewhere/repo#1"))
        with transaction(engine) as conn:
            conn.execute(update(JOBS).where(JOBS.c.id == later).values(
                available_at=utcnow() + timedelta(hours=1)))
            conn.execute(update(JOBS).where(JOBS.c.id == stuck).values(
                state="running", started_at=utcnow() - timedelta(seconds=100)))
        found = scrape(service)
    finally:
        engine.dispose()

    assert value(found, "alignbot_webhook_deliveries_total", event="pull_request",
                 outcome="accepted") == 3
    assert value(found, "alignbot_webhook_deliveries_total", event="pull_request",
                 outcome="duplicate") == 1
    assert value(found, "alignbot_webhook_deliveries_total", event="pull_request",
                 outcome="ignored") == 1
    assert value(found, "alignbot_webhook_deliveries_total", event="unverified",
                 outcome="bad_signature") == 1
    assert sum(v for (name, _), v in found.items()
               if name == "alignbot_webhook_deliveries_total") == 6
    assert value(found, "alignbot_sandbox_runs_total", outcome="ok") == 1
    assert sum(v for (name, _), v in found.items() if name == "alignbot_sandbox_runs_total") == 1
    assert value(found, "alignbot_queue_up") == 1
    assert value(found, "alignbot_queue_jobs", kind="align", state="queued") == 0
    assert value(found, "alignbot_queue_jobs", kind="reminder-sweep", state="queued") == 1
    assert value(found, "alignbot_queue_oldest_job_age_seconds", kind="reminder-sweep",
                 state="queued") == 0  # not due for an hour
    assert value(found, "alignbot_queue_jobs", kind="command", state="running") == 1
    assert 100 <= value(found, "alignbot_queue_oldest_job_age_seconds", kind="command",
                        state="running") < 160

    # every request GitHub saw, counted once under its route's template and status
    seen = Counter((e.method, DOWNLOAD if e.template and e.template.startswith("/_codeload")
                    else e.template, str(e.status)) for e in github.exchanges)
    counted = Counter({(dict(labels)["method"], dict(labels)["route"], dict(labels)["status"]):
                       int(v) for (name, labels), v in found.items()
                       if name == "alignbot_github_requests_total"})
    assert counted == seen, (counted, seen)
    assert ("POST", "/repos/{owner}/{repo}/check-runs", "201") in counted
    assert counted[("GET", DOWNLOAD, "200")] == 1
    assert not any(route == "other" for _, route, _ in counted)
    # one worker thread: the last answer was to the installation's token, whose budget
    # every request but the App's own (JWT) ones spent
    spent = sum(1 for e in github.exchanges if e.template not in JWT_ROUTES)
    assert value(found, "alignbot_github_rate_limit_remaining", resource="core") == 5000 - spent
    assert github.errors == []
    text = httpx.get(f"{service.url}/metrics").text
    for secret in (SECRET, github.private_key_pem.splitlines()[1], *github.tokens):
        assert secret not in text
    assert OWNER not in text and REPO not in text  # no repository in any label


def test_two_apps_count_apart() -> None:
    first, second = Metrics(), Metrics()
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "d-1"}
    first.delivery(headers, Acceptance(202, {"status": "queued", "jobs": 1}, (1,)))
    assert value(samples(first.exposition().decode()), "alignbot_webhook_deliveries_total",
                 event="pull_request", outcome="accepted") == 1
    assert value(samples(second.exposition().decode()), "alignbot_webhook_deliveries_total",
                 event="pull_request", outcome="accepted") == 0


def test_labels_stay_bounded() -> None:
    metrics = Metrics()
    for n in range(50):
        metrics.delivery({"X-GitHub-Event": f"made-up-{n}", "X-GitHub-Delivery": str(n)},
                         Acceptance(200, {"status": "ignored", "jobs": 0}))
        metrics.github_request("GET", f"/repos/o{n}/r/pulls/{n}?page=2", 200,
                               {"x-ratelimit-remaining": "10"})
        metrics.github_request("GET", f"/made/up/{n}", 404, {})
    found = samples(metrics.exposition().decode())
    assert value(found, "alignbot_webhook_deliveries_total", event="other",
                 outcome="ignored") == 50
    assert value(found, "alignbot_github_requests_total", method="GET",
                 route="/repos/{owner}/{repo}/pulls/{pull_number}", status="200") == 50
    assert value(found, "alignbot_github_requests_total", method="GET", route="other",
                 status="404") == 50
    assert len([key for key in found if key[0] == "alignbot_github_requests_total"]) == 2


def test_every_route_template_matches_its_own_example() -> None:
    for route in ROUTES:
        path = route.template.format(owner="o", repo="r", path="a/b.py", ref="main",
                                     installation_id=1, username="u", pull_number=2,
                                     issue_number=3, comment_id=4, check_run_id=5,
                                     basehead="main...topic")
        metrics = Metrics()
        metrics.github_request(route.method, path, 200, {})
        assert value(samples(metrics.exposition().decode()), "alignbot_github_requests_total",
                     method=route.method, route=route.template, status="200") == 1, route


def test_a_database_that_cannot_answer_fails_no_scrape(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'missing' / 'no.db'}")
    found = samples(Metrics(engine).exposition().decode())
    assert value(found, "alignbot_queue_up") == 0


def test_outcomes() -> None:
    assert delivery_outcome(Acceptance.error(401, "bad")) == "bad_signature"
    assert delivery_outcome(Acceptance.error(400, "bad")) == "malformed"
    assert delivery_outcome(Acceptance(200, {"status": "pong", "jobs": 0})) == "pong"

    def result(report: dict[str, Any] | None, code: int | None, reason: str | None
               ) -> SandboxResult:
        return SandboxResult(report, code, reason, "", "", 1.0)

    assert sandbox_outcome(result({"findings": []}, 0, None)) == "ok"
    assert sandbox_outcome(result({"findings": [{}]}, 1, None)) == "findings"
    assert sandbox_outcome(result(None, None, "the engine ran past the 60 s wall-clock limit")
                           ) == "timeout"
    assert sandbox_outcome(result(None, 1, "refused: no")) == "refused"
    assert sandbox_outcome(result(None, 137, "the engine was killed by SIGKILL")) == "killed"
    assert sandbox_outcome(result(None, 1, "setup command `x` failed with exit status 1")
                           ) == "setup_failed"
    assert sandbox_outcome(result(None, 3, "the engine stopped with exit status 3")) == "crash"
    assert job_outcome(None) == "done"
    assert job_outcome(ValueError("x")) == "failed"
    assert job_outcome(JobSuperseded("job 1 was superseded")) == "superseded"
    assert job_outcome(TransientError("GitHub answered 502")) == "transient"
    assert job_outcome(RateLimited("limit", utcnow())) == "rate_limited"


def test_a_process_without_the_web_app_serves_its_own_registry() -> None:
    """What a worker process does: its registry on a port of its own."""
    from alignbot.bot.demo import free_port

    metrics, port = Metrics(), free_port()
    metrics.jobs.labels("align", "done").observe(1.5)
    server, thread = metrics.serve_http(port, "127.0.0.1")
    try:
        found = samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    finally:
        server.shutdown()
        thread.join(timeout=5)
    assert value(found, "alignbot_job_duration_seconds_count", kind="align", outcome="done") == 1
    assert value(found, "alignbot_job_duration_seconds_sum", kind="align", outcome="done") == 1.5


def test_reminders_posted_by_a_sweep_job_are_counted(github_server: Any,
                                                     tmp_path: Path) -> None:
    from reminders_world import catalogued_world

    from alignbot.bot.reminders import JOB_KIND, enqueue_due
    from alignbot.bot.worker import Worker

    world = catalogued_world(github_server, tmp_path)
    queue, metrics = SqlJobQueue(world.engine), Metrics(world.engine)
    assert enqueue_due(world.engine, queue, clock=world.clock, force=True)
    worker = Worker(queue, {JOB_KIND: world.job()})
    metrics.instrument(worker.handlers)
    while worker.run_once(only_own=True):
        pass
    posted = [c for c in github_server.comments.values() if c.user.login == "alignbot[bot]"]
    found = samples(metrics.exposition().decode())
    assert posted and value(found, "alignbot_reminders_posted_total") == len(posted)
    assert value(found, "alignbot_job_duration_seconds_count", kind=JOB_KIND,
                 outcome="done") >= 1
    assert value(found, "alignbot_queue_jobs", kind=JOB_KIND, state="queued") == 0
