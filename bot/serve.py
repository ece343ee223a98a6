"""``alignbot serve``: the webhook service, the worker and its handlers, and the timer that
queues the reminder sweeps, in one process."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import Engine

from . import alignment, commands, logs, reminders, trust
from .app import create_app
from .github import ApiOptions, GitHubApp
from .metrics import Metrics
from .periodic import Periodic
from .queue import SqlJobQueue
from .sandbox import Containment, SandboxLimits, remove_stale, run_check
from .settings import Settings
from .storage import make_engine, migrate
from .webhooks import WebhookRouter
from .worker import Worker, retry_policy

log = logging.getLogger(__name__)


@dataclass
class Service:
    app: FastAPI
    engine: Engine
    worker: Worker
    github: GitHubApp
    reminder_pass: Periodic  # queues the due reminder sweeps
    metrics: Metrics


def build(settings: Settings) -> Service:
    """Wire the parts; nothing starts until ``worker.start()`` and the HTTP server run."""
    engine = make_engine(settings.database_url)
    migrate(engine)
    queue = SqlJobQueue(engine)
    metrics = Metrics(engine)
    github = GitHubApp(settings.app_id, settings.private_key.get_secret_value(), ApiOptions(
        base_url=settings.github_api_url, max_wait=settings.github_max_wait,
        seconds_between_writes=settings.github_write_interval), observe=metrics.github_request)
    containment = sandbox_containment(settings, engine)
    removed = remove_stale(containment.base_dir)
    if removed:
        log.info("removed %d sandbox work folder(s) left by a previous run", len(removed))
    job = alignment.AlignmentJob(
        app=github, queue=queue,
        limits=SandboxLimits(wall_seconds=settings.sandbox_wall_seconds,
                             memory_bytes=settings.sandbox_memory_bytes),
        containment=containment, sandbox=metrics.sandbox(run_check),
        gate=trust.TrustGate(engine, github))
    command_job = commands.CommandJob(app=github, queue=queue, engine=engine)
    sweep_job = reminders.SweepJob(github, engine, reminders.options_from(settings))
    worker = Worker(queue, {alignment.JOB_KIND: job, commands.JOB_KIND: command_job,
                            reminders.JOB_KIND: sweep_job},
                    concurrency=settings.workers, retry=retry_policy(settings),
                    limits={reminders.JOB_KIND: reminders.SWEEPS_AT_ONCE})
    metrics.instrument(worker.handlers)
    app = create_app(settings, engine, webhook_router(), on_enqueued=worker.notify,
                     metrics=metrics)

    def reminder_pass() -> None:
        if reminders.enqueue_due(engine, queue):
            worker.notify()

    timer = Periodic("reminder-pass", reminder_pass, reminders.PASS_INTERVAL,
                     reminders.FIRST_PASS_DELAY)
    return Service(app=app, engine=engine, worker=worker, github=github, reminder_pass=timer,
                   metrics=metrics)


def webhook_router() -> WebhookRouter:
    """Every feature's webhook handlers: what the App subscribes to (``bot/manifest.py``)."""
    router = WebhookRouter()
    alignment.register(router)
    commands.register(router)
    return router


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
                       expose=tuple(settings.sandbox_interpreters), base_dir=base_dir)


def serve(settings: Settings) -> None:
    logs.configure(settings.log_format, secrets=[
        settings.private_key.get_secret_value(),
        *(secret.get_secret_value() for secret in settings.webhook_secrets)])
    service = build(settings)
    service.worker.start()
    service.reminder_pass.start()
    try:
        uvicorn.run(service.app, host=settings.host, port=settings.port, log_level="info",
                    access_log=False, log_config=None)  # uvicorn's lines in our format
    finally:
        service.reminder_pass.stop(timeout=30)
        service.worker.stop(timeout=30)
