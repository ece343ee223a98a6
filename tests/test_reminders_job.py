"""bot/reminders/job.py: the pass that queues one ``reminder-sweep`` job per due repository of
every live installation, and the jobs run by a real worker on the real queue: one
installation's or repository's failure stays in its own job."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reminders_world import (
    ORG,
    REPO,
    TRACKER,
    World,
    catalogue,
    catalogued_world,
    config_text,
    new_world,
)
from sqlalchemy import Engine, insert

from alignbot.bot.jobs import ALIGN, REMINDER_SWEEP
from alignbot.bot.periodic import Periodic
from alignbot.bot.queue import JobRequest, JobState, SqlJobQueue
from alignbot.bot.reminders import SweepHooks, enqueue_due, sweep_request
from alignbot.bot.storage import INSTALLATIONS, make_engine, transaction
from alignbot.bot.testing.github import GitHubServer
from alignbot.bot.worker import Worker

world = pytest.fixture(catalogued_world, name="world")


def _other_installation(w: World, installation_id: int, account: str, *, on_github: bool = True,
                        **row: Any) -> str:
    """Another installation with one repository that has a stale pull request: in the
    database (``row``: deleted, suspended), and on GitHub unless ``on_github`` is False."""
    repo = f"{account}/lib"
    if on_github:
        w.server.add_installation(installation_id, account)
        w.server.add_repo(account, "lib", installation_id, files_by_ref={
            "c" * 40: {".github/alignbot.yml": config_text(w.t0)}})
        w.server.add_pull(account, "lib", 1, "d" * 40, "c" * 40, "Old", "alice",
                          created_at=w.t0 - timedelta(days=30),
                          updated_at=w.t0 - timedelta(days=30))
        w.server.repo(account, "lib").commits["d" * 40].date = w.t0 - timedelta(days=30)
    with transaction(w.engine) as conn:
        conn.execute(insert(INSTALLATIONS).values(id=installation_id, account_login=account,
                                                  repositories=[repo], **row))
    return repo


def _tokens(server: GitHubServer, installation_id: int) -> int:
    return server.count("POST", rf"^/app/installations/{installation_id}/access_tokens$")


def _sweep_keys(engine: Engine) -> list[str]:
    return [job.key for job in SqlJobQueue(engine).list(kind=REMINDER_SWEEP)]


# --------------------------------------------------------------------------- the pass


def test_two_passes_in_a_row_queue_one_sweep_per_repository(world: World) -> None:
    queue = SqlJobQueue(world.engine)
    first = enqueue_due(world.engine, queue, clock=world.clock)
    second = enqueue_due(world.engine, queue, clock=world.clock)
    assert first == second and len(set(first)) == 2
    assert sorted(_sweep_keys(world.engine)) == [REPO, f"{ORG}/{TRACKER}"]
    assert world.server.requests == []  # queueing asks GitHub nothing
    # claimed and running: still no second job for the repository
    assert queue.claim("w", [REMINDER_SWEEP]) is not None
    assert enqueue_due(world.engine, queue, clock=world.clock) == first
    assert len(_sweep_keys(world.engine)) == 2


@pytest.mark.slow
def test_a_swept_repository_is_not_queued_again_until_its_next_week(world: World) -> None:
    world.sweep()
    assert world.posted_numbers() == sorted(world.expected)
    queue = SqlJobQueue(world.engine)
    assert enqueue_due(world.engine, queue, clock=world.clock) == []
    later = world.at(world.t0 + timedelta(days=7))
    assert len(enqueue_due(world.engine, queue, clock=later.clock)) == 2


def test_a_deleted_installation_gets_no_job_and_no_token(world: World) -> None:
    w = world
    deleted = _other_installation(w, 1001, "gone-org", deleted=True)
    suspended = _other_installation(w, 1002, "paused-org", suspended=True)
    report = w.sweep()
    assert w.posted_numbers() == sorted(w.expected)  # the live installation's reminders
    assert deleted.lower() not in _sweep_keys(w.engine)
    assert suspended.lower() not in _sweep_keys(w.engine)
    assert _tokens(w.server, 1001) == _tokens(w.server, 1002) == 0
    assert w.server.comments_on("gone-org", "lib", 1) == []
    assert report.stopped == [] and report.pending == []
    # a sweep queued before the installation was deleted asks GitHub nothing either
    queue = SqlJobQueue(w.engine)
    job_id = queue.enqueue(sweep_request(1001, deleted))
    assert Worker(queue, {REMINDER_SWEEP: w.job()}).run_once()
    record = queue.get(job_id)
    assert record is not None and record.state == JobState.DONE
    assert record.result is not None and record.result["not_installed"]
    assert _tokens(w.server, 1001) == 0


def test_an_installation_github_no_longer_knows_stops_only_its_own_sweep(world: World) -> None:
    """Uninstalled while the ``installation.deleted`` webhook was missed: its token cannot be
    minted. That fails its repository's job, before any other installation's (lower id)."""
    w = world
    repo = _other_installation(w, 1001, "gone-org", on_github=False)
    report = w.sweep()
    assert w.posted_numbers() == sorted(w.expected)
    ((stopped, why),) = report.stopped
    assert stopped == repo and "404" in why
    assert _tokens(w.server, 1001) == 1
    assert w.sweep().stopped == []  # an hour before it is tried again (error_retry)


def test_a_refused_token_does_not_stop_another_installation(world: World) -> None:
    w = world
    repo = _other_installation(w, 1001, "refused-org")
    w.server.fail_next(r"^/repos/refused-org/", status=401, body={  # revoked early
        "message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
    report = w.sweep()
    assert w.posted_numbers() == sorted(w.expected)
    ((stopped, why),) = report.stopped
    assert stopped == repo and "refused the token" in why
    assert _tokens(w.server, 1001) == 1
    # the token was dropped; the next pass sweeps the repository again with a new one
    again = w.sweep()
    assert again.stopped == [] and again.repos_done == [repo]
    assert _tokens(w.server, 1001) == 2
    assert len(w.server.comments_on("refused-org", "lib", 1)) == 1


# --------------------------------------------------------------------------- replicas, processes


def test_two_replicas_at_once_post_each_reminder_once(github_server: GitHubServer,
                                                      database_url: str) -> None:
    engines = [make_engine(database_url), make_engine(database_url)]
    w = new_world(github_server, engines[0])
    catalogue(w)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def replica(engine: Engine) -> None:
        try:
            start.wait()
            for _ in range(3):
                w.sweep(engine, hooks=SweepHooks(
                    after_post=lambda *_: threading.Event().wait(0.002)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replica, args=(e,)) for e in engines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert w.posted_numbers() == sorted(w.expected)
    assert sorted(r["number"] for r in w.rows()) == sorted(w.expected)
    keys = _sweep_keys(engines[0])
    assert sorted(set(keys)) == sorted([REPO, f"{ORG}/{TRACKER}"])
    for engine in engines:
        engine.dispose()


def test_the_pass_on_a_timer_and_a_running_worker_sweep(world: World) -> None:
    queue = SqlJobQueue(world.engine)
    worker = Worker(queue, {REMINDER_SWEEP: world.job()}, poll_interval=0.05)
    timer = Periodic("reminder-pass", lambda: enqueue_due(world.engine, queue,
                                                          clock=world.clock), 0.05)
    worker.start()
    timer.start()
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while world.posted_numbers() != sorted(world.expected) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
    finally:
        assert timer.stop(timeout=10)
        assert worker.stop(timeout=10)
    assert world.posted_numbers() == sorted(world.expected)
    assert timer.runs >= 1 and len(_sweep_keys(world.engine)) == 2


def test_remind_sweep_command_runs_one_pass(github_server: GitHubServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from alignbot.bot.cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    w = new_world(github_server, make_engine(url))
    w.pr(1, 10)
    queue = SqlJobQueue(w.engine)
    other = queue.enqueue(JobRequest(kind=ALIGN, key="x/y#1"))
    for key, value in {"APP_ID": str(github_server.app_id),
                       "PRIVATE_KEY": github_server.private_key_pem, "WEBHOOK_SECRETS": "s",
                       "GITHUB_API_URL": github_server.url, "DATABASE_URL": url,
                       "GITHUB_WRITE_INTERVAL": "0"}.items():
        monkeypatch.setenv(f"ALIGNBOT_{key}", value)
    assert main(["remind-sweep"]) == 0
    assert "reminders posted: 1" in capsys.readouterr().out
    assert w.posted_numbers() == [1]
    assert main(["remind-sweep", "--force"]) == 0 and w.posted_numbers() == [1]
    assert "repositories finished: 1" in capsys.readouterr().out
    record = queue.get(other)  # another kind of job is left to the service
    assert record is not None and record.state == JobState.QUEUED


def test_the_benchmark_runs_on_a_tiny_organisation(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "reminders_sweep.py"
    spec = importlib.util.spec_from_file_location("reminders_sweep", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "figures.json"
    assert module.main(["--repos", "2", "--prs", "40", "--json", str(out)]) == 0
    (week,) = json.loads(out.read_text())["weeks"]
    assert week["reminders"] == 20 and week["writes"] == 20
    assert week["search"] == 2  # one page per repository
