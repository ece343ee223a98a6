"""The embedded worker: threads that claim jobs from the queue and run their handlers."""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from alignbot.bot.errors import describe, is_transient, retry_at
from alignbot.bot.logs import log_context, repository_of
from alignbot.bot.periodic import Periodic
from alignbot.bot.queue import JobQueue, JobRecord, JobState
from alignbot.bot.settings import Settings
from alignbot.bot.storage import utcnow

log = logging.getLogger(__name__)

JobHandler = Callable[[JobRecord], dict[str, Any] | None]
# A handler's optional ``give_up(job, reason)``: called once when its job fails for good.
GiveUp = Callable[[JobRecord, str], object]


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures are retried: after the n-th, a wait of ``min(cap, base * 2**(n-1))``
    seconds scaled by a random factor in ``[1 - jitter, 1 + jitter]``, for as long as
    ``horizon`` seconds have not passed since the job's first transient failure (the last try
    is at the horizon). A rate limit's ``retry_at`` gets up to ``rate_limit_jitter`` seconds
    added, so that jobs stopped by one limit do not all come back in the same second."""

    horizon: float = 1800.0
    base: float = 5.0
    cap: float = 300.0
    jitter: float = 0.25
    rate_limit_jitter: float = 5.0

    def __post_init__(self) -> None:
        if self.horizon < 0 or self.base <= 0 or self.cap <= 0 or not 0 <= self.jitter < 1:
            raise ValueError("horizon >= 0, base > 0, cap > 0 and 0 <= jitter < 1")

    def delay(self, failures: int, rng: random.Random) -> float:
        """Seconds to wait after the ``failures``-th transient failure (1 for the first)."""
        nominal = min(self.cap, self.base * 2 ** max(failures - 1, 0))
        return nominal * rng.uniform(1 - self.jitter, 1 + self.jitter)


def retry_policy(settings: Settings) -> RetryPolicy:
    """The service's retry policy, from its ``ALIGNBOT_GITHUB_RETRY_*`` settings."""
    return RetryPolicy(horizon=settings.github_retry_horizon, base=settings.github_retry_base,
                       cap=settings.github_retry_cap)


class JobSuperseded(Exception):
    """Raised by ``ensure_current()`` once a newer job has replaced the running one."""


class JobLost(Exception):
    """Raised by ``ensure_current()`` once the running job is no longer this worker's: its
    lease expired (no heartbeat in time) and another worker may be running it now. The
    handler must write nothing more; the new holder does all of it again."""


class JobTimedOut(Exception):
    """Raised by ``ensure_current()`` once the running job has run past the worker's job
    timeout (``ALIGNBOT_JOB_TIMEOUT_SECONDS``): it fails for good, and its handler's
    ``give_up`` says so where users look."""

    expected = True  # a condition of the job, not a bug: logged in one line

    def __init__(self, job_id: int, seconds: float) -> None:
        super().__init__(f"job {job_id} ran past the job timeout ({seconds:g} s, "
                         "ALIGNBOT_JOB_TIMEOUT_SECONDS)")
        self.seconds = seconds


@dataclass
class _Claim:
    """The job a worker thread is running, and how it is told to stop."""

    queue: JobQueue
    job_id: int
    worker: str
    # set once the job is no longer this worker's (superseded, finished elsewhere, or its
    # lease lost): long steps (the sandbox) watch it and end at once
    stop: threading.Event
    timeout: float | None = None  # seconds the job may run
    timed_out: bool = False  # it ran past ``timeout``: stop was set for that


_running = threading.local()


def ensure_current() -> None:
    """In a job handler: raise ``JobSuperseded`` if a newer job replaced this one,
    ``JobLost`` if another worker took it over after this one's lease expired, or
    ``JobTimedOut`` once it has run past the worker's job timeout.

    Call it between slow steps and before posting anything, so stale results are never posted
    and two workers never post for one job. Outside a worker it does nothing.
    """
    claim: _Claim | None = getattr(_running, "claim", None)
    if claim is None or (not claim.stop.is_set()
                         and claim.queue.holds(claim.job_id, claim.worker)):
        return
    if claim.timed_out:
        raise JobTimedOut(claim.job_id, claim.timeout or 0)
    claim.stop.set()
    record = claim.queue.get(claim.job_id)
    if record is not None and record.state in (JobState.QUEUED, JobState.RUNNING):
        raise JobLost(f"job {claim.job_id} passed to another worker (lease expired)")
    raise JobSuperseded(f"job {claim.job_id} was superseded")


