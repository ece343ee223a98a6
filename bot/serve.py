"""The App's processes: ``alignbot serve`` (the webhook service, the worker and its handlers,
and the timer that queues the reminder sweeps, in one process), ``alignbot serve
--no-worker`` (webhooks only) and ``alignbot worker`` (the worker and the timer, no HTTP).

Any number of web and worker processes share one PostgreSQL database: the queue hands each
job to one worker under a lease (``bot/queue.py``), and the reminder timer queues sweeps only
in the worker holding the ``reminder-pass`` lease. On SQLite the one process is the whole
App (``Role.ALL``): a split role there is refused (``role_problem``).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, FastAPI
from sqlalchemy.engine import Engine, make_url

from . import alignment, commands, logs, reminders, sharding, status, trust, workdir
from .app import create_app
from .github import GitHubApp, api_options
from .health import HealthFile
from .lease import Lease, default_owner
from .metrics import Metrics
from .periodic import Periodic
from .queue import SqlJobQueue
from .sandbox import Containment, SandboxLimits, remove_stale, run_check
from .settings import Settings
from .shard_groups import ShardGroups
from .startup import StartRequest, check_start, first_line, ping, wait_for_database
from .storage import migrate
from .webhooks import WebhookRouter
from .worker import Worker, retry_policy

log = logging.getLogger(__name__)

REMINDER_LEASE = "reminder-pass"  # the one worker process that queues the reminder sweeps
# The request line and headers h11 buffers before a request is whole: beyond it, a 400.
MAX_HEADER_BYTES = 16 * 1024
KEEP_ALIVE_SECONDS = 5


class Role(StrEnum):
    """What one process of the App does."""

    ALL = "all"  # ``alignbot serve``: webhooks, worker and timer
    WEB = "web"  # ``alignbot serve --no-worker``: webhooks only
    WORKER = "worker"  # ``alignbot worker``: jobs and the reminder timer, no HTTP


def role_problem(settings: Settings, role: Role) -> str | None:
    """Why ``role`` cannot run with ``settings`` (one line), or None. A split role needs
    PostgreSQL: a web process without a worker on its SQLite file would queue jobs that no
    one runs, and SQLite's one writer is no queue for several hosts."""
    if role is Role.ALL or make_url(settings.database_url).get_backend_name() == "postgresql":
        return None
    what = "alignbot worker" if role is Role.WORKER else "alignbot serve --no-worker"
    return (f"{what} shares the job queue with other processes, which needs PostgreSQL "
            "(ALIGNBOT_DATABASE_URL=postgresql+psycopg://…); on SQLite run `alignbot serve` "
            "alone, which is the web service and the worker in one process")


@dataclass
class Service:
    app: FastAPI
    engine: Engine
    worker: Worker
    github: GitHubApp
    reminder_pass: Periodic  # queues the due reminder sweeps
    metrics: Metrics


def _database(settings: Settings) -> tuple[Engine, SqlJobQueue]:
    engine = wait_for_database(settings)
    migrate(engine)
    return engine, SqlJobQueue(engine, lease=settings.job_lease_seconds)


def webhook_router() -> WebhookRouter:
    """Every feature's webhook handlers: what the App subscribes to (``bot/manifest.py``)."""
    router = WebhookRouter()
    alignment.register(router)
    commands.register(router)
    status.register(router)
    return router


def status_pages(settings: Settings, engine: Engine, github: GitHubApp) -> APIRouter:
    """The status pages' routes; signing in with GitHub where the settings allow it."""
    sessions = oauth = None
    if settings.sign_in:
        public = settings.public_url or f"http://{settings.host}:{settings.port}"
        sessions = status.Sessions(settings.session_key.get_secret_value(),
                                   secure=public.startswith("https://"))
        oauth = status.GitHubOAuth(settings.oauth_client_id,
                                   settings.oauth_client_secret.get_secret_value(),
                                   settings.github_web_url, settings.github_api_url,
                                   f"{public}/login/callback")
    viewers = status.GitHubViewers(github, settings.github_api_url)
    pages = status.StatusPages(engine, viewers, viewers.file_at, sessions, oauth,
                               history=settings.status_history)
    return status.router(pages)


