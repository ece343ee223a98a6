"""The reminder scheduler: sweep passes under a database lease, in a thread of ``alignbot serve``
or once from ``alignbot remind-sweep`` (cron)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import requests
from github import BadCredentialsException, GithubException
from sqlalchemy import Engine, or_, select, update

from .github import ApiOptions, GitHubApp
from .reminders import (
    Api,
    ApiLimits,
    Budget,
    BudgetExhausted,
    LeaseLost,
    RepoState,
    RepoSweep,
    Store,
    SweepHooks,
    SweepOptions,
    SweepReport,
    WritePacer,
)
from .settings import Settings
from .storage import (
    INSTALLATIONS,
    LOCKS,
    insert_ignore,
    make_engine,
    migrate,
    transaction,
    utcnow,
)

log = logging.getLogger(__name__)

LEASE_NAME = "reminder-sweep"
LEASE_TTL = timedelta(minutes=10)
PASS_INTERVAL = 300.0  # seconds between passes; a repository is swept once per week
FIRST_PASS_DELAY = 60.0  # let the service settle first


class Lease:
    """A lease on a database row with an expiry.

    Taken with one ``UPDATE … WHERE name = ? AND (expires_at < now OR owner = me)``: on
    PostgreSQL a concurrent taker waits on the row lock and then finds the lease unexpired; on
    SQLite the statement runs under the single writer lock. A holder renews it (``guard``)
    before every write, at most every ``ttl / 3``; a holder that stalled past the expiry finds
    the lease gone and stops (:class:`LeaseLost`) instead of writing beside the new holder.
    """

    def __init__(self, engine: Engine, owner: str, *, name: str = LEASE_NAME,
                 ttl: timedelta = LEASE_TTL, clock: Callable[[], datetime] = utcnow) -> None:
        self.engine, self.owner, self.name, self.ttl, self.clock = engine, owner, name, ttl, clock
        self._renewed = 0.0

    def acquire(self) -> bool:
        now = self.clock()
        with transaction(self.engine) as conn:
            insert_ignore(conn, LOCKS, {"name": self.name, "owner": None, "acquired_at": None,
                                        "expires_at": now - timedelta(seconds=1)},
                          keys=["name"])
            taken = conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name,
                or_(LOCKS.c.expires_at < now, LOCKS.c.owner == self.owner),
            ).values(owner=self.owner, expires_at=now + self.ttl, acquired_at=now)).rowcount
        self._renewed = time.monotonic()
        return taken == 1

    def renew(self) -> bool:
        now = self.clock()
        with transaction(self.engine) as conn:
            kept = conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name, LOCKS.c.owner == self.owner,
            ).values(expires_at=now + self.ttl)).rowcount
        self._renewed = time.monotonic()
        return kept == 1

    def guard(self) -> None:
        """Renew when a third of the lease has passed; raise LeaseLost if it is gone."""
        if time.monotonic() - self._renewed >= self.ttl.total_seconds() / 3 \
                and not self.renew():
            raise LeaseLost(f"the {self.name} lease passed to another owner")

    def release(self) -> None:
        now = self.clock()
        with transaction(self.engine) as conn:
            conn.execute(update(LOCKS).where(
                LOCKS.c.name == self.name, LOCKS.c.owner == self.owner,
            ).values(owner=None, expires_at=now - timedelta(seconds=1)))

    def holder(self) -> str | None:
        with transaction(self.engine) as conn:
            row = conn.execute(select(LOCKS.c.owner, LOCKS.c.expires_at).where(
                LOCKS.c.name == self.name)).first()
        return row.owner if row is not None and row.expires_at >= self.clock() else None


def installed_repos(engine: Engine) -> list[tuple[int, str]]:
    """(installation id, owner/name) of every repository of every live installation."""
    with transaction(engine) as conn:
        rows = conn.execute(select(INSTALLATIONS.c.id, INSTALLATIONS.c.repositories).where(
            INSTALLATIONS.c.deleted.is_(False), INSTALLATIONS.c.suspended.is_(False),
        ).order_by(INSTALLATIONS.c.id))
        return [(int(i), name) for i, names in rows for name in sorted(names or [])]


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Scheduler:
    """Runs sweep passes: every ``interval`` seconds in its thread, or one ``run_pass()``.

    A pass takes the lease (or does nothing: another replica is sweeping), then runs each
    installed repository whose weekly time has come, or whose stopped sweep may resume. A
    spent budget stops that installation's repositories until the next hour; a GitHub error
    stops one repository until ``error_retry`` later; both keep the cursor.
    """

    def __init__(self, engine: Engine, app: GitHubApp, *, options: SweepOptions | None = None,
                 interval: float = PASS_INTERVAL, first_delay: float = FIRST_PASS_DELAY,
                 clock: Callable[[], datetime] = utcnow, owner: str | None = None,
                 hooks: SweepHooks | None = None, lease_ttl: timedelta = LEASE_TTL,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.engine, self.app, self.clock, self.sleep = engine, app, clock, sleep
        self.options = options or SweepOptions()
        self.interval, self.first_delay = interval, first_delay
        self.hooks = hooks or SweepHooks()
        self.store = Store(engine)
        self.lease = Lease(engine, owner or default_owner(), ttl=lease_ttl, clock=clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass -----------------------------------------------------------------------

    def run_pass(self, force: bool = False) -> SweepReport:
        """One pass; ``force`` sweeps every repository now, not only those that are due
        (still at most one reminder per pull request per week)."""
        report = SweepReport()
        if not self.lease.acquire():
            report.busy = True
            return report
        apis: list[Api] = []
        pacer = WritePacer(self.options.write_interval, self.options.writes_per_minute,
                           sleep=self.sleep)
        try:
            self._sweep_all(report, apis, pacer, force)
        except LeaseLost as exc:
            report.stopped.append(("*", str(exc)))
        finally:
            for api in apis:
                api.budget.flush()
                report.calls.update(api.calls)
            report.write_wait = pacer.slept
            self.lease.release()
        return report

    def _sweep_all(self, report: SweepReport, apis: list[Api], pacer: WritePacer,
                   force: bool) -> None:
        exhausted: set[int] = set()
        budgets: dict[int, Budget] = {}

        def api_for(installation_id: int) -> Api:
            """A client per repository (its token is fresh: a pass can outlast one), one
            budget per installation."""
            if installation_id not in budgets:
                budgets[installation_id] = Budget(
                    self.engine, installation_id, self.options.limits.calls_per_hour,
                    self.clock, self.options.limits.writes_per_hour)
            apis.append(Api(self.app.client(installation_id), budgets[installation_id], pacer,
                            self.options.limits, sleep=self.sleep))
            return apis[-1]

        def digest_api(repo: str) -> tuple[Api, int] | None:
            installation_id = self.store.installation_of(repo)
            return None if installation_id is None else (api_for(installation_id),
                                                         installation_id)

        for installation_id, repo in installed_repos(self.engine):
            state = self.store.state(repo, installation_id)
            if installation_id in exhausted or not (force or state.due(self.clock())):
                continue
            self.lease.guard()
            sweep = RepoSweep(self.store, state, api_for(installation_id), self.app.bot_login(),
                              self.clock, self.lease.guard, report, self.hooks, digest_api,
                              self.options)
            try:
                sweep.run(force)
            except BudgetExhausted as exc:
                exhausted.add(installation_id)
                self._stopped(report, state, str(exc), _next_hour(self.clock()))
            except BadCredentialsException as exc:  # revoked or expired early: next pass
                self.app.forget_token(installation_id)
                self._stopped(report, state, f"GitHub refused the token: {exc}", self.clock())
            except (GithubException, requests.RequestException) as exc:
                self._stopped(report, state, f"GitHub error: {exc}"[:2000],
                              self.clock() + self.options.error_retry)

    def _stopped(self, report: SweepReport, state: RepoState, reason: str,
                 retry_at: datetime) -> None:
        log.info("reminder sweep of %s stopped: %s", state.repo, reason)
        state.error, state.next_check_at = reason, retry_at
        self.store.save(state)
        report.stopped.append((state.repo, reason))

    # -- the thread ---------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="alignbot-scheduler",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Ask the thread to stop after its current pass; True once it has."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped

    def _loop(self) -> None:
        if self._stop.wait(self.first_delay):
            return
        while not self._stop.is_set():
            try:
                report = self.run_pass()
                if report.posted or report.stopped or report.digests:
                    log.info("reminder pass:\n%s", report.summary())
            except Exception:
                log.exception("the reminder pass failed; the next one retries")
            self._stop.wait(self.interval)


def _next_hour(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def run_from_settings(settings: Settings, force: bool = False) -> SweepReport:
    """``alignbot remind-sweep``: one pass with the service's settings."""
    engine = make_engine(settings.database_url)
    try:
        migrate(engine)
        app = GitHubApp(settings.app_id, settings.private_key.get_secret_value(), ApiOptions(
            base_url=settings.github_api_url, max_wait=settings.github_max_wait,
            seconds_between_writes=settings.github_write_interval))
        options = SweepOptions(limits=ApiLimits(max_wait=settings.github_max_wait),
                               write_interval=settings.github_write_interval)
        return Scheduler(engine, app, options=options).run_pass(force=force)
    finally:
        engine.dispose()
