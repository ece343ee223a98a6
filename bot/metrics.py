"""Prometheus metrics of one App instance: deliveries, jobs, sandbox runs, GitHub requests,
reminders, and the shared queue read from the database at scrape time.

Each ``Metrics`` has its own registry (never the process-wide default), so tests and several
apps in one process never count into each other. A process serves its own: ``alignbot serve``
at ``GET /metrics`` of the webhook app; a process without the web app (a worker) can serve
its registry on a port of its own with ``Metrics.serve_http``. Counters are per process (sum
them across processes); the queue gauges are the database's, the same in every process (take
one, or ``max``, never the sum).

Labels are bounded: event names and job kinds the App knows (anything else is ``other``),
outcomes and states from fixed sets, GitHub routes as the templates of ``bot/api_routes.py``
(never a path with a repository or a number in it), HTTP statuses. No label holds a
repository name, a login or anything else a webhook sender chooses: the number of
repositories grows with installations, and a repository's story is in the logs, whose lines
carry it (``bot/logs.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select
from sqlalchemy.exc import SQLAlchemyError

from alignbot.bot.api_routes import template_of
from alignbot.bot.errors import is_transient
from alignbot.bot.jobs import ALIGN, ALIGN_SHARD, COMMAND, REMINDER_SWEEP
from alignbot.bot.queue import JobRecord
from alignbot.bot.sandbox import SandboxResult
from alignbot.bot.storage import ACTIVE_STATES, JOBS, JobState, transaction, utcnow
from alignbot.bot.webhooks import DELIVERY_HEADER, EVENT_HEADER, SHAPES, Acceptance
from alignbot.bot.worker import JobSuperseded

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OTHER = "other"
UNVERIFIED = "unverified"  # the event of a delivery whose signature failed: not to be believed
EVENTS = frozenset({*SHAPES} - {"*"} | {"ping", "installation", "installation_repositories"})
KINDS = frozenset({ALIGN, ALIGN_SHARD, COMMAND, REMINDER_SWEEP})
RATE_RESOURCES = frozenset({"core", "search", "graphql", "code_search"})
BODY_REFUSALS = frozenset({"too_large", "too_slow", "busy"})
# seconds: a command answers in one, a check runs the engine for minutes
JOB_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600)


def delivery_outcome(result: Acceptance) -> str:
    """What became of a delivery, from the answer it got."""
    by_status = {202: "accepted", 401: "bad_signature", 408: "too_slow", 413: "too_large",
                 503: "unavailable"}
    if result.status_code in by_status:
        return by_status[result.status_code]
    if result.status_code == 200:
        return str(result.body.get("status") or "ignored")  # duplicate, ignored, pong, recorded
    return "malformed" if result.status_code == 400 else "error"


def sandbox_outcome(result: SandboxResult) -> str:
    """ok, findings, timeout, killed (a signal: a limit), refused, setup_failed or crash."""
    reason = result.reason or ""
    if result.report is not None:
        return "findings" if result.exit_code == 1 or result.report.get("findings") else "ok"
    if reason.startswith("refused"):
        return "refused"
    if "wall-clock limit" in reason:
        return "timeout"
    if "was killed by" in reason:
        return "killed"
    if reason.startswith("setup command"):
        return "setup_failed"
    return "crash"


def job_outcome(error: BaseException | None) -> str:
    """done, superseded, rate_limited, transient (the worker retries it) or failed."""
    if error is None:
        return "done"
    if isinstance(error, JobSuperseded):
        return "superseded"
    if getattr(error, "retry_at", None) is not None:
        return "rate_limited"
    return "transient" if is_transient(error) else "failed"


class QueueCollector(Collector):
    """The queue as the database holds it, read at each scrape: jobs queued and running by
    kind, and the age of the oldest (queued: since it became due; running: since it started).
    One indexed query over the active jobs; a database that cannot answer yields
    ``alignbot_queue_up 0`` instead of failing the scrape."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("alignbot_queue_up", "1 when the queue could be read")
        depth = GaugeMetricFamily("alignbot_queue_jobs", "jobs in the queue",
                                  labels=["kind", "state"])
        age = GaugeMetricFamily("alignbot_queue_oldest_job_age_seconds",
                                "queued: since the oldest became due; running: since the "
                                "longest-running started", labels=["kind", "state"])
        query = (select(JOBS.c.kind, JOBS.c.state, func.count(),
                        func.min(JOBS.c.available_at), func.min(JOBS.c.started_at))
                 .where(JOBS.c.state.in_([state.value for state in ACTIVE_STATES]))
                 .group_by(JOBS.c.kind, JOBS.c.state))
        try:
            with transaction(self.engine) as conn:
                rows = conn.execute(query).all()
        except SQLAlchemyError as error:
            log.warning("metrics: the queue could not be read: %s", type(error).__name__)
            up.add_metric([], 0)
            yield up
            return
        now = utcnow()
        counts: dict[tuple[str, str], tuple[int, float]] = {}
        for kind, state, count, due, started in rows:
            since = started if state == JobState.RUNNING else due
            seconds = max((now - since).total_seconds(), 0.0) if since is not None else 0.0
            key = (_bounded(kind, KINDS), str(state))
            before = counts.get(key, (0, 0.0))
            counts[key] = (before[0] + int(count), max(before[1], seconds))
        for kind in sorted(KINDS):  # a kind with nothing queued reads 0, not "no data"
            for state in ACTIVE_STATES:
                counts.setdefault((kind, state.value), (0, 0.0))
        for (kind, state), (count, seconds) in sorted(counts.items()):
            depth.add_metric([kind, state], count)
            age.add_metric([kind, state], seconds)
        up.add_metric([], 1)
        yield from (up, depth, age)