def _github(settings: Settings, metrics: Metrics) -> GitHubApp:
    return GitHubApp(settings.app_id, settings.private_key.get_secret_value(),
                     api_options(settings), observe=metrics.github_request)


def build(settings: Settings) -> Service:
    """The whole App in one process (``Role.ALL``); nothing starts until ``worker.start()``
    and the HTTP server run."""
    engine, queue = _database(settings)
    metrics = Metrics(engine)
    worker, timer, github = build_worker(settings, engine, queue, metrics)
    app = create_app(settings, engine, webhook_router(), on_enqueued=worker.notify,
                     metrics=metrics, pages=status_pages(settings, engine, github))
    return Service(app=app, engine=engine, worker=worker, github=github, reminder_pass=timer,
                   metrics=metrics)


def build_web(settings: Settings, made: list[StartRequest] | None = None) -> FastAPI:
    """The webhook service alone (``Role.WEB``): it records and queues; workers elsewhere run
    the jobs. Its ``/metrics`` has the deliveries and the shared queue (and ``made``, the
    requests of its start)."""
    engine, _ = _database(settings)
    metrics = Metrics(engine)
    count_start(metrics, made or [])
    return create_app(settings, engine, webhook_router(), metrics=metrics,
                      pages=status_pages(settings, engine, _github(settings, metrics)))


def build_worker(settings: Settings, engine: Engine, queue: SqlJobQueue, metrics: Metrics
                 ) -> tuple[Worker, Periodic, GitHubApp]:
    """The worker with every job's handler, and the timer that queues the due reminder
    sweeps while this process holds the ``reminder-pass`` lease."""
    github = _github(settings, metrics)
    containment = sandbox_containment(settings, engine)
    removed = remove_stale(containment.base_dir)
    if removed:
        log.info("removed %d sandbox work folder(s) left by a previous run", len(removed))
    swept = workdir.sweep(containment.base_dir)
    if swept:
        log.info("removed %d worker folder(s) left by stopped processes", len(swept))
    folder = workdir.WorkFolder.create(containment.base_dir)
    atexit.register(folder.close)
    groups = ShardGroups(queue)
    job = alignment.AlignmentJob(
        app=github, queue=queue,
        limits=SandboxLimits(wall_seconds=settings.sandbox_wall_seconds,
                             memory_bytes=settings.sandbox_memory_bytes,
                             processes=settings.sandbox_processes, cpus=settings.sandbox_cpus,
                             disk_bytes=settings.sandbox_disk_bytes),
        containment=containment, sandbox=metrics.sandbox(run_check),
        gate=trust.TrustGate(engine, github), engine=engine, max_shards=settings.max_shards,
        merge_base_check=settings.baseline, sharding=sharding.Sharding(groups),
        work_dir=folder.path, status_url=settings.public_url)
    command_job = commands.CommandJob(app=github, queue=queue, engine=engine)
    sweep_job = reminders.SweepJob(github, engine, reminders.options_from(settings))
    lease = settings.job_lease_seconds
    worker = Worker(queue, {alignment.JOB_KIND: job, commands.JOB_KIND: command_job,
                            sharding.JOB_KIND: sharding.ShardJob(job, groups),
                            reminders.JOB_KIND: sweep_job,
                            status.JOB_KIND: status.StatusJob(github, engine, job)},
                    concurrency=settings.workers, retry=retry_policy(settings),
                    limits={reminders.JOB_KIND: reminders.SWEEPS_AT_ONCE},
                    heartbeat=min(2.0, lease / 3), reclaim_interval=lease / 2,
                    alone=engine.url.get_backend_name() == "sqlite",
                    timeout=settings.job_timeout_seconds)
    # held from pass to pass by one process; another takes it over two passes after it died
    timer_lease = Lease(engine, default_owner(), name=REMINDER_LEASE,
                        ttl=timedelta(seconds=2 * reminders.PASS_INTERVAL))
    metrics.instrument(worker.handlers)

    def reminder_pass() -> None:
        if timer_lease.acquire() and reminders.enqueue_due(engine, queue):
            worker.notify()

    timer = Periodic("reminder-pass", reminder_pass, reminders.PASS_INTERVAL,
                     reminders.FIRST_PASS_DELAY)
    return worker, timer, github


