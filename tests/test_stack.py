"""bot/stack.py: the App as deployed, one web process and three worker processes on one
PostgreSQL, the GitHub test server as GitHub. Fifteen pull requests in five repositories (more
than the six worker threads take at once), one worker SIGKILLed mid-job: every pull request
still gets exactly one completed check run and one comment."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from service import OWNER, SECRET
from sqlalchemy import Engine

from alignbot.bot.demo import INSTALLATION, wait_for
from alignbot.bot.jobs import ALIGN
from alignbot.bot.queue import JobState, SqlJobQueue
from alignbot.bot.stack import (
    WEB_ARGS,
    WORKER_ARGS,
    Stack,
    github_test_env,
    quick_check_config,
    seed_pull_requests,
)
from alignbot.bot.storage import make_engine

ROOT = Path(__file__).resolve().parent.parent
REPOS, PULLS = 5, 3


def _worker_pid(worker: str) -> int:
    """The process id in a worker's name (``host:pid:nonce/thread``)."""
    match = re.match(r"^[^:]*:(\d+):", worker)
    assert match, worker
    return int(match.group(1))


def _checks_done(metrics: str, kind: str = ALIGN) -> int:
    """How many check jobs (of ``kind``) a process's ``/metrics`` says it finished
    (``done``)."""
    for family in text_string_to_metric_families(metrics):
        if family.name == "alignbot_job_duration_seconds":
            return sum(int(sample.value) for sample in family.samples
                       if sample.name.endswith("_count")
                       and sample.labels == {"kind": kind, "outcome": "done"})
    return 0


def a_job_in_its_sandbox(engine: Engine, github: Any, timeout: float = 60) -> tuple[int, int]:
    """(job id, worker pid) of a running check whose check run is in progress, once there
    is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in SqlJobQueue(engine).list(kind=ALIGN, state=JobState.RUNNING):
            runs = github.check_runs_for(OWNER, job.payload["repo"].split("/")[1],
                                         job.payload["head_sha"])
            if runs and runs[0].status == "in_progress" and job.worker:
                return job.id, _worker_pid(job.worker)
        time.sleep(0.1)
    raise TimeoutError("no worker was in the middle of a check")


@pytest.mark.slow
@pytest.mark.services
def test_three_workers_one_killed_post_each_check_once(github_server: Any, postgres_url: str,
                                                       tmp_path: Path) -> None:
    github = github_server
    # each check spends a second and a half in its sandbox: slow enough to be killed mid-job
    heads = seed_pull_requests(github, OWNER, INSTALLATION, REPOS, PULLS, quick_check_config())
    env = github_test_env(github, postgres_url, ALIGNBOT_WORKERS="2",
                          ALIGNBOT_JOB_LEASE_SECONDS="5")
    engine = make_engine(postgres_url)
    with Stack(env, tmp_path / "stack", workers=3) as stack:
        for repo, number in heads:
            payload = github.webhook("pull_request.opened", OWNER, repo, number=number)
            headers, body = github.delivery("pull_request", payload, SECRET)
            reply = httpx.post(f"{stack.url}/webhook", content=body, headers=headers,
                               timeout=30)
            assert reply.status_code == 202, reply.text
        killed_job, pid = a_job_in_its_sandbox(engine, github)
        (victim,) = [w for w in stack.workers if w.pid == pid]
        victim.kill()

        queue = SqlJobQueue(engine)
        wait_for(lambda: len(queue.list(kind=ALIGN, state=JobState.DONE)) == len(heads), 90,
                 "every check to finish")
        assert [p.name for p in stack.exited()] == [victim.name]
        jobs = queue.list(kind=ALIGN)
        # each surviving worker's own /metrics counts exactly the checks it finished
        for worker in stack.workers:
            if worker is not victim:
                assert worker.metrics_url is not None
                done = sum(1 for job in jobs if _worker_pid(job.worker or "") == worker.pid)
                assert _checks_done(httpx.get(worker.metrics_url, timeout=10).text) == done
        web = httpx.get(f"{stack.url}/metrics", timeout=10).text
        assert 'alignbot_webhook_deliveries_total{event="pull_request",outcome="accepted"} ' \
            f"{float(len(heads))}" in web
    engine.dispose()

    assert len(jobs) == len(heads) and {job.state for job in jobs} == {JobState.DONE}
    rerun = next(job for job in jobs if job.id == killed_job)
    assert rerun.attempts >= 2 and _worker_pid(rerun.worker or "") != pid
    for (repo, number), sha in heads.items():
        (run,) = github.check_runs_for(OWNER, repo, sha)
        assert (run.status, run.conclusion) == ("completed", "failure"), (repo, number)
        (comment,) = github.comments_on(OWNER, repo, number)
        assert comment.user.login == "alignbot[bot]" and sha[:12] in comment.body
    assert "exit status 3" in comment.body


def test_compose_runs_the_same_topology() -> None:
    """compose.yaml (for Docker) and alignbot.bot.stack (without) start the same processes: the web
    role checked on /healthz, workers scaled, PostgreSQL checked with pg_isready."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "web", "worker"}
    assert services["web"]["command"] == ["alignbot", *WEB_ARGS]
    assert services["worker"]["command"] == ["alignbot", *WORKER_ARGS]
    assert "/healthz" in " ".join(services["web"]["healthcheck"]["test"])
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert services["worker"]["deploy"]["replicas"] >= 2
    for role in ("web", "worker"):
        url = services[role]["environment"]["ALIGNBOT_DATABASE_URL"]
        assert url.startswith("postgresql+psycopg://") and "@postgres:" in url
        assert services[role]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "'/src[app]'" in (ROOT / "Dockerfile").read_text()  # the app extra: psycopg too
    app_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["app"]
    assert any(req.startswith("psycopg[binary]") for req in app_extra)


@pytest.mark.slow
def test_the_stack_command_refuses_sqlite_in_one_line(github_server: Any,
                                                      tmp_path: Path) -> None:
    env = github_test_env(github_server, f"sqlite:///{tmp_path / 'alignbot.db'}")
    done = subprocess.run([sys.executable, "-m", "alignbot.bot.stack", "--workers", "2"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "alignbot worker shares the job queue with other processes, which needs " \
           "PostgreSQL" in done.stderr.splitlines()[-1]
    assert not (tmp_path / "alignbot.db").exists()  # refused before starting anything


@pytest.mark.slow
@pytest.mark.services
def test_the_stack_command_runs_until_sigterm(github_server: Any, postgres_url: str,
                                              tmp_path: Path) -> None:
    """``python -m alignbot.bot.stack`` (what scripts/stack.sh runs): it says where the web listens,
    answers there, and stops every process on SIGTERM."""
    proc = subprocess.Popen([sys.executable, "-m", "alignbot.bot.stack", "--workers", "2", "--logs",
                             str(tmp_path)], env=github_test_env(github_server, postgres_url),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.match(r"web: (http://127\.0\.0\.1:\d+) \(pid (\d+)\); workers: (\d+), (\d+);",
                         line)
        assert match, line
        assert httpx.get(f"{match.group(1)}/healthz", timeout=10).status_code == 200
        pids = [int(match.group(i)) for i in (2, 3, 4)]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["web.log", "worker-1.log",
                                                         "worker-2.log"]


def _state(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line for line in status.splitlines() if line.startswith("State:"))
