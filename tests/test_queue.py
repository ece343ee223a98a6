"""bot/queue.py: the SQL job queue on SQLite, and on PostgreSQL when one is configured."""

from __future__ import annotations

import multiprocessing
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, update

from alignbot.bot.queue import JobRecord, JobRequest, JobState, SqlJobQueue
from alignbot.bot.storage import JOBS, FairLock, make_engine, transaction, utcnow


def request(key: str = "o/r#1", supersede: bool = False, **payload: object) -> JobRequest:
    return JobRequest("align", key, dict(payload), supersede=supersede)


def test_enqueue_claim_complete(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(request(n=1))
    queued = queue.get(job_id)
    assert queued is not None
    assert (queued.state, queued.attempts, queued.payload) == (JobState.QUEUED, 0, {"n": 1})
    assert queued.created_at.tzinfo is not None

    claimed = queue.claim("w1")
    assert claimed is not None
    assert (claimed.id, claimed.state, claimed.attempts) == (job_id, JobState.RUNNING, 1)
    assert claimed.worker == "w1" and claimed.started_at is not None
    assert queue.claim("w2") is None

    assert queue.complete(job_id, {"conclusion": "success"})
    done = queue.get(job_id)
    assert done is not None
    assert (done.state, done.result) == (JobState.DONE, {"conclusion": "success"})
    assert not queue.complete(job_id, {"again": True})  # only a running job completes
    assert not queue.is_current(job_id)
    assert queue.get(999_999) is None


def test_claims_in_order_and_lists(queue: SqlJobQueue) -> None:
    ids = [queue.enqueue(request(f"o/r#{n}")) for n in range(3)]
    queue.enqueue(JobRequest("remind", "o/r#9"))
    assert [job.id for job in (queue.claim("w"), queue.claim("w"))] == ids[:2]  # type: ignore[union-attr]
    assert [job.id for job in queue.list(kind="align")] == ids
    assert [job.id for job in queue.list(state=JobState.RUNNING)] == ids[:2]
    assert [job.kind for job in queue.list(state=JobState.QUEUED)] == ["align", "remind"]


def test_fail_and_retry_until_max_attempts(engine: Engine) -> None:
    queue = SqlJobQueue(engine, max_attempts=2)
    job_id = queue.enqueue(request())
    queue.claim("w")
    assert queue.fail(job_id, "GitHub answered 502", retry=True) is JobState.QUEUED
    again = queue.claim("w")
    assert again is not None and again.attempts == 2 and again.error == "GitHub answered 502"
    assert queue.fail(job_id, "502 again", retry=True) is JobState.FAILED  # attempts used up
    failed = queue.get(job_id)
    assert failed is not None and (failed.state, failed.error) == (JobState.FAILED, "502 again")
    assert queue.fail(job_id, "late", retry=False) is None  # not running any more


def test_fail_without_retry(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(request())
    queue.claim("w")
    assert queue.fail(job_id, "ValueError: bad config") is JobState.FAILED
    assert queue.claim("w") is None


def test_a_retry_waits_for_its_delay(engine: Engine) -> None:
    queue = SqlJobQueue(engine, retry_delay=3600)
    job_id = queue.enqueue(request())
    queue.claim("w")
    assert queue.fail(job_id, "timeout", retry=True) is JobState.QUEUED
    assert queue.claim("w") is None  # not before an hour


def test_supersede_replaces_queued_and_running_jobs(queue: SqlJobQueue) -> None:
    running = queue.enqueue(request(sha="a"))
    queue.claim("w")
    queued = queue.enqueue(request(sha="b"))  # without supersede both stay
    other = queue.enqueue(request("o/r#2", sha="c"))
    assert queue.is_current(running) and queue.is_current(queued)

    newest = queue.enqueue(request(sha="d", supersede=True))
    states = {job.id: job.state for job in queue.list()}
    assert states == {
        running: JobState.SUPERSEDED,
        queued: JobState.SUPERSEDED,
        other: JobState.QUEUED,
        newest: JobState.QUEUED,
    }
    assert not queue.is_current(running)
    assert not queue.complete(running, {"stale": True})  # the stale result is dropped
    assert queue.fail(running, "boom") is None
    stale = queue.get(running)
    assert stale is not None and (stale.state, stale.result) == (JobState.SUPERSEDED, None)


def test_concurrent_superseding_enqueues_leave_one_current(queue: SqlJobQueue) -> None:
    def push(thread: int) -> None:
        for n in range(10):
            queue.enqueue(request(sha=f"{thread}-{n}", supersede=True))

    threads = [threading.Thread(target=push, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(queue.list(state=JobState.QUEUED)) == 1
    assert len(queue.list(state=JobState.SUPERSEDED)) == 59


def test_dedupe_keeps_one_queued_or_running_job_per_key(queue: SqlJobQueue) -> None:
    first = queue.enqueue(JobRequest("sweep", "o/r", {"n": 1}, dedupe=True))
    assert queue.enqueue(JobRequest("sweep", "o/r", {"n": 2}, dedupe=True)) == first
    other = queue.enqueue(JobRequest("sweep", "o/s", dedupe=True))
    plain = queue.enqueue(JobRequest("align", "o/r"))  # another kind, the same key
    assert len({first, other, plain}) == 3
    claimed = queue.claim("w")
    assert claimed is not None and claimed.id == first
    assert queue.enqueue(JobRequest("sweep", "o/r", dedupe=True)) == first  # running
    queue.complete(first)
    again = queue.enqueue(JobRequest("sweep", "o/r", {"n": 3}, dedupe=True))
    assert again not in (first, other, plain)
    payload = queue.get(again)
    assert payload is not None and payload.payload == {"n": 3}
    with pytest.raises(ValueError, match="not both"):
        JobRequest("sweep", "o/r", supersede=True, dedupe=True)


def test_concurrent_deduplicating_enqueues_queue_one_job(database_url: str,
                                                         queue: SqlJobQueue) -> None:
    engines = [make_engine(database_url) for _ in range(3)]  # as many replicas
    ids: list[int] = []

    def push(engine: Engine) -> None:
        for _ in range(10):
            ids.append(SqlJobQueue(engine).enqueue(JobRequest("sweep", "o/r", dedupe=True)))

    threads = [threading.Thread(target=push, args=(e,)) for e in engines for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for engine in engines:
        engine.dispose()
    assert len(set(ids)) == 1 and len(ids) == 60
    assert len(queue.list(kind="sweep")) == 1


def test_recover_may_be_limited_to_some_kinds(queue: SqlJobQueue) -> None:
    align = queue.enqueue(request())
    sweep = queue.enqueue(JobRequest("sweep", "o/r"))
    assert queue.claim("w") is not None and queue.claim("w") is not None
    assert queue.recover(kinds=["sweep"]) == 1
    states = {job.id: job.state for job in queue.list()}
    assert states == {align: JobState.RUNNING, sweep: JobState.QUEUED}


def test_a_claim_may_be_limited_to_some_kinds(queue: SqlJobQueue) -> None:
    align = queue.enqueue(request())
    sweep = queue.enqueue(JobRequest("sweep", "o/r"))
    claimed = queue.claim("w", ["sweep", "other"])
    assert claimed is not None and claimed.id == sweep
    assert queue.claim("w", ["sweep"]) is None
    claimed = queue.claim("w")
    assert claimed is not None and claimed.id == align


def test_recover_after_a_crash(database_url: str, engine: Engine) -> None:
    crashed = SqlJobQueue(make_engine(database_url), max_attempts=2)
    first, second, third = (crashed.enqueue(request(f"o/r#{n}")) for n in range(3))
    crashed.claim("dead-worker")
    crashed.claim("dead-worker")
    crashed.engine.dispose()  # the process died with two jobs running

    restarted = SqlJobQueue(engine, max_attempts=2)
    assert restarted.recover(stale_after=3600) == 0  # too recent to be another process's
    assert restarted.recover() == 2
    assert {job.id for job in restarted.list(state=JobState.QUEUED)} == {first, second, third}
    claimed = restarted.claim("new-worker")
    assert claimed is not None and claimed.id == first and claimed.attempts == 2

    # It kills the process again: its attempts are used up, so it fails instead of looping.
    assert restarted.recover() == 1
    job = restarted.get(first)
    assert job is not None and job.state is JobState.FAILED
    assert job.error is not None and "interrupted" in job.error


def drain(queue: SqlJobQueue, worker_id: str, work_seconds: float = 0.0) -> list[int]:
    claimed: list[int] = []
    while (job := queue.claim(worker_id)) is not None:
        claimed.append(job.id)
        time.sleep(work_seconds)
        queue.complete(job.id, {"by": worker_id})
    return claimed


def assert_claimed_once(queue: SqlJobQueue, ids: list[int], claims: list[list[int]]) -> None:
    flat = [job_id for claimed in claims for job_id in claimed]
    assert sorted(flat) == sorted(ids), "a job was claimed twice or never"
    jobs: list[JobRecord] = queue.list()
    assert all(job.state is JobState.DONE and job.attempts == 1 for job in jobs)


def test_threads_never_claim_the_same_job(queue: SqlJobQueue) -> None:
    ids = [queue.enqueue(request(f"o/r#{n}")) for n in range(120)]
    claims: list[list[int]] = [[] for _ in range(6)]

    def work(index: int) -> None:
        claims[index] = drain(queue, f"thread-{index}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert_claimed_once(queue, ids, claims)


def drain_in_process(
    url: str, worker_id: str, ready: Any, start: Any, results: Any
) -> None:
    engine = make_engine(url)
    queue = SqlJobQueue(engine)
    queue.is_current(0)  # connected and warm before the race starts
    ready.put(worker_id)
    start.wait(30)
    # A little work per job, as real workers do; without it SQLite's lock, which favours the
    # process that just released it, can let one process drain everything alone.
    results.put(drain(queue, worker_id, work_seconds=0.002))
    engine.dispose()


@pytest.mark.slow
def test_processes_never_claim_the_same_job(database_url: str, queue: SqlJobQueue) -> None:
    ids = [queue.enqueue(request(f"o/r#{n}")) for n in range(150)]
    context = multiprocessing.get_context("spawn")
    ready, results, start = context.Queue(), context.Queue(), context.Event()
    processes = [
        context.Process(
            target=drain_in_process, args=(database_url, f"process-{i}", ready, start, results)
        )
        for i in range(3)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=60)
    start.set()  # all three claim at once
    claims = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=10)
        assert process.exitcode == 0
    assert_claimed_once(queue, ids, claims)
    assert sum(1 for claimed in claims if claimed) >= 2, "the processes did not overlap"


def test_sqlite_transactions_take_turns_in_arrival_order() -> None:
    lock = FairLock()
    order: list[int] = []
    lock.acquire()
    lock.acquire()  # reentrant

    def take_turn(index: int) -> None:
        with lock:
            order.append(index)

    threads = []
    for index in range(5):
        thread = threading.Thread(target=take_turn, args=(index,))
        thread.start()
        threads.append(thread)
        while len(lock._waiters) <= index:  # wait until it queues up behind the others
            time.sleep(0.001)
    lock.release()
    assert order == []  # still held once
    lock.release()
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2, 3, 4]
    with pytest.raises(RuntimeError):
        lock.release()


def test_a_failed_transaction_releases_its_turn(engine: Engine) -> None:
    with pytest.raises(ValueError), transaction(engine):
        raise ValueError("rolled back")
    thread = threading.Thread(target=SqlJobQueue(engine).enqueue, args=(request(),))
    thread.start()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(SqlJobQueue(engine).list()) == 1


def test_requeue_gives_the_claim_back_and_counts_transient_failures(queue: SqlJobQueue) -> None:
    limited = queue.enqueue(request(n=1))
    assert queue.claim("w") is not None
    later = datetime.now(UTC) + timedelta(hours=1)
    assert queue.requeue(limited, "RateLimited: until later", later, failure=False)
    job = queue.get(limited)
    assert job is not None
    assert (job.state, job.attempts, job.error) == (JobState.QUEUED, 0, "RateLimited: until later")
    assert (job.retries, job.first_failure_at, job.payload) == (0, None, {"n": 1})
    assert queue.claim("w") is None  # not before its time
    assert not queue.requeue(limited, "not running", later)

    flaky = queue.enqueue(request("o/r#2", n=2))
    firsts = []
    for failures in (1, 2, 3):
        claimed = queue.claim("w")
        assert claimed is not None and claimed.id == flaky and claimed.attempts == 1
        assert queue.requeue(flaky, f"TransientError: 502 #{failures}", datetime.now(UTC))
        job = queue.get(flaky)
        assert job is not None and job.retries == failures and job.attempts == 0
        assert job.payload == {"n": 2}  # the bookkeeping never shows in the payload
        firsts.append(job.first_failure_at)
    assert firsts[0] is not None and firsts[0].tzinfo is not None and len(set(firsts)) == 1
    assert abs((datetime.now(UTC) - firsts[0]).total_seconds()) < 60


def test_transient_requeues_do_not_use_up_the_crash_guard(database_url: str,
                                                          engine: Engine) -> None:
    queue = SqlJobQueue(engine, max_attempts=2)
    job_id = queue.enqueue(request())
    for _ in range(5):
        assert queue.claim("w") is not None
        assert queue.requeue(job_id, "TransientError: 503", datetime.now(UTC))
    crashed = SqlJobQueue(make_engine(database_url), max_attempts=2)
    assert crashed.claim("dead-worker") is not None
    crashed.engine.dispose()  # the process died running it
    assert queue.recover() == 1
    job = queue.get(job_id)
    assert job is not None and (job.state, job.attempts, job.retries) == (JobState.QUEUED, 1, 5)


# --------------------------------------------------------------------------- leases


def _expire(queue: SqlJobQueue, job_id: int) -> None:
    """The job's last heartbeat was longer ago than its lease: its worker died."""
    with transaction(queue.engine) as conn:
        conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(
            updated_at=utcnow() - timedelta(seconds=queue.lease + 1)))


def test_a_heartbeat_keeps_the_lease_and_only_an_expired_one_is_reclaimed(
        queue: SqlJobQueue) -> None:
    live, dead = queue.enqueue(request("o/r#1")), queue.enqueue(request("o/r#2"))
    assert queue.claim("live") is not None and queue.claim("dead") is not None
    _expire(queue, live)
    assert queue.renew(live, "live")  # its heartbeat came in time after all
    _expire(queue, dead)
    assert len(queue.reclaim_expired()) == 1
    states = {job.id: job.state for job in queue.list()}
    assert states == {live: JobState.RUNNING, dead: JobState.QUEUED}
    reclaimed = queue.get(dead)
    assert reclaimed is not None and reclaimed.worker is None
    assert reclaimed.error is not None and "no heartbeat" in reclaimed.error
    assert len(queue.reclaim_expired()) == 0


def test_a_worker_that_lost_its_lease_records_nothing(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(request())
    assert queue.claim("stalled") is not None
    _expire(queue, job_id)
    assert len(queue.reclaim_expired()) == 1
    again = queue.claim("other")
    assert again is not None and again.id == job_id and again.attempts == 2
    assert queue.holds(job_id, "other") and not queue.holds(job_id, "stalled")
    assert not queue.renew(job_id, "stalled")
    assert not queue.complete(job_id, {"posted": "twice"}, worker="stalled")
    assert queue.fail(job_id, "boom", worker="stalled") is None
    assert not queue.requeue(job_id, "later", utcnow(), worker="stalled")
    assert queue.is_current(job_id)  # still the other worker's
    assert queue.complete(job_id, {"posted": "once"}, worker="other")
    job = queue.get(job_id)
    assert job is not None and job.result == {"posted": "once"}


def test_a_job_that_keeps_losing_its_worker_fails_after_max_attempts(engine: Engine) -> None:
    queue = SqlJobQueue(engine, max_attempts=2)
    job_id = queue.enqueue(request())
    for attempt in (1, 2):
        claimed = queue.claim(f"worker-{attempt}")
        assert claimed is not None and claimed.attempts == attempt
        _expire(queue, job_id)
        assert len(queue.reclaim_expired()) == 1
    job = queue.get(job_id)
    assert job is not None and job.state is JobState.FAILED
    assert job.error is not None and "gave up after 2 tries" in job.error


def test_a_superseded_job_cannot_be_renewed(queue: SqlJobQueue) -> None:
    job_id = queue.enqueue(request())
    assert queue.claim("w") is not None
    queue.enqueue(JobRequest("align", "o/r#1", supersede=True))
    assert not queue.renew(job_id, "w") and not queue.holds(job_id, "w")


def test_a_lease_is_positive(engine: Engine) -> None:
    with pytest.raises(ValueError, match="lease"):
        SqlJobQueue(engine, lease=0)