def sandbox_containment(settings: Settings, engine: Engine) -> Containment:
    """What pull-request code may see, from the service's settings only: whole folders of the
    service hidden (the database's with its -wal/-shm/-journal files, the key's), the
    operator's interpreters allowed."""
    hidden: list[Path] = [*settings.sandbox_hide]
    files = [settings.private_key_file] if settings.private_key_file else []
    database = engine.url.database
    if engine.url.get_backend_name() == "sqlite" and database and database != ":memory:":
        files.append(Path(database))
    for file in files:
        for path in {Path(os.path.abspath(file)), file.resolve()}:
            if path.parent != path.parent.parent:
                hidden.append(path.parent)
            else:  # a file at the root has no folder of its own: the file and its siblings
                hidden += [path.with_name(path.name + s) for s in ("", "-wal", "-shm",
                                                                    "-journal")]
    base_dir = settings.sandbox_dir
    if base_dir is not None:
        base_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
    return Containment(hide=tuple(dict.fromkeys(hidden)),
                       expose=tuple(settings.sandbox_interpreters), base_dir=base_dir,
                       bwrap=settings.sandbox_bwrap or None)


def configure_logging(settings: Settings) -> None:
    """The process's log lines on stderr, in the settings' format, without its secrets."""
    logs.configure(settings.log_format, secrets=[
        settings.private_key.get_secret_value(),
        *(secret.get_secret_value() for secret in settings.webhook_secrets),
        *(secret.get_secret_value() for secret in (settings.oauth_client_secret,
                                                    settings.session_key)
          if secret.get_secret_value())])


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How the HTTP server runs: uvicorn's lines in our format, and what a sender can make it
    hold before the app sees a request. h11, not httptools: httptools keeps every header
    line of an unfinished request (four connections streaming headers grew the service by
    840 MiB), h11 refuses a request whose head passes ``MAX_HEADER_BYTES``; either way
    uvicorn buffers at most 64 KiB of an unread body per connection before it stops reading."""
    return {"host": settings.host, "port": settings.port, "log_level": "info",
            "access_log": False, "log_config": None, "http": "h11",
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "limit_concurrency": settings.max_connections,
            "timeout_keep_alive": KEEP_ALIVE_SECONDS}


def count_start(metrics: Metrics, made: list[StartRequest]) -> None:
    for request in made:
        metrics.github_request(*request)


def serve(settings: Settings, *, worker: bool = True) -> None:
    """``alignbot serve``: the whole App, or with ``worker=False`` the webhooks only."""
    configure_logging(settings)
    made = check_start(settings)
    if not worker:
        uvicorn.run(build_web(settings, made), **uvicorn_options(settings))
        return
    service = build(settings)
    count_start(service.metrics, made)
    service.worker.start()
    service.reminder_pass.start()
    try:
        uvicorn.run(service.app, **uvicorn_options(settings))
    finally:
        service.reminder_pass.stop(timeout=30)
        service.worker.stop(timeout=30)


def work(settings: Settings, stop: threading.Event | None = None) -> None:
    """``alignbot worker``: run jobs and the reminder timer until SIGTERM or SIGINT (or
    ``stop``), then finish the running jobs for up to 30 s; one left running then is
    reclaimed by another worker once its lease expires."""
    configure_logging(settings)
    made = check_start(settings)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    engine, queue = _database(settings)
    metrics = Metrics(engine)
    count_start(metrics, made)
    worker, timer, _ = build_worker(settings, engine, queue, metrics)
    if settings.metrics_port is not None:
        metrics.serve_http(settings.metrics_port, settings.host)
    health = None
    if settings.health_file is not None:
        health = HealthFile(settings.health_file, lambda: worker.alive() and _answers(engine))
    worker.start()
    timer.start()
    try:
        if health is not None:
            health.start()
        log.info("worker %s started: %d thread(s), job lease %g s", worker.name,
                 worker.concurrency, settings.job_lease_seconds)
        stop.wait()
    finally:
        if health is not None:
            health.stop()
        timer.stop(timeout=30)
        worker.stop(timeout=30)
        engine.dispose()


def _answers(engine: Engine) -> bool:
    """Whether the database answers a query now."""
    try:
        ping(engine)
    except Exception as error:
        log.warning("the database does not answer: %s", first_line(error))
        return False
    return True
