"""Webhook intake: HMAC verification, delivery de-duplication, routing to jobs, one transaction."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast
from urllib.parse import parse_qs

from sqlalchemy import Connection, Engine, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from alignbot.bot import nesting
from alignbot.bot.logs import log_context, repository_of
from alignbot.bot.queue import JobRequest, SqlJobQueue
from alignbot.bot.storage import DELIVERIES, INSTALLATIONS, transaction, upsert, utcnow

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "x-hub-signature-256"
EVENT_HEADER = "x-github-event"
DELIVERY_HEADER = "x-github-delivery"
DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024
MAX_NAME_LENGTH = 64  # event names, actions and delivery ids (a GUID is 36)
INSTALLATION_EVENTS = ("installation", "installation_repositories")

_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")
_INSERT_DELIVERY = insert(DELIVERIES)  # built once: it runs for every delivery


def verify_signature(secrets: Sequence[bytes], body: bytes, header: str | None) -> bool:
    """True if ``header`` (``sha256=<hex>``) is the HMAC-SHA256 of ``body`` under any secret."""
    signature = Signature(secrets, header)
    signature.update(body)
    return signature.matches()


class Signature:
    """An ``X-Hub-Signature-256`` header checked against a body fed in as it arrives
    (``update``), under every secret at once, so that the body need not be whole first."""

    def __init__(self, secrets: Sequence[bytes], header: str | None) -> None:
        match = _SIGNATURE.fullmatch((header or "").strip())
        self.given = bytes.fromhex(match.group(1)) if match else None
        self.macs = [hmac.new(secret, digestmod=hashlib.sha256) for secret in secrets]

    @property
    def well_formed(self) -> bool:
        """The header is ``sha256=`` and 64 hex digits: a body is worth reading."""
        return self.given is not None and bool(self.macs)

    def update(self, chunk: bytes) -> None:
        for mac in self.macs:
            mac.update(chunk)

    def matches(self) -> bool:
        if self.given is None:
            return False
        matched = False
        for mac in self.macs:  # no early exit: timing does not tell which secret matched
            matched |= hmac.compare_digest(mac.digest(), self.given)
        return matched


@dataclass(frozen=True)
class Event:
    """One verified webhook delivery."""

    name: str
    action: str | None
    delivery_id: str
    payload: dict[str, Any] = field(repr=False)

    @property
    def installation_id(self) -> int | None:
        installation = self.payload.get("installation")
        return _int(installation.get("id")) if isinstance(installation, dict) else None

    @property
    def qualified_name(self) -> str:
        return f"{self.name}.{self.action}" if self.action else self.name


class PayloadError(ValueError):
    """The payload lacks a field a handler needs, or has it with the wrong JSON type; the
    handler is skipped (one warning line, no traceback), the delivery kept."""


JsonKind = type | tuple[type, ...]


def require(payload: Mapping[str, Any], *path: str | int, kind: JsonKind | None = None) -> Any:
    """``payload[path[0]][path[1]]…``, or ``PayloadError`` naming the first missing/null step,
    or the last step when it is not of ``kind`` (``int``: an integer a BIGINT column holds,
    never a boolean; ``str``, ``dict``, ``list``, ``bool``).

    GitHub sends ``null`` where a thing is gone, e.g. ``pull_request.head.repo`` when the fork
    was deleted; handlers reach into payloads through this so that such a delivery, or a
    signed one of the wrong shape, is skipped with a clear log line instead of raising
    ``TypeError`` deep inside.
    """
    value: Any = payload
    for depth, step in enumerate(path):
        here = ".".join(str(part) for part in path[: depth + 1])
        if isinstance(step, int) and isinstance(value, list):
            if not -len(value) <= step < len(value):
                raise PayloadError(f"{here} is missing")
            value = value[step]
        elif isinstance(step, str) and isinstance(value, Mapping):
            if step not in value:
                raise PayloadError(f"{here} is missing")
            value = value[step]
        else:
            raise PayloadError(f"{here} is missing ({_kind(value)} where a container was expected)")
        if value is None:
            raise PayloadError(f"{here} is null")
    if kind is not None and not is_kind(value, kind):
        here = ".".join(str(part) for part in path)
        raise PayloadError(f"{here} is {_kind(value)}, not {_kind_names(kind)}")
    return value


def is_kind(value: Any, kind: JsonKind) -> bool:
    """Whether a JSON value is of ``kind`` (see ``require``)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for expected in kinds:
        if expected is int:
            if _int(value) is not None:
                return True
        elif expected is bool or expected is float:
            if type(value) is expected:
                return True
        elif isinstance(value, expected):
            return True
    return False


