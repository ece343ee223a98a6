"""bot/worker.py: running handlers, failures, retries (backoff, rate limits, the horizon,
give_up), supersede, leases (heartbeat, reclaim, stop) and restart recovery."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from alignbot.bot.errors import TransientError
from alignbot.bot.github import FileTooLarge, RateLimited
from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.storage import JOBS, make_engine, migrate, transaction
from alignbot.bot.worker import (
    JobLost,
    JobSuperseded,
    JobTimedOut,
    RetryPolicy,
    Worker,
    ensure_current,
    retry_policy,
    stop_event,
)

FAST = RetryPolicy(horizon=60, base=0.01, cap=0.02, jitter=0)


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


def run_until(worker: Worker, queue: SqlJobQueue, job_id: int, *states: JobState,
              seconds: float = 10) -> JobRecord:
    """Run the worker's jobs as they come due until ``job_id`` is in one of ``states``."""
    deadline = time.monotonic() + seconds
    while (job := state(queue, job_id)).state not in states:
        assert time.monotonic() < deadline, f"job still {job.state} after {seconds} s"
        if not worker.run_once():
            time.sleep(0.01)
    return job


def available_at(engine: Engine, job_id: int) -> datetime:
    with transaction(engine) as conn:
        value: datetime = conn.execute(
            select(JOBS.c.available_at).where(JOBS.c.id == job_id)).scalar_one()
    return value


def make_due(engine: Engine, job_id: int) -> None:
    with transaction(engine) as conn:
        conn.execute(update(JOBS).where(JOBS.c.id == job_id)
                     .values(available_at=datetime.now(UTC) - timedelta(seconds=1)))


class Recording:
    """A handler that raises what it is given, and records give_up calls."""

    def __init__(self, queue: SqlJobQueue, *errors: Exception,
                 give_up_error: Exception | None = None) -> None:
        self.queue = queue
        self.errors = list(errors)
        self.calls: list[JobRecord] = []
        self.gave_up: list[tuple[JobRecord, str]] = []
        self.give_up_error = give_up_error

    def __call__(self, job: JobRecord) -> dict[str, Any]:
        self.calls.append(job)
        if self.errors:
            raise self.errors.pop(0)
        return {"ok": True}

    def give_up(self, job: JobRecord, reason: str) -> None:
        assert state(self.queue, job.id).state is JobState.RUNNING  # before it is failed
        self.gave_up.append((job, reason))
        if self.give_up_error is not None:
            raise self.give_up_error


def test_transient_failures_are_retried_without_spending_attempts(queue: SqlJobQueue) -> None:
    class Timeout(Exception):
        transient = True

    handler = Recording(queue, TransientError("GitHub answered 502"), Timeout("read timed out"))
    job_id = queue.enqueue(JobRequest("align", "o/r#1", {"sha": "abc"}))
    worker = Worker(queue, {"align": handler}, retry=FAST)
    assert worker.run_once()
    job = state(queue, job_id)
    assert (job.state, job.attempts, job.retries) == (JobState.QUEUED, 0, 1)
    assert job.error == "TransientError: GitHub answered 502"
    job = run_until(worker, queue, job_id, JobState.DONE)
    assert (job.attempts, job.retries, job.result) == (1, 2, {"ok": True})
    assert [call.attempts for call in handler.calls] == [1, 1, 1]
    assert [call.payload for call in handler.calls] == [{"sha": "abc"}] * 3
    assert handler.calls[2].first_failure_at == handler.calls[1].first_failure_at is not None
    assert handler.gave_up == []


def test_backoff_grows_with_jitter_within_bounds() -> None:
    policy = RetryPolicy(base=2, cap=60, jitter=0.25)
    rng = random.Random(7)
    for failures in range(1, 12):
        nominal = min(60, 2 * 2 ** (failures - 1))
        delays = [policy.delay(failures, rng) for _ in range(200)]
        assert all(0.75 * nominal <= d <= 1.25 * nominal for d in delays)
        assert max(delays) - min(delays) > 0.3 * nominal  # jittered, not one value
    assert RetryPolicy(base=2, cap=60, jitter=0).delay(3, rng) == 8
    with pytest.raises(ValueError):
        RetryPolicy(jitter=1)


def test_the_worker_backs_off_exponentially(engine: Engine, queue: SqlJobQueue) -> None:
    policy = RetryPolicy(horizon=3600, base=10, cap=80, jitter=0.25)
    handler = Recording(queue, *(TransientError(f"503 #{n}") for n in range(6)))
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    worker = Worker(queue, {"align": handler}, retry=policy, rng=random.Random(3))
    waits = []
    for _ in range(6):
        assert worker.run_once()
        before = datetime.now(UTC)
        waits.append((available_at(engine, job_id) - before).total_seconds())
        assert not worker.run_once()  # not due yet
        make_due(engine, job_id)
    for wait, nominal in zip(waits, [10, 20, 40, 80, 80, 80], strict=True):
        assert 0.75 * nominal - 1 <= wait <= 1.25 * nominal
    assert state(queue, job_id).attempts == 0 and state(queue, job_id).retries == 6


