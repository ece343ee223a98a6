"""The FastAPI application: ``POST /webhook`` (acknowledged at once), ``GET /healthz``,
``GET /metrics`` (Prometheus, ``bot/metrics.py``) and the pages a feature adds (the status
pages, ``bot/status/pages.py``)."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from alignbot.bot.intake import Intake, IntakeLimits, Verified
from alignbot.bot.metrics import CONTENT_TYPE, Metrics
from alignbot.bot.settings import Settings
from alignbot.bot.storage import transaction
from alignbot.bot.webhooks import (
    Acceptance,
    DeliveryStore,
    SqlDeliveryStore,
    WebhookRouter,
    accept_verified,
)

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    engine: Engine,
    router: WebhookRouter,
    *,
    store: DeliveryStore | None = None,
    on_enqueued: Callable[[], None] | None = None,
    freeze_gc: bool = True,
    metrics: Metrics | None = None,
    pages: APIRouter | None = None,
) -> FastAPI:
    """The webhook service. It only verifies, records and enqueues; workers do the work.
    Bodies are read through ``bot/intake.py``, bounded until their signature matched.

    ``on_enqueued`` is called after a delivery queued jobs (e.g. ``Worker.notify`` in the
    embedded mode, so the worker does not wait for its next poll). ``freeze_gc``: at start-up,
    move everything built so far out of the garbage collector's reach (``gc.freeze()``); a full
    collection over FastAPI's, pydantic's and SQLAlchemy's objects otherwise pauses every
    request for 50-100 ms now and then. Tests that start many apps in one process turn it off.
    ``metrics``: where deliveries are counted and what ``/metrics`` serves (``app.state``
    keeps it); by default a registry of this app's own. ``pages``: the HTML pages' routes.
    """
    store = store or SqlDeliveryStore(engine)
    metrics = metrics or Metrics(engine)
    intake = Intake(IntakeLimits(max_bytes=settings.max_body_bytes,
                                 seconds=settings.body_timeout_seconds,
                                 at_once=settings.max_unverified_bodies),
                    settings.webhook_secret_bytes(), on_refused=metrics.body_refused)
    metrics.watch_intake(lambda: intake.reading)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if freeze_gc:
            gc.freeze()
        yield

    app = FastAPI(
        title="alignbot", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.state.metrics = metrics
    if pages is not None:
        app.include_router(pages)

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        headers = dict(request.headers)
        body = await intake.read(request.receive, headers)
        if not isinstance(body, Verified):
            metrics.delivery(headers, body, verified=False)
            return _respond(body)
        # Reading the verified body back, parsing it and the database write leave the loop.
        result = await run_in_threadpool(_accept, store, router, headers, body)
        metrics.delivery(headers, result)
        if result.job_ids and on_enqueued is not None:
            on_enqueued()
        return _respond(result)

    @app.get("/metrics")
    async def prometheus() -> Response:
        # the queue's gauges read the database: off the event loop
        return Response(await run_in_threadpool(metrics.exposition), media_type=CONTENT_TYPE)

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        if await run_in_threadpool(database_ok, engine):
            return JSONResponse({"status": "ok"})
        return JSONResponse({"error": "database unavailable"}, status_code=503)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": str(error.detail)}, status_code=error.status_code, headers=error.headers
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "invalid request"}, status_code=400)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        return JSONResponse({"error": "internal error"}, status_code=500)

    return app


def _accept(store: DeliveryStore, router: WebhookRouter, headers: dict[str, str],
            body: Verified) -> Acceptance:
    return accept_verified(store, router, headers, body.read())


def database_ok(engine: Engine) -> bool:
    try:
        with transaction(engine) as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError:
        log.exception("health check: the database is unavailable")
        return False
    return True


def _respond(result: Acceptance) -> JSONResponse:
    return JSONResponse(result.body, status_code=result.status_code,
                        headers=dict(result.headers))
