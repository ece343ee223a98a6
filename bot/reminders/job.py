"""The ``reminder-sweep`` job, one repository's sweep, and the pass that queues them.

A pass (every few minutes in ``alignbot serve``, once in ``alignbot remind-sweep``) queues one
job per due repository of every live installation: a deleted or suspended installation gets
none, and no token is asked for it. The request de-duplicates on the repository, so a
repository never has two sweep jobs queued or running, and sweeps of one repository never run
side by side.

A job's failure stays in its job and its repository: a spent budget stops the sweep until the
next hour, a refused token is dropped and the sweep retried by the next pass, another GitHub
error stops it for ``SweepOptions.error_retry``, each with the cursor and the reason saved;
a transient error (GitHub 5xx, no answer, a rate limit on the token) goes to the worker's
retry policy, and the sweep resumes from its cursor.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests
from github import BadCredentialsException, GithubException
from sqlalchemy import Engine

from ..errors import TransientError, is_transient
from ..github import GitHubApp, InstallationGone, api_options, transient_failures
from ..jobs import REMINDER_SWEEP as JOB_KIND
from ..lease import Lease, default_owner
from ..queue import JobQueue, JobRecord, JobRequest, JobState, SqlJobQueue
from ..settings import Settings
from ..startup import check_start, wait_for_database
from ..storage import migrate, utcnow
from ..worker import RetryPolicy, Worker, ensure_current, retry_policy
from .api import ApiCallBudget, ApiCallBudgetExhausted, ApiLimits, SweepApi, WritePacer
from .report import SweepReport
from .store import RepoState, Store, installed_repos
from .sweep import RepoSweep, SweepHooks, SweepOptions

log = logging.getLogger(__name__)

PASS_INTERVAL = 300.0  # seconds between passes; a repository is swept once per week
FIRST_PASS_DELAY = 60.0  # let the service settle first
# A sweep job running this long was left by a process that died (a sweep stops within about an
# hour, at its budget): ``remind-sweep`` puts it back in the queue, or its repository would
# never get another sweep where no service restarts to recover it.
STALE_SWEEP = timedelta(hours=3)
# sweep jobs one worker runs at once: a sweep paces its writes for up to an hour, and the
# worker's other threads are for the checks and commands people wait on
SWEEPS_AT_ONCE = 1


class DigestBusy(TransientError):
    """Another sweep job is writing the same tracking repository's digest: retry shortly."""


def sweep_request(installation_id: int, repo: str, force: bool = False) -> JobRequest:
    return JobRequest(kind=JOB_KIND, key=repo.lower(), dedupe=True, payload={
        "installation_id": installation_id, "repo": repo, "force": force})


def enqueue_due(engine: Engine, queue: JobQueue, *, clock: Callable[[], datetime] = utcnow,
                force: bool = False) -> list[int]:
    """One pass: a sweep job for each repository of each live installation whose sweep is
    due (every one, with ``force``). Returns the jobs' ids; a repository that already has a
    sweep queued or running gets no second one, and its job's id is returned."""
    now, next_checks = clock(), Store(engine).next_checks()

    def due(repo: str) -> bool:
        when = next_checks.get(repo)
        return force or when is None or now >= when

    return [queue.enqueue(sweep_request(installation_id, repo, force))
            for installation_id, repo in installed_repos(engine) if due(repo)]


def digest_lease_name(tracking: str) -> str:
    digest = hashlib.blake2b(tracking.lower().encode(), digest_size=16).hexdigest()
    return f"upstream-digest:{digest}"