def test_past_the_horizon_the_job_gives_up_once(queue: SqlJobQueue,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(horizon=0.3, base=0.05, cap=0.1, jitter=0)
    handler = Recording(queue, *(TransientError("GitHub did not answer") for _ in range(100)))
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    worker = Worker(queue, {"align": handler}, retry=policy)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="alignbot.bot.worker"):
        job = run_until(worker, queue, job_id, JobState.FAILED)
    assert 0.3 <= time.monotonic() - started < 5
    assert len(handler.calls) >= 3 and job.attempts == 1  # the crash guard is untouched
    ((given, reason),) = handler.gave_up
    assert given.id == job_id and given.retries == len(handler.calls) - 1
    assert reason.startswith(f"gave up after {len(handler.calls)} tries over ")
    assert reason.endswith("(retry horizon 0.3 s): TransientError: GitHub did not answer")
    assert job.error == reason
    assert not worker.run_once()  # failed for good
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failed] == [f"job {job_id} (align o/r#1): failed: {reason}"]
    assert all(r.exc_info is None for r in caplog.records)  # no traceback


def test_a_rate_limit_reschedules_at_its_reset(engine: Engine, queue: SqlJobQueue,
                                               caplog: pytest.LogCaptureFixture) -> None:
    reset = datetime.now(UTC) + timedelta(minutes=30)
    handler = Recording(queue, RateLimited("GitHub rate limit (403)", reset))
    policy = RetryPolicy(horizon=0, rate_limit_jitter=4)  # a rate limit is not a failure
    job_id = queue.enqueue(JobRequest("align", "o/r#1", {"sha": "abc"}))
    worker = Worker(queue, {"align": handler}, retry=policy)
    with caplog.at_level(logging.INFO, logger="alignbot.bot.worker"):
        assert worker.run_once()
    job = state(queue, job_id)
    assert (job.state, job.attempts, job.retries, job.first_failure_at) == (
        JobState.QUEUED, 0, 0, None)
    assert job.error == "RateLimited: GitHub rate limit (403)"
    assert reset <= available_at(engine, job_id) <= reset + timedelta(seconds=4)
    assert not worker.run_once()  # not before the reset
    (line,) = caplog.records
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert "rate limited, rescheduled in" in line.getMessage()
    make_due(engine, job_id)
    job = run_until(worker, queue, job_id, JobState.DONE)
    assert job.attempts == 1 and handler.gave_up == []