def current_worker() -> str | None:
    """In a job handler: the id of the worker thread that holds the job (for a write fenced
    on it); None outside a worker."""
    claim: _Claim | None = getattr(_running, "claim", None)
    return None if claim is None else claim.worker


def stop_event() -> threading.Event | None:
    """In a job handler: the event set once the running job is no longer this worker's (see
    ``ensure_current``), for a long step to watch and end early; None outside a worker."""
    claim: _Claim | None = getattr(_running, "claim", None)
    return None if claim is None else claim.stop


class Worker:
    """Runs queued jobs on ``concurrency`` threads, each polling the queue.

    Invariants: a result or failure is recorded only for a job that is still running under this
    worker (a superseded job stays ``superseded``, a job reclaimed by another worker is that
    worker's); a handler exception never kills a thread.

    Leases, so that any number of workers share one queue: while a job runs, a heartbeat
    thread renews its lease every ``heartbeat`` seconds (``queue.renew``); once renewing fails
    (the job was superseded or reclaimed) it sets the job's ``stop_event()``, which the
    sandbox watches, and ``ensure_current()`` raises. Every ``reclaim_interval`` seconds,
    from ``start()`` on, the worker puts jobs whose lease expired (their worker died) back in
    the queue (``queue.reclaim_expired``); one whose attempts are used up fails, and this
    worker calls its handler's ``give_up`` (the job already ``failed``). With ``alone`` (the
    only worker on its database, e.g. ``alignbot serve`` on SQLite) ``start()`` first
    requeues every job left running, since they can only be a dead process's.

    Failures, by what the handler raised:

    - a transient error with a ``retry_at`` datetime (``alignbot.bot.github.RateLimited``): the job
      is
      requeued to run at ``retry_at`` plus a little jitter; not a failure, no attempt spent;
    - another transient error (``is_transient``): requeued with exponential backoff and jitter
      (``RetryPolicy``) while the retry horizon since its first transient failure has not
      passed; no attempt spent (``attempts`` keeps guarding against crashes only);
    - anything else, or a transient error past the horizon: the job fails for good. First, if
      the handler has a ``give_up`` attribute and the job is still current, the worker calls
      ``handler.give_up(job, reason)`` once (``job``: the ``JobRecord`` as claimed, payload and
      ``retries``/``first_failure_at`` included; ``reason``: a ``str``, the error as
      ``"Type: message"``, prefixed past the horizon with how long and how often it was
      tried), so the handler can say so where users look (e.g. complete its check run). An
      exception from ``give_up`` is logged in one line and otherwise ignored. Then the job is
      marked failed with ``reason`` as its error.

    Transient failures, rate limits and errors marked ``expected`` (a condition, not a bug) are
    logged in one line; any other error with its traceback.

    ``limits`` caps the jobs of a kind that run at once in this worker: a kind at its cap is
    not claimed until one of its jobs ends.

    ``timeout`` (None: none) bounds one job's run in seconds: past it, the heartbeat thread
    sets the job's ``stop_event()`` (its sandbox is killed within half a second) and the next
    ``ensure_current()`` raises ``JobTimedOut``, which fails the job for good with its
    ``give_up``. A handler that never calls ``ensure_current()`` is not cut.
    """

    def __init__(
        self,
        queue: JobQueue,
        handlers: Mapping[str, JobHandler],
        concurrency: int = 1,
        poll_interval: float = 0.5,
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        rng: random.Random | None = None,
        limits: Mapping[str, int] | None = None,
        heartbeat: float = 2.0,
        reclaim_interval: float = 10.0,
        alone: bool = False,
        timeout: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if timeout is not None and timeout <= 0:
            raise ValueError("a job timeout must be above 0 seconds")
        self.timeout = timeout
        if any(limit < 1 for limit in (limits or {}).values()):
            raise ValueError("a kind's limit must be at least 1")
        self.queue = queue
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        # unique per process, even for a container's pid 1 restarted under the same hostname
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.heartbeat = heartbeat
        self.alone = alone
        self._reclaimer = Periodic("job-leases", self.reclaim, reclaim_interval)
        self.retry = retry or RetryPolicy()
        self._rng = rng or random.Random()
        # at most this many jobs of a kind at once here, so that long jobs of one kind (the
        # reminder sweeps) leave threads to the others
        self.limits = dict(limits or {})
        self._running: Counter[str] = Counter()
        self._claiming = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._wake = threading.Event()

    def start(self) -> None:
        """Start the threads and the reclaiming of expired leases (when ``alone``, requeue
        every job left running first)."""
        if self._threads:
            raise RuntimeError("the worker is already running")
        if self.alone:
            recovered = self.queue.recover()
            if recovered:
                log.warning("recovered %d job(s) left running by a previous process",
                            recovered)
        self._stopping.clear()
        self._reclaimer.start()
        for index in range(self.concurrency):
            thread = threading.Thread(
                target=self._loop, args=(f"{self.name}/{index}",),
                name=f"alignbot-worker-{index}", daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop taking jobs and wait up to ``timeout`` s in all; True if every thread ended.

        A job still running after that is left ``running``; once its lease expires another
        worker (or this one, started again) requeues it.
        """
        self._stopping.set()
        self._wake.set()
        self._reclaimer.stop(timeout=5)  # between two quick runs: ends at once
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        alive = [thread for thread in self._threads if thread.is_alive()]
        self._threads = alive
        return not alive

    def alive(self) -> bool:
        """Whether the threads ``start()`` started all run (False before it, after
        ``stop()``)."""
        return bool(self._threads) and all(thread.is_alive() for thread in self._threads)

    def reclaim(self) -> int:
        """Requeue the jobs whose lease expired (their worker died); how many. A job that
        has used up its attempts so fails for good, and its handler's ``give_up`` is called
        here, as if it had failed in this worker."""
        reclaimed = self.queue.reclaim_expired()
        if reclaimed:
            log.warning("reclaimed %d job(s) whose worker stopped renewing its lease",
                        len(reclaimed))
        for job in reclaimed:
            if job.state is JobState.FAILED:
                log.error("job %d (%s %s): failed: %s", job.id, job.kind, job.key, job.error)
                _call_give_up(self.handlers.get(job.kind), job, job.error or "")
        return len(reclaimed)

    def notify(self) -> None:
        """Wake idle threads now (new jobs were queued) instead of at their next poll."""
        self._wake.set()

    def run_once(self, worker_id: str | None = None, *, only_own: bool = False) -> bool:
        """Claim one job and run it; False if the queue had nothing to run. With ``only_own``
        only jobs of the kinds this worker has handlers for are claimed (a process that runs
        some kinds inline leaves the others to the service)."""
        with self._claiming:
            kinds = self._claimable(only_own)
            job = None if kinds == [] else self.queue.claim(worker_id or f"{self.name}/once",
                                                            kinds)
            if job is None:
                return False
            self._running[job.kind] += 1
        try:
            with log_context(delivery_id=job.delivery_id, job_id=job.id,
                             repository=repository_of(job.payload)):
                self._run(job, worker_id or f"{self.name}/once")
        finally:
            with self._claiming:
                self._running[job.kind] -= 1
        return True

    def _claimable(self, only_own: bool) -> list[str] | None:
        """The kinds a claim may take now (None: any). While a kind is at its limit only the
        others with handlers are claimed (a job of an unknown kind waits to be failed)."""
        full = {kind for kind, limit in self.limits.items() if self._running[kind] >= limit}
        if not full:
            return list(self.handlers) if only_own else None
        return [kind for kind in self.handlers if kind not in full]

    def _loop(self, worker_id: str) -> None:
        while not self._stopping.is_set():
            try:
                worked = self.run_once(worker_id)
            except Exception:  # the database went away: keep the thread, try again later
                log.exception("worker %s: could not claim or record a job", worker_id)
                worked = False
            if not worked:
                self._wake.wait(self.poll_interval)
                self._wake.clear()

    def _run(self, job: JobRecord, worker_id: str) -> None:
        handler = self.handlers.get(job.kind)
        if handler is None:
            self.queue.fail(job.id, f"no handler for job kind {job.kind!r}", retry=False,
                            worker=worker_id)
            log.error("job %d: no handler for kind %r", job.id, job.kind)
            return
        started = time.monotonic()
        claim = _Claim(self.queue, job.id, worker_id, threading.Event(), self.timeout)
        done = threading.Event()
        beat = threading.Thread(target=self._beat, args=(claim, done), daemon=True,
                                name=f"alignbot-heartbeat-{job.id}")
        beat.start()
        _running.claim = claim
        try:
            result = handler(job)
            json.dumps(result)  # fail here, with the job, rather than in complete()
        except Exception as error:
            # still "running": give_up may ensure_current()
            self._failed(job, handler, error, worker_id)
            return
        finally:
            _running.claim = None
            done.set()
            beat.join()
        elapsed = time.monotonic() - started
        if self.queue.complete(job.id, result, worker=worker_id):
            log.info("job %d (%s %s): done in %.2fs", job.id, job.kind, job.key, elapsed)
        else:
            log.info("job %d (%s %s): superseded while running; result dropped",
                     job.id, job.kind, job.key)

    def _beat(self, claim: _Claim, done: threading.Event) -> None:
        """Renew the job's lease until it ends; once that fails, or the job has run past its
        timeout, tell the job to stop."""
        deadline = None if claim.timeout is None else time.monotonic() + claim.timeout
        while True:
            wait = self.heartbeat
            if deadline is not None and not claim.timed_out:
                wait = max(min(wait, deadline - time.monotonic()), 0)
            if done.wait(wait):
                return
            if deadline is not None and not claim.timed_out and time.monotonic() >= deadline:
                log.warning("job %d: ran past the job timeout (%g s); stopping it",
                            claim.job_id, claim.timeout)
                claim.timed_out = True
                claim.stop.set()
                continue  # the lease is kept while the job stops and gives up
            try:
                kept = self.queue.renew(claim.job_id, claim.worker)
            except Exception as failure:  # the database is away: the lease may still hold
                log.warning("job %d: could not renew its lease: %s", claim.job_id,
                            describe(failure))
                continue
            if not kept:
                log.info("job %d: no longer this worker's (superseded or reclaimed); "
                         "stopping it", claim.job_id)
                claim.stop.set()
                return

    def _failed(self, job: JobRecord, handler: JobHandler, error: Exception,
                worker_id: str) -> None:
        now = utcnow()
        resume = retry_at(error)
        if resume is not None:
            when = max(resume, now) + timedelta(
                seconds=self._rng.uniform(0, self.retry.rate_limit_jitter))
            if self.queue.requeue(job.id, describe(error), when, failure=False,
                                  worker=worker_id):
                log.warning("job %d (%s %s): rate limited, rescheduled in %.0f s (%s): %s",
                            job.id, job.kind, job.key, (when - now).total_seconds(),
                            when.isoformat(timespec="seconds"), describe(error))
            else:
                self._superseded(job)
            return
        reason = describe(error)
        if is_transient(error):
            first = job.first_failure_at or now
            failures = job.retries + 1
            deadline = first + timedelta(seconds=self.retry.horizon)
            if now < deadline:
                when = min(now + timedelta(seconds=self.retry.delay(failures, self._rng)),
                           deadline)
                if self.queue.requeue(job.id, reason, when, worker=worker_id):
                    log.warning("job %d (%s %s): transient failure %d, retry in %.1f s: %s",
                                job.id, job.kind, job.key, failures,
                                (when - now).total_seconds(), reason)
                else:
                    self._superseded(job)
                return
            reason = (f"gave up after {failures} tries over {(now - first).total_seconds():.0f} s "
                      f"(retry horizon {self.retry.horizon:g} s): {reason}")
        self._give_up(job, handler, error, reason, worker_id)

    def _give_up(self, job: JobRecord, handler: JobHandler, error: Exception,
                 reason: str, worker_id: str) -> None:
        if not isinstance(error, JobSuperseded | JobLost) and self.queue.holds(job.id, worker_id):
            _call_give_up(handler, job, reason)
        state = self.queue.fail(job.id, reason, retry=False, worker=worker_id)
        if state is None:
            self._superseded(job)
        elif is_transient(error) or getattr(error, "expected", False) is True:
            log.error("job %d (%s %s): failed: %s", job.id, job.kind, job.key, reason)
        else:
            log.error("job %d (%s %s): failed: %s", job.id, job.kind, job.key, reason,
                      exc_info=error)

    def _superseded(self, job: JobRecord) -> None:
        log.info("job %d (%s %s): superseded or taken over while running", job.id, job.kind,
                 job.key)


def _call_give_up(handler: JobHandler | None, job: JobRecord, reason: str) -> None:
    """The handler's ``give_up(job, reason)``, if it has one; an exception from it is logged
    in one line."""
    give_up: GiveUp | None = getattr(handler, "give_up", None)
    if give_up is None:
        return
    try:
        give_up(job, reason)
    except Exception as failure:
        log.error("job %d (%s %s): give_up failed: %s", job.id, job.kind, job.key,
                  describe(failure))
