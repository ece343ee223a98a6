"""bot/worker.py: running handlers, failures, retries, supersede and restart recovery."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from bot.models import create_all, make_engine
from bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from bot.worker import JobSuperseded, TransientError, Worker, ensure_current


@pytest.fixture()
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path / 'worker.db'}")
    create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture()
def queue(engine: Engine) -> SqlJobQueue:
    return SqlJobQueue(engine)


def state(queue: SqlJobQueue, job_id: int) -> JobRecord:
    job = queue.get(job_id)
    assert job is not None
    return job


def wait_for(condition: Callable[[], bool], seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_handler_result_is_recorded(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(JobRequest("align", "o/r#1", {"sha": "abc"}))
    worker = Worker(queue, {"align": lambda job: {"checked": job.payload["sha"]}})
    assert worker.run_once()
    assert not worker.run_once()  # nothing left
    job = state(queue, job_id)
    assert (job.state, job.result, job.attempts) == (JobState.DONE, {"checked": "abc"}, 1)


def test_an_exception_fails_the_job_with_its_text(queue: SqlJobQueue) -> None:
    def broken(job: JobRecord) -> dict[str, Any]:
        raise ValueError("no ops to check")

    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    assert Worker(queue, {"align": broken}).run_once()
    job = state(queue, job_id)
    assert (job.state, job.error) == (JobState.FAILED, "ValueError: no ops to check")
    assert job.attempts == 1  # not retried


def test_a_transient_exception_is_retried_once(queue: SqlJobQueue) -> None:
    calls: list[int] = []

    def flaky(job: JobRecord) -> dict[str, Any]:
        calls.append(job.attempts)
        raise TransientError("GitHub answered 502")

    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    worker = Worker(queue, {"align": flaky})
    assert worker.run_once()
    assert state(queue, job_id).state is JobState.QUEUED
    assert worker.run_once()
    assert not worker.run_once()
    job = state(queue, job_id)
    assert (job.state, job.error, calls) == (
        JobState.FAILED, "TransientError: GitHub answered 502", [1, 2],
    )


def test_a_transient_failure_then_success(queue: SqlJobQueue) -> None:
    class Timeout(Exception):
        transient = True

    def once_flaky(job: JobRecord) -> dict[str, Any]:
        if job.attempts == 1:
            raise Timeout("read timed out")
        return {"ok": True}

    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    worker = Worker(queue, {"align": once_flaky})
    while worker.run_once():
        pass
    assert state(queue, job_id).state is JobState.DONE


def test_a_result_that_is_not_json_fails_the_job(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    Worker(queue, {"align": lambda job: {"when": object()}}).run_once()
    job = state(queue, job_id)
    assert job.state is JobState.FAILED and job.error is not None
    assert job.error.startswith("TypeError")


def test_an_unknown_kind_fails(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(JobRequest("mystery", "x"))
    Worker(queue, {}).run_once()
    assert state(queue, job_id).error == "no handler for job kind 'mystery'"


def test_a_job_superseded_while_running_is_not_failed_or_done(queue: SqlJobQueue) -> None:
    def pushed_meanwhile(job: JobRecord) -> dict[str, Any]:
        queue.enqueue(JobRequest("align", job.key, {"sha": "new"}, supersede=True))
        return {"posted": "stale"}

    def pushed_then_checked(job: JobRecord) -> dict[str, Any]:
        queue.enqueue(JobRequest("align", job.key, {"sha": "newer"}, supersede=True))
        ensure_current()  # raises JobSuperseded: the handler stops before posting
        raise AssertionError("not reached")

    first = queue.enqueue(JobRequest("align", "o/r#1", {"sha": "old"}))
    Worker(queue, {"align": pushed_meanwhile}).run_once()
    job = state(queue, first)
    assert (job.state, job.result, job.error) == (JobState.SUPERSEDED, None, None)

    second = queue.list(state=JobState.QUEUED)[0].id
    Worker(queue, {"align": pushed_then_checked}).run_once()
    job = state(queue, second)
    assert (job.state, job.error) == (JobState.SUPERSEDED, None)
    assert len(queue.list(state=JobState.QUEUED)) == 1


def test_ensure_current_outside_a_worker_does_nothing() -> None:
    ensure_current()
    assert issubclass(JobSuperseded, Exception)


def test_jobs_survive_a_restart(database_url_engine: tuple[str, Engine]) -> None:
    url, engine = database_url_engine
    job_id = SqlJobQueue(engine).enqueue(JobRequest("align", "o/r#1"))
    dead = SqlJobQueue(make_engine(url))
    assert dead.claim("old-process") is not None  # and then the process died
    dead.engine.dispose()

    queue = SqlJobQueue(engine)
    seen: list[int] = []

    def handler(job: JobRecord) -> dict[str, Any]:
        seen.append(job.attempts)
        return {"ok": True}

    worker = Worker(queue, {"align": handler}, poll_interval=0.02)
    worker.start()
    try:
        wait_for(lambda: state(queue, job_id).state is JobState.DONE)
    finally:
        assert worker.stop(timeout=5)
    assert seen == [2]


@pytest.fixture()
def database_url_engine(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    engine = make_engine(url)
    create_all(engine)
    yield url, engine
    engine.dispose()


def test_threads_run_every_job_once(queue: SqlJobQueue) -> None:
    ids = [queue.enqueue(JobRequest("align", f"o/r#{n}")) for n in range(40)]
    runs: list[int] = []
    lock = threading.Lock()

    def handler(job: JobRecord) -> None:
        with lock:
            runs.append(job.id)

    worker = Worker(queue, {"align": handler}, concurrency=4, poll_interval=0.02)
    worker.start()
    try:
        wait_for(lambda: len(queue.list(state=JobState.DONE)) == len(ids))
    finally:
        assert worker.stop(timeout=5)
    assert sorted(runs) == ids
    assert {job.worker for job in queue.list()} <= {f"{worker.name}/{i}" for i in range(4)}


def test_notify_wakes_an_idle_worker(queue: SqlJobQueue) -> None:
    worker = Worker(queue, {"align": lambda job: None}, poll_interval=30)
    worker.start()
    try:
        time.sleep(0.05)  # the thread is now waiting for its next poll, 30 s away
        job_id = queue.enqueue(JobRequest("align", "o/r#1"))
        worker.notify()
        wait_for(lambda: state(queue, job_id).state is JobState.DONE, seconds=3)
    finally:
        assert worker.stop(timeout=5)


def test_stop_gives_up_on_a_stuck_handler(queue: SqlJobQueue) -> None:
    release = threading.Event()
    queue.enqueue(JobRequest("align", "o/r#1"))

    def stuck(job: JobRecord) -> None:
        release.wait(10)

    worker = Worker(queue, {"align": stuck}, poll_interval=0.02)
    worker.start()
    wait_for(lambda: bool(queue.list(state=JobState.RUNNING)))
    assert not worker.stop(timeout=0.1)  # still running; a restart would requeue it
    release.set()
    assert worker.stop(timeout=5)