def test_a_non_transient_failure_gives_up_at_once(queue: SqlJobQueue,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    handler = Recording(queue, ValueError("no ops to check"),
                        give_up_error=RuntimeError("GitHub is down too"))
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    with caplog.at_level(logging.INFO, logger="alignbot.bot.worker"):
        assert Worker(queue, {"align": handler}, retry=FAST).run_once()
    job = state(queue, job_id)
    assert (job.state, job.error) == (JobState.FAILED, "ValueError: no ops to check")
    assert [reason for _, reason in handler.gave_up] == ["ValueError: no ops to check"]
    give_up_line, failed_line = caplog.records
    assert give_up_line.getMessage() == (
        f"job {job_id} (align o/r#1): give_up failed: RuntimeError: GitHub is down too")
    assert give_up_line.exc_info is None
    assert failed_line.exc_info is not None  # a bug keeps its traceback


def test_an_expected_error_is_logged_without_a_traceback(queue: SqlJobQueue,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    handler = Recording(queue, FileTooLarge(".github/alignbot.yml", 2_000_000))
    with caplog.at_level(logging.INFO, logger="alignbot.bot.worker"):
        Worker(queue, {"align": handler}).run_once()
    assert state(queue, job_id).state is JobState.FAILED and len(handler.gave_up) == 1
    (line,) = caplog.records
    assert line.exc_info is None and "is too large" in line.getMessage()


def test_a_superseded_job_does_not_give_up(queue: SqlJobQueue) -> None:
    handler = Recording(queue)

    def pushed_then_failed(job: JobRecord) -> dict[str, Any]:
        queue.enqueue(JobRequest("align", job.key, {"sha": "new"}, supersede=True))
        raise ValueError("stale")

    pushed_then_failed.give_up = handler.give_up  # type: ignore[attr-defined]
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    Worker(queue, {"align": pushed_then_failed}).run_once()
    assert state(queue, job_id).state is JobState.SUPERSEDED and handler.gave_up == []


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


def test_run_once_may_leave_other_kinds_to_other_workers(queue: SqlJobQueue) -> None:
    other = queue.enqueue(JobRequest("align", "o/r#1"))
    mine = queue.enqueue(JobRequest("sweep", "o/r"))
    worker = Worker(queue, {"sweep": lambda job: {"swept": job.key}})
    assert worker.run_once(only_own=True) and not worker.run_once(only_own=True)
    assert state(queue, mine).result == {"swept": "o/r"}
    assert state(queue, other).state == JobState.QUEUED


def test_a_kind_at_its_limit_leaves_the_threads_to_other_kinds(queue: SqlJobQueue) -> None:
    release = threading.Event()
    started: list[str] = []

    def slow(job: JobRecord) -> None:
        started.append(job.key)
        release.wait(10)

    def quick(job: JobRecord) -> None:
        started.append(job.key)

    sweeps = [queue.enqueue(JobRequest("sweep", f"o/r{n}")) for n in range(3)]
    align = queue.enqueue(JobRequest("align", "o/r#1"))
    worker = Worker(queue, {"sweep": slow, "align": quick}, concurrency=3,
                    poll_interval=0.01, limits={"sweep": 1})
    worker.start()
    try:
        # the three threads claim side by side: the check and the first sweep in either order
        wait_for(lambda: state(queue, align).state == JobState.DONE and "o/r0" in started)
        assert sorted(started) == ["o/r#1", "o/r0"]  # one sweep at a time; the check went past
        assert [state(queue, s).state for s in sweeps] == [
            JobState.RUNNING, JobState.QUEUED, JobState.QUEUED]
        release.set()
        wait_for(lambda: all(state(queue, s).state == JobState.DONE for s in sweeps))
    finally:
        release.set()
        assert worker.stop(timeout=10)
    with pytest.raises(ValueError, match="limit"):
        Worker(queue, {}, limits={"sweep": 0})


def test_the_retry_policy_comes_from_the_settings() -> None:
    from alignbot.bot.settings import Settings

    settings = Settings.model_construct(github_retry_horizon=90.0, github_retry_base=2.0,
                                        github_retry_cap=30.0)
    assert retry_policy(settings) == RetryPolicy(horizon=90, base=2, cap=30)


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


@pytest.mark.slow
@pytest.mark.parametrize("alone", [True, False])
def test_jobs_survive_a_restart(database_url_engine: tuple[str, Engine], alone: bool) -> None:
    """Alone on its database a worker requeues at start what a dead process left running;
    beside others it waits for the dead one's lease to expire."""
    url, engine = database_url_engine
    job_id = SqlJobQueue(engine).enqueue(JobRequest("align", "o/r#1"))
    dead = SqlJobQueue(make_engine(url))
    assert dead.claim("old-process") is not None  # and then the process died
    dead.engine.dispose()

    # a 2 s lease, 1 s between the two cases: room for a busy machine (parallel tests)
    queue = SqlJobQueue(engine, lease=2.0)
    seen: list[int] = []

    def handler(job: JobRecord) -> dict[str, Any]:
        seen.append(job.attempts)
        return {"ok": True}

    worker = Worker(queue, {"align": handler}, poll_interval=0.02, reclaim_interval=0.1,
                    alone=alone)
    started = time.monotonic()
    worker.start()
    try:
        wait_for(lambda: state(queue, job_id).state is JobState.DONE)
    finally:
        assert worker.stop(timeout=5)
    assert seen == [2]
    assert (time.monotonic() - started < 1.0) is alone


@pytest.mark.slow
def test_a_heartbeat_keeps_a_long_job_from_being_reclaimed(engine: Engine) -> None:
    queue = SqlJobQueue(engine, lease=0.6)
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    runs: list[int] = []

    def slow(job: JobRecord) -> dict[str, Any]:
        runs.append(job.attempts)
        time.sleep(2.0)  # more than three leases: only the heartbeat keeps it
        ensure_current()
        return {"ok": True}

    worker = Worker(queue, {"align": slow}, poll_interval=0.02, heartbeat=0.1)
    other = Worker(queue, {"align": slow}, poll_interval=0.02, reclaim_interval=0.1)
    worker.start()
    wait_for(lambda: state(queue, job_id).state is JobState.RUNNING)
    other.start()
    try:
        wait_for(lambda: state(queue, job_id).state is JobState.DONE, seconds=10)
    finally:
        assert worker.stop(timeout=5) and other.stop(timeout=5)
    assert runs == [1]


def test_a_worker_that_lost_its_job_stops_and_records_nothing(engine: Engine) -> None:
    """A worker stalled past its lease (here: its heartbeat never beats) finds the job taken
    over: the job's stop event is set, ``ensure_current`` raises ``JobLost``, and the new
    holder's result is the one recorded."""
    queue = SqlJobQueue(engine, lease=0.3)
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    raised: list[BaseException] = []

    def stalled(job: JobRecord) -> dict[str, Any]:
        time.sleep(0.5)  # past the lease
        assert len(queue.reclaim_expired()) == 1  # another worker's reclaim
        assert queue.claim("other/0") is not None  # … and its claim
        try:
            ensure_current()
        except JobLost as lost:
            raised.append(lost)
            raise
        return {"posted": "twice"}

    worker = Worker(queue, {"align": stalled}, heartbeat=60)
    assert worker.run_once()
    assert len(raised) == 1
    job = state(queue, job_id)
    assert (job.state, job.worker) == (JobState.RUNNING, "other/0")
    assert queue.complete(job_id, {"posted": "once"}, worker="other/0")


def test_a_superseded_job_is_told_to_stop_at_once(queue: SqlJobQueue) -> None:
    """The heartbeat finds a running job superseded and sets its stop event, which a long
    step (the sandbox) watches, long before that step would have ended."""
    queue.enqueue(JobRequest("align", "o/r#1", {"sha": "old"}))
    waited: list[float] = []

    def long_step(job: JobRecord) -> dict[str, Any]:
        stop = stop_event()
        assert stop is not None and not stop.is_set()
        queue.enqueue(JobRequest("align", job.key, {"sha": "new"}, supersede=True))
        started = time.monotonic()
        assert stop.wait(30)
        waited.append(time.monotonic() - started)
        ensure_current()
        raise AssertionError("not reached")

    assert Worker(queue, {"align": long_step}, heartbeat=0.1).run_once()
    assert waited and waited[0] < 2
    assert stop_event() is None  # outside a job


@pytest.fixture()
def database_url_engine(tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    url = f"sqlite:///{tmp_path / 'restart.db'}"
    engine = make_engine(url)
    migrate(engine)
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


def test_a_job_whose_worker_died_too_often_is_given_up_by_the_reclaiming_worker(
        engine: Engine) -> None:
    """The reclaiming worker calls the handler's ``give_up`` (the job already failed), so a
    check run the dead workers started is still completed."""
    queue = SqlJobQueue(engine, max_attempts=1, lease=0.2)
    job_id = queue.enqueue(JobRequest("align", "o/r#1"))
    assert queue.claim("dead/0") is not None  # and its process died
    gave_up: list[tuple[int, JobState, str]] = []

    class Handler:
        def __call__(self, job: JobRecord) -> None:
            raise AssertionError("not run again")

        def give_up(self, job: JobRecord, reason: str) -> None:
            gave_up.append((job.id, state(queue, job.id).state, reason))

    worker = Worker(queue, {"align": Handler()})
    assert worker.reclaim() == 0  # its lease has not expired yet
    time.sleep(0.3)
    assert worker.reclaim() == 1
    assert gave_up == [(job_id, JobState.FAILED,
                        "gave up after 1 tries: each time its worker stopped answering "
                        "(no heartbeat for 0.2 s)")]
    assert not worker.run_once()


def test_a_job_past_its_timeout_is_stopped_and_fails_for_good(queue: SqlJobQueue) -> None:
    """The heartbeat sets the job's stop event at its timeout (a sandbox watching it ends at
    once); the next ensure_current() raises JobTimedOut and give_up is told why."""
    given_up: list[str] = []

    def slow(job: JobRecord) -> dict[str, Any]:
        stop = stop_event()
        assert stop is not None and not stop.wait(0.1)  # not at once
        assert stop.wait(10)  # the sandbox's wait: ended by the timeout, not its own 10 s
        ensure_current()
        raise AssertionError("ensure_current() let a job past its timeout go on")

    slow.give_up = lambda job, reason: given_up.append(reason)  # type: ignore[attr-defined]
    job_id = queue.enqueue(JobRequest(kind="align", key="a/b#1"))
    started = time.monotonic()
    assert Worker(queue, {"align": slow}, heartbeat=0.05, timeout=0.5).run_once()
    assert time.monotonic() - started < 5
    record = state(queue, job_id)
    assert record.state is JobState.FAILED
    assert record.error == given_up[0] == (f"JobTimedOut: job {job_id} ran past the job "
                                           "timeout (0.5 s, ALIGNBOT_JOB_TIMEOUT_SECONDS)")
    with pytest.raises(ValueError):
        Worker(queue, {}, timeout=0)
    assert issubclass(JobTimedOut, Exception) and JobTimedOut.expected