def _kind_names(kind: JsonKind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_JSON_NAMES.get(k, k.__name__) for k in kinds)


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer",
               bool: "a boolean", float: "a number"}


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# The fields the handlers read, by event ("*": every event), with their JSON types; ``*`` in
# a path is every item of an array. A field that is present, not null and of another type
# skips every handler of the delivery with one warning naming it: GitHub never sends such a
# payload, and a forged or broken one must not reach code that trusts its shape.
SHAPES: dict[str, dict[str, JsonKind]] = {
    "*": {"repository": dict, "repository.full_name": str, "installation": dict,
          "installation.id": int, "sender": dict, "sender.login": str, "sender.type": str},
    "pull_request": {
        "number": int, "pull_request": dict, "pull_request.number": int,
        "pull_request.draft": bool, "pull_request.head": dict, "pull_request.head.sha": str,
        "pull_request.head.repo": dict, "pull_request.base": dict,
        "pull_request.base.ref": str, "pull_request.user": dict,
        "pull_request.user.login": str},
    "check_run": {
        "check_run": dict, "check_run.name": str, "check_run.head_sha": str,
        "check_run.pull_requests": list, "check_run.pull_requests.*": dict,
        "check_run.pull_requests.*.number": int},
    "issue_comment": {
        "comment": dict, "comment.id": int, "comment.body": str, "comment.user": dict,
        "comment.user.login": str, "comment.user.type": str, "comment.created_at": str,
        "issue": dict, "issue.number": int, "issue.pull_request": dict, "changes": dict,
        "changes.body": dict, "changes.body.from": str},
    "pull_request_review": {
        "review": dict, "review.id": int, "review.body": str, "review.user": dict,
        "review.user.login": str, "review.user.type": str, "review.submitted_at": str,
        "pull_request": dict, "pull_request.number": int},
    "push": {"ref": str, "after": str, "deleted": bool, "repository.default_branch": str,
             "repository.private": bool},
}


def shape_problem(event_name: str, payload: Mapping[str, Any]) -> str | None:
    """The first field of ``payload`` that ``SHAPES`` says has the wrong type, or None."""
    for shapes in (SHAPES["*"], SHAPES.get(event_name, {})):
        for path, kind in shapes.items():
            for where, value in _values(payload, path.split(".")):
                if value is not None and not is_kind(value, kind):
                    return f"{where} is {_kind(value)}, not {_kind_names(kind)}"
    return None


def _values(value: Any, steps: list[str], where: str = "") -> Iterator[tuple[str, Any]]:
    """The values at ``steps`` under ``value`` (``*`` is every array item), with their paths;
    none where a container on the way is missing (its own shape is checked separately)."""
    if not steps:
        yield where, value
        return
    step, rest = steps[0], steps[1:]
    if step == "*" and isinstance(value, list):
        for index, item in enumerate(value):
            yield from _values(item, rest, f"{where}[{index}]")
    elif isinstance(value, Mapping) and step in value:
        yield from _values(value[step], rest, f"{where}.{step}" if where else step)


Handler = Callable[[Event], list[JobRequest]]
H = TypeVar("H", bound=Handler)
ANY_ACTION = None