class Metrics:
    """The App's metrics, in a registry of their own (see the module's docstring)."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.deliveries = Counter("alignbot_webhook_deliveries", "webhook deliveries by event "
                                  "and outcome", ["event", "outcome"], registry=r)
        self.jobs = Histogram("alignbot_job_duration_seconds", "jobs run by this process, by "
                              "kind and outcome", ["kind", "outcome"], buckets=JOB_BUCKETS,
                              registry=r)
        self.sandbox_runs = Counter("alignbot_sandbox_runs", "sandboxed checks by outcome",
                                    ["outcome"], registry=r)
        self.github_requests = Counter("alignbot_github_requests", "requests to GitHub by "
                                       "method, route template and status (0: no answer)",
                                       ["method", "route", "status"], registry=r)
        self.rate_remaining = Gauge("alignbot_github_rate_limit_remaining", "X-RateLimit-"
                                    "Remaining of GitHub's last answer, by resource",
                                    ["resource"], registry=r)
        self.reminders = Counter("alignbot_reminders_posted", "reminder comments posted",
                                 registry=r)
        self.bodies_refused = Counter("alignbot_webhook_bodies_refused", "webhook bodies "
                                      "refused before their signature was checked, by reason "
                                      "(too_large, too_slow, busy)", ["reason"], registry=r)
        self.bodies_reading = Gauge("alignbot_webhook_bodies_reading", "webhook bodies being "
                                    "read now, their signature not yet checked", registry=r)
        if engine is not None:
            r.register(QueueCollector(engine))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    def serve_http(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve this registry at ``http://addr:port/metrics`` from a thread of its own, for a
        process without the web app (a worker); returns (server, thread)."""
        from prometheus_client import start_http_server

        return start_http_server(port, addr, registry=self.registry)

    # -- what the App tells ------------------------------------------------------------

    def delivery(self, headers: Mapping[str, str], result: Acceptance,
                 verified: bool = True) -> None:
        """One answered delivery; ``verified=False`` for one answered before its signature
        was checked, whose event header is not to be believed."""
        outcome = delivery_outcome(result)
        lowered = {name.lower(): value for name, value in headers.items()}
        verified = verified and result.status_code not in (401, 413) \
            and DELIVERY_HEADER in lowered
        event = _bounded(lowered.get(EVENT_HEADER, "").strip(), EVENTS) if verified \
            else UNVERIFIED
        self.deliveries.labels(event, outcome).inc()

    def body_refused(self, reason: str) -> None:
        """A ``alignbot.bot.intake.Intake``'s ``on_refused``."""
        self.bodies_refused.labels(_bounded(reason, BODY_REFUSALS)).inc()

    def watch_intake(self, reading: Callable[[], int]) -> None:
        """Read the number of bodies being read from ``reading`` at each scrape."""
        self.bodies_reading.set_function(reading)

    def github_request(self, method: str, path: str, status: int,
                       headers: Mapping[str, str]) -> None:
        """A ``alignbot.bot.github.RequestObserver``."""
        self.github_requests.labels(method, template_of(method, path), str(status)).inc()
        remaining = headers.get("x-ratelimit-remaining")
        if remaining is not None and remaining.isdigit():
            resource = _bounded(headers.get("x-ratelimit-resource") or "core", RATE_RESOURCES)
            self.rate_remaining.labels(resource).set(int(remaining))

    def sandbox(self, run: Callable[..., SandboxResult]) -> Callable[..., SandboxResult]:
        """``run`` (``alignbot.bot.sandbox.run_check``), each result counted by outcome and
        logged."""
        def observed(*args: Any, **kwargs: Any) -> SandboxResult:
            result = run(*args, **kwargs)
            outcome = sandbox_outcome(result)
            self.sandbox_runs.labels(outcome).inc()
            log.info("sandbox: %s in %.1f s (%s)", outcome, result.duration,
                     ", ".join(result.isolation) or "no isolation layers reported")
            return result
        return observed

    def job_handler(self, kind: str, handler: Callable[[JobRecord], Any]) -> Callable[..., Any]:
        """``handler`` timed by outcome; its ``give_up`` kept; a reminder sweep's posts
        counted from its result."""
        def observed(job: JobRecord) -> Any:
            started = time.monotonic()
            error: BaseException | None = None
            try:
                result = handler(job)
            except BaseException as exc:
                error = exc
                raise
            finally:
                self.jobs.labels(_bounded(kind, KINDS), job_outcome(error)).observe(
                    time.monotonic() - started)
            if kind == REMINDER_SWEEP and isinstance(result, dict):
                self.reminders.inc(len(result.get("posted") or []))
            return result

        give_up = getattr(handler, "give_up", None)
        if give_up is not None:
            observed.give_up = give_up  # type: ignore[attr-defined]
        return observed

    def instrument(self, handlers: dict[str, Any]) -> None:
        """Wrap a worker's handlers (``Worker.handlers``) in place."""
        for kind, handler in list(handlers.items()):
            handlers[kind] = self.job_handler(kind, handler)


def _bounded(value: str, known: frozenset[str]) -> str:
    return value if value in known else OTHER