@dataclass
class SweepJob:
    """Runs one ``reminder-sweep`` job (see the module docstring for what a failure does).
    Thread-safe: the worker's threads share it, and its write pacer."""

    app: GitHubApp
    engine: Engine
    options: SweepOptions = field(default_factory=SweepOptions)
    clock: Callable[[], datetime] = utcnow
    hooks: SweepHooks = field(default_factory=SweepHooks)
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self.store = Store(self.engine)
        self.pacer = WritePacer(self.options.write_interval, self.options.writes_per_minute,
                                sleep=self.sleep)

    def __call__(self, job: JobRecord) -> dict[str, Any]:
        installation_id, repo = int(job.payload["installation_id"]), str(job.payload["repo"])
        report = SweepReport()
        if self.store.installation_of(repo) != installation_id:
            log.info("%s: not swept, installation %d no longer holds it", repo, installation_id)
            return {**report.as_result(), "not_installed": True}
        state = self.store.state(repo, installation_id)
        apis: dict[int, list[SweepApi]] = {}
        try:
            with transient_failures(self.app, installation_id):
                self._sweep_or_stop(state, report, apis, bool(job.payload.get("force")))
        except (GithubException, requests.RequestException) as exc:  # not transient
            self._stopped(report, state, f"GitHub error: {exc}"[:2000],
                          self.clock() + self.options.error_retry)
        except InstallationGone as exc:  # removed while its webhook was missed
            self._stopped(report, state, str(exc), self.clock() + self.options.error_retry)
        except Exception as exc:
            if is_transient(exc):  # the worker retries it; the cursor is saved
                state.error = f"retrying: {exc}"[:2000]
                self.store.save(state)
            raise
        finally:
            for made in apis.values():
                for api in made:
                    api.budget.flush()
                    report.calls.update(api.calls)
        return report.as_result()

    def _sweep_or_stop(self, state: RepoState, report: SweepReport,
                       apis: dict[int, list[SweepApi]], force: bool) -> None:
        try:
            self._sweep(state, report, apis, force)
        except ApiCallBudgetExhausted as exc:
            self._stopped(report, state, str(exc), _next_hour(self.clock()))
        except BadCredentialsException as exc:  # revoked or expired early: the next pass
            for used in apis:
                self.app.forget_token(used)
            self._stopped(report, state, f"GitHub refused the token: {exc}", self.clock())

    def _sweep(self, state: RepoState, report: SweepReport, apis: dict[int, list[SweepApi]],
               force: bool) -> None:
        budgets: dict[int, ApiCallBudget] = {}

        def api_for(installation_id: int) -> SweepApi:
            """A client (its token fresh) and one budget per installation."""
            if installation_id not in budgets:
                budgets[installation_id] = ApiCallBudget(
                    self.engine, installation_id, self.options.limits.calls_per_hour,
                    self.clock, self.options.limits.writes_per_hour)
            apis.setdefault(installation_id, [])
            api = SweepApi(self.app.client(installation_id), budgets[installation_id], self.pacer,
                      self.options.limits, sleep=self.sleep)
            apis[installation_id].append(api)
            return api

        RepoSweep(self.store, state, api_for(state.installation_id), self.app.bot_login(),
                  self.clock, ensure_current, report, self.hooks, self.app,
                  digest_lock=self._digest_lock, options=self.options).run(force)

    @contextmanager
    def _digest_lock(self, tracking: str) -> Iterator[None]:
        lease = Lease(self.engine, default_owner(), name=digest_lease_name(tracking))
        if not lease.acquire():
            raise DigestBusy(f"another sweep is writing the digest in {tracking}")
        try:
            yield
        finally:
            lease.release()

    def _stopped(self, report: SweepReport, state: RepoState, reason: str,
                 retry_at: datetime) -> None:
        log.info("reminder sweep of %s stopped: %s", state.repo, reason)
        state.error, state.next_check_at = reason, retry_at
        self.store.save(state)
        report.stopped.append((state.repo, reason))


def _next_hour(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def run_inline(engine: Engine, handler: SweepJob, *, force: bool = False,
               retry: RetryPolicy | None = None,
               stale_after: timedelta = STALE_SWEEP, timeout: float | None = None
               ) -> SweepReport:
    """One pass, its jobs run in this process (``alignbot remind-sweep``): recover sweep jobs
    stranded by a dead process, queue the due sweeps, run every sweep job that can run now
    (other kinds are left to the service), each within ``timeout`` seconds, and sum up the
    pass's jobs. A job left for a later try is reported as not finished."""
    queue = SqlJobQueue(engine)
    queue.recover(stale_after.total_seconds(), kinds=[JOB_KIND])
    ids = enqueue_due(engine, queue, clock=handler.clock, force=force)
    worker = Worker(queue, {JOB_KIND: handler}, retry=retry, timeout=timeout)
    while worker.run_once(only_own=True):
        pass
    report = SweepReport()
    for job_id in dict.fromkeys(ids):
        record = queue.get(job_id)
        if record is None:
            continue
        if record.state == JobState.DONE:
            report.add(SweepReport.from_result(record.result))
        else:
            report.pending.append((record.key, f"{record.state.value}: {record.error}"))
    return report


def run_from_settings(settings: Settings, force: bool = False) -> SweepReport:
    """``alignbot remind-sweep``: one pass with the service's settings, after the checks
    ``serve`` and ``worker`` run as they start (``bot/startup.py``: the key signs, GitHub
    takes it, the database answers within its wait): each problem one ``StartupError``."""
    check_start(settings)
    engine = wait_for_database(settings)
    try:
        migrate(engine)
        app = GitHubApp(settings.app_id, settings.private_key.get_secret_value(),
                        api_options(settings))
        return run_inline(engine, SweepJob(app, engine, options_from(settings)), force=force,
                          retry=retry_policy(settings), timeout=settings.job_timeout_seconds)
    finally:
        engine.dispose()


def options_from(settings: Settings) -> SweepOptions:
    return SweepOptions(limits=ApiLimits(max_wait=settings.github_max_wait),
                        write_interval=settings.github_write_interval)