class WebhookRouter:
    """Maps (event, action) to pure handlers that turn an ``Event`` into ``JobRequest``s.

    Handlers must not touch the database or the network: they run inside the webhook request.
    A payload whose fields are not of the types in ``SHAPES`` reaches no handler (one warning
    line); a handler that raises is skipped (and logged); the delivery and the other
    handlers' jobs are still accepted, so a malformed payload never turns into a 500.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, dict[str | None, list[Handler]]] = defaultdict(
            lambda: defaultdict(list)
        )

    def on(self, event: str, *actions: str) -> Callable[[H], H]:
        """Decorator: run the handler for ``event`` (only for ``actions`` if any are given)."""

        def register(handler: H) -> H:
            self.add(handler, event, *actions)
            return handler

        return register

    def add(self, handler: Handler, event: str, *actions: str) -> None:
        for action in actions or (ANY_ACTION,):
            self._handlers[event][action].append(handler)

    def include(self, other: WebhookRouter) -> None:
        """Adds every handler of ``other`` (a feature module's own router)."""
        for event, by_action in other._handlers.items():
            for action, handlers in by_action.items():
                self._handlers[event][action].extend(handlers)

    def events(self) -> list[str]:
        """The events some handler is registered for (what the App subscribes to)."""
        return sorted(event for event, by_action in self._handlers.items()
                      if any(by_action.values()))

    def handlers(self, event: Event) -> list[Handler]:
        by_action = self._handlers.get(event.name, {})
        chosen = list(by_action.get(ANY_ACTION, []))
        if event.action is not None:
            chosen += by_action.get(event.action, [])
        return chosen

    def route(self, event: Event) -> list[JobRequest]:
        handlers = self.handlers(event)
        if not handlers:
            return []
        problem = shape_problem(event.name, event.payload)
        if problem is not None:  # one line, no traceback, no handler
            log.warning("delivery %s (%s): skipped: %s", event.delivery_id,
                        event.qualified_name, problem)
            return []
        requests: list[JobRequest] = []
        for handler in handlers:
            requests += _run_handler(handler, event)
        return requests


def _run_handler(handler: Handler, event: Event) -> list[JobRequest]:
    name = getattr(handler, "__qualname__", repr(handler))
    try:
        produced = handler(event)
    except PayloadError as error:
        log.warning("delivery %s (%s): %s skipped: %s",
                    event.delivery_id, event.qualified_name, name, error)
        return []
    except Exception:
        log.exception("delivery %s (%s): %s failed; skipped",
                      event.delivery_id, event.qualified_name, name)
        return []
    if produced is None:
        return []
    if not isinstance(produced, list | tuple) or not all(
        isinstance(request, JobRequest) for request in produced
    ):
        log.error("delivery %s: %s returned %r, not a list of JobRequest; ignored",
                  event.delivery_id, name, type(produced).__name__)
        return []
    return list(produced)


@dataclass(frozen=True)
class Acceptance:
    """The answer to one delivery: an HTTP status and a JSON body (``{"error": …}`` on 4xx/5xx)."""

    status_code: int
    body: dict[str, Any]
    job_ids: tuple[int, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()  # e.g. Retry-After

    @classmethod
    def error(cls, status_code: int, message: str,
              headers: tuple[tuple[str, str], ...] = ()) -> Acceptance:
        return cls(status_code, {"error": message}, headers=headers)


class DeliveryStore(Protocol):
    def record(self, event: Event, requests: Sequence[JobRequest]) -> list[int] | None:
        """Record the delivery and enqueue ``requests`` atomically; None if already recorded."""
        ...


class SqlDeliveryStore:
    """Deliveries, installation changes and their jobs, written in one transaction."""

    def __init__(self, engine: Engine, queue: SqlJobQueue | None = None) -> None:
        self.engine = engine
        self.queue = queue or SqlJobQueue(engine)

    def record(self, event: Event, requests: Sequence[JobRequest]) -> list[int] | None:
        try:
            with transaction(self.engine) as conn:
                conn.execute(
                    _INSERT_DELIVERY,
                    {
                        "id": event.delivery_id,
                        "event": event.name,
                        "action": event.action,
                        "installation_id": event.installation_id,
                        "jobs": len(requests),
                        "received_at": utcnow(),
                    },
                )
                if event.name in INSTALLATION_EVENTS:
                    apply_installation_event(conn, event)
                return [
                    self.queue.enqueue_in(conn, request, delivery_id=event.delivery_id)
                    for request in requests
                ]
        except IntegrityError:
            if self.seen(event.delivery_id):
                return None
            raise

    def seen(self, delivery_id: str) -> bool:
        with transaction(self.engine) as conn:
            found = conn.execute(select(exists().where(DELIVERIES.c.id == delivery_id)))
            return bool(found.scalar())


def apply_installation_event(conn: Connection, event: Event) -> None:
    """Keeps the ``installations`` row in step with an ``installation*`` event."""
    installation = event.payload.get("installation")
    if not isinstance(installation, dict) or _int(installation.get("id")) is None:
        log.warning("delivery %s (%s): no installation id; not recorded",
                    event.delivery_id, event.qualified_name)
        return
    installation_id = cast(int, _int(installation.get("id")))
    flags: dict[str, Any] = {}
    if event.name == "installation":
        flags = {
            "created": {"deleted": False, "suspended": False},
            "deleted": {"deleted": True},
            "suspend": {"suspended": True},
            "unsuspend": {"suspended": False},
        }.get(event.action or "", {})
    repositories = _upsert_installation(conn, installation_id, installation, flags)
    if event.name == "installation" and event.action == "created":
        repositories = _full_names(event.payload.get("repositories"))
    elif event.name == "installation_repositories":
        removed = set(_full_names(event.payload.get("repositories_removed")))
        added = _full_names(event.payload.get("repositories_added"))
        repositories = [name for name in repositories if name not in removed] + added
    else:
        return
    conn.execute(
        update(INSTALLATIONS)
        .where(INSTALLATIONS.c.id == installation_id)
        .values(repositories=sorted(set(repositories)))
    )


def _upsert_installation(
    conn: Connection, installation_id: int, installation: dict[str, Any], flags: dict[str, Any]
) -> list[str]:
    """Insert or update the row (locking it on PostgreSQL); returns its repositories."""
    account = installation.get("account")
    account = account if isinstance(account, dict) else {}
    now = utcnow()
    values: dict[str, Any] = {"updated_at": now, **flags}
    for column, value, limit in (
        ("account_login", account.get("login"), 255),
        ("account_type", account.get("type"), 32),
        ("repository_selection", installation.get("repository_selection"), 16),
    ):
        if (text := _text(value, limit)) is not None:
            values[column] = text
    upsert(conn, INSTALLATIONS,
           {"id": installation_id, "created_at": now, "repositories": [],
            "account_login": "", **values},
           keys=["id"], update=values)
    current = conn.execute(
        select(INSTALLATIONS.c.repositories).where(INSTALLATIONS.c.id == installation_id)
    ).scalar()
    return list(current or [])


def _full_names(repositories: Any) -> list[str]:
    if not isinstance(repositories, list):
        return []
    return [
        repository["full_name"]
        for repository in repositories
        if isinstance(repository, dict) and isinstance(repository.get("full_name"), str)
    ]


def _int(value: Any) -> int | None:
    """``value`` if it is an integer a BIGINT column holds, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    return None


def _text(value: Any, limit: int) -> str | None:
    """``value`` if it is a string a VARCHAR column holds (PostgreSQL refuses NUL), else None."""
    if isinstance(value, str) and value and len(value) <= limit and "\x00" not in value:
        return value
    return None


def parse_payload(body: bytes, content_type: str | None) -> dict[str, Any] | str:
    """The JSON object in ``body`` (raw JSON, or form-encoded ``payload=``), or what is
    wrong with it. One nested deeper than ``nesting.MAX_DEPTH`` is refused before any walk."""
    not_json = "the body is not a JSON object"
    if content_type and content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode(), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return not_json
        body = (fields.get("payload") or [""])[0].encode()
    too_deep = f"the payload nests deeper than {nesting.MAX_DEPTH} levels"
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
    except RecursionError:
        return too_deep
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        return not_json
    if not isinstance(payload, dict):
        return not_json
    return too_deep if nesting.too_deep(payload) else payload


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def accept(
    store: DeliveryStore,
    router: WebhookRouter,
    headers: Mapping[str, str],
    body: bytes,
    *,
    secrets: Sequence[bytes],
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Acceptance:
    """Verify, parse, route and record one delivery; never raises for bad input."""
    if len(body) > max_body_bytes:
        return Acceptance.error(413, f"the body is larger than {max_body_bytes} bytes")
    lowered = {name.lower(): value for name, value in headers.items()}
    if not verify_signature(secrets, body, lowered.get(SIGNATURE_HEADER)):
        return Acceptance.error(401, "missing or invalid X-Hub-Signature-256")
    return accept_verified(store, router, headers, body)


def accept_verified(store: DeliveryStore, router: WebhookRouter, headers: Mapping[str, str],
                    body: bytes) -> Acceptance:
    """``accept`` for a body whose size and signature were checked as it was read
    (``bot/intake.py``)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    name = _text(lowered.get(EVENT_HEADER, "").strip(), MAX_NAME_LENGTH)
    if name is None:
        return Acceptance.error(400, "missing or malformed X-GitHub-Event header")
    delivery_id = _text(lowered.get(DELIVERY_HEADER, "").strip(), MAX_NAME_LENGTH)
    if delivery_id is None:
        return Acceptance.error(400, "missing or malformed X-GitHub-Delivery header")
    payload = parse_payload(body, lowered.get("content-type"))
    if isinstance(payload, str):
        return Acceptance.error(400, payload)
    event = Event(name, _text(payload.get("action"), MAX_NAME_LENGTH), delivery_id, payload)
    with log_context(delivery_id=delivery_id, repository=repository_of(payload)):
        return _record(store, router, event)


def _record(store: DeliveryStore, router: WebhookRouter, event: Event) -> Acceptance:
    requests = [] if event.name == "ping" else router.route(event)
    try:
        job_ids = store.record(event, requests)
    except Exception:  # the database is down or refused a value: say so, never a bare 500
        log.exception("delivery %s (%s): could not be recorded", event.delivery_id, event.name)
        return Acceptance.error(
            503, "could not record the delivery; redeliver it from the App's advanced settings"
        )
    if job_ids is None:
        log.info("delivery %s (%s): duplicate, ignored", event.delivery_id, event.qualified_name)
        return Acceptance(200, {"status": "duplicate"})
    with log_context(job_id=job_ids[0] if len(job_ids) == 1 else None):
        log.info("delivery %s (%s): %d job(s) %s",
                 event.delivery_id, event.qualified_name, len(job_ids), job_ids)
    if job_ids:
        return Acceptance(202, {"status": "queued", "jobs": len(job_ids)}, tuple(job_ids))
    if event.name == "ping":
        status = "pong"
    elif event.name in INSTALLATION_EVENTS:
        status = "recorded"
    else:
        status = "ignored"
    return Acceptance(200, {"status": status, "jobs": 0})
