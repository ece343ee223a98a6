"""The service's log lines: JSON or text, each carrying the delivery, job and repository it
was written for (context variables set where a delivery or a job is handled), secrets never.

The ids are context variables, so they follow a delivery into the thread pool that verifies
it (Starlette runs it in a copy of the request's context) and a job through everything its
worker thread calls; a thread a handler starts itself begins without them."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from typing import Any, Literal

from alignbot.bot.sandbox.scrub import scrub

LogFormat = Literal["json", "text"]
FORMATS: tuple[LogFormat, ...] = ("json", "text")
FIELDS = ("delivery_id", "job_id", "repository")
_ID_LIMIT = 64

_delivery_id: ContextVar[str | None] = ContextVar("alignbot_delivery_id", default=None)
_job_id: ContextVar[int | None] = ContextVar("alignbot_job_id", default=None)
_repository: ContextVar[str | None] = ContextVar("alignbot_repository", default=None)
_SAFE = re.compile(r"[^A-Za-z0-9._/#@-]")
# A credential in a URL's query (an archive link's ``?token=``), beyond what ``scrub`` finds.
_QUERY_SECRET = re.compile(r"([?&](?:token|access_token|client_secret|code|jwt)=)[^&\s\"']+",
                           re.I)


_secrets: list[str] = []  # the service's own, given to ``configure``


def redact(text: str) -> str:
    """``text`` without secrets: ``scrub``'s tokens, keys and secret-named variables, URL
    queries' credentials, and the secrets given to ``configure``."""
    text = _QUERY_SECRET.sub(r"\1[redacted]", scrub(text))
    for secret in _secrets:
        text = text.replace(secret, "[redacted]")
    return text


def _clean(value: Any) -> str | None:
    """A name fit for a log field: a string, at most 64 characters, nothing that could start
    a new line or fake another field in the text format."""
    if not isinstance(value, str) or not value:
        return None
    return _SAFE.sub("?", value[:_ID_LIMIT])


@contextmanager
def log_context(*, delivery_id: Any = None, job_id: int | None = None,
                repository: Any = None) -> Iterator[None]:
    """Every line logged inside carries these ids (those not given keep their value)."""
    tokens: list[tuple[ContextVar[Any], Token[Any]]] = []
    if delivery_id is not None:
        tokens.append((_delivery_id, _delivery_id.set(_clean(delivery_id))))
    if job_id is not None:
        tokens.append((_job_id, _job_id.set(int(job_id))))
    if repository is not None:
        tokens.append((_repository, _repository.set(_clean(repository))))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def repository_of(payload: Mapping[str, Any]) -> str | None:
    """``repository.full_name`` of a webhook payload, or of a job's payload (``repo``)."""
    repository = payload.get("repository")
    if isinstance(repository, dict):
        return _clean(repository.get("full_name"))
    return _clean(payload.get("repo"))


def current() -> dict[str, Any]:
    """The ids in force here (None where unset)."""
    return {"delivery_id": _delivery_id.get(), "job_id": _job_id.get(),
            "repository": _repository.get()}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the three ids (null when unset)
    and the traceback, if any; message and traceback scrubbed of secrets."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
            **current(),
        }
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The classic line, with the ids that are set appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        ids = " ".join(f"{key}={value}" for key, value in current().items() if value is not None)
        text = super().format(record)
        return redact(f"{text} [{ids}]" if ids else text)


def configure(log_format: LogFormat = "text", level: int = logging.INFO,
              secrets: Iterable[str] = ()) -> None:
    """The root logger writes ``log_format`` lines to stderr; warnings go through it too.
    Uvicorn's loggers must propagate to it (``uvicorn.run(..., log_config=None)``).
    ``secrets`` (the webhook secrets, the private key) never appear, wherever they come from:
    whole, and a key line by line."""
    _secrets[:] = sorted({part.strip() for secret in secrets
                          for part in (secret, *secret.splitlines()) if len(part.strip()) >= 8},
                         key=len, reverse=True)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per archive download
    logging.captureWarnings(True)
