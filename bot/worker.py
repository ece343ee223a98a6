"""The embedded worker: threads that claim jobs from the queue and run their handlers."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from bot.queue import JobQueue, JobRecord, JobState

log = logging.getLogger(__name__)

JobHandler = Callable[[JobRecord], dict[str, Any] | None]


class TransientError(Exception):
    """A failure worth one retry (GitHub answered 502, the network blinked).

    Any exception with a true ``transient`` attribute counts as well.
    """

    transient = True


class JobSuperseded(Exception):
    """Raised by ``ensure_current()`` once a newer job has replaced the running one."""


_running = threading.local()


def ensure_current() -> None:
    """In a job handler: raise ``JobSuperseded`` if a newer job replaced this one.

    Call it between slow steps and before posting anything, so stale results are never posted.
    Outside a worker it does nothing.
    """
    current: tuple[JobQueue, int] | None = getattr(_running, "job", None)
    if current is not None and not current[0].is_current(current[1]):
        raise JobSuperseded(f"job {current[1]} was superseded")


def is_transient(error: BaseException) -> bool:
    return getattr(error, "transient", False) is True


def describe(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= 4000 else text[:4000] + "…"


class Worker:
    """Runs queued jobs on ``concurrency`` threads, each polling the queue.

    Invariants: a result or failure is recorded only for a job that is still running under this
    worker (a superseded job stays ``superseded``); a handler exception never kills a thread;
    jobs left ``running`` by a previous process are requeued by ``start()``.
    """

    def __init__(
        self,
        queue: JobQueue,
        handlers: Mapping[str, JobHandler],
        concurrency: int = 1,
        poll_interval: float = 0.5,
        *,
        name: str | None = None,
        max_retries: int = 1,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.handlers = dict(handlers)
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.max_retries = max_retries
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._wake = threading.Event()

    def start(self) -> None:
        """Requeue jobs a dead process left running, then start the threads."""
        if self._threads:
            raise RuntimeError("the worker is already running")
        recovered = self.queue.recover()
        if recovered:
            log.warning("recovered %d job(s) left running by a previous process", recovered)
        self._stopping.clear()
        for index in range(self.concurrency):
            thread = threading.Thread(
                target=self._loop, args=(f"{self.name}/{index}",),
                name=f"alignbot-worker-{index}", daemon=True,
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop taking jobs and wait up to ``timeout`` s in all; True if every thread ended.

        A job still running after that is left ``running`` and requeued at the next start.
        """
        self._stopping.set()
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
        alive = [thread for thread in self._threads if thread.is_alive()]
        self._threads = alive
        return not alive

    def notify(self) -> None:
        """Wake idle threads now (new jobs were queued) instead of at their next poll."""
        self._wake.set()

    def run_once(self, worker_id: str | None = None) -> bool:
        """Claim one job and run it; False if the queue had nothing to run."""
        job = self.queue.claim(worker_id or f"{self.name}/once")
        if job is None:
            return False
        self._run(job)
        return True

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

    def _run(self, job: JobRecord) -> None:
        handler = self.handlers.get(job.kind)
        if handler is None:
            self.queue.fail(job.id, f"no handler for job kind {job.kind!r}", retry=False)
            log.error("job %d: no handler for kind %r", job.id, job.kind)
            return
        started = time.monotonic()
        _running.job = (self.queue, job.id)
        try:
            result = handler(job)
            json.dumps(result)  # fail here, with the job, rather than in complete()
        except Exception as error:
            self._failed(job, error)
            return
        finally:
            _running.job = None
        elapsed = time.monotonic() - started
        if self.queue.complete(job.id, result):
            log.info("job %d (%s %s): done in %.2fs", job.id, job.kind, job.key, elapsed)
        else:
            log.info("job %d (%s %s): superseded while running; result dropped",
                     job.id, job.kind, job.key)

    def _failed(self, job: JobRecord, error: Exception) -> None:
        retry = is_transient(error) and job.attempts <= self.max_retries
        state = self.queue.fail(job.id, describe(error), retry=retry)
        if state is None:
            log.info("job %d (%s %s): superseded while running", job.id, job.kind, job.key)
        elif state is JobState.QUEUED:
            log.warning("job %d (%s %s): transient failure, will retry: %s",
                        job.id, job.kind, job.key, describe(error))
        else:
            log.error("job %d (%s %s): failed", job.id, job.kind, job.key, exc_info=error)
