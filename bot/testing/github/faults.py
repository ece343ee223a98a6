"""Outages, server errors and rate limits injected ahead of routing."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import rate_limits
from .errors import DOCS, ApiError
from .formats import random_token
from .routes import Reply
from .state import GitHubState

SERVER_ERRORS = {500: "Server Error", 502: "Server Error", 503: "Service Unavailable",
                 504: "We couldn't respond to your request in time. Sorry about that."}


SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {rid}."
)


def server_error(status: int = 502, body: Any = None) -> Callable[[], Reply]:
    """A maker of GitHub's 5xx answer (`body` replaces the default one)."""
    payload = body if body is not None else {
        "message": SERVER_ERRORS.get(status, "Server Error"), "status": str(status)}
    return lambda: Reply(status, payload)


@dataclass
class Fault:
    """A canned failure for the next `remaining` requests whose path matches `pattern`, or (with
    `until`, a `time.monotonic()` deadline) for every matching request until then."""

    pattern: re.Pattern[str]
    method: str | None
    remaining: int | None
    make: Callable[[], Reply]
    until: float | None = None

    def active(self, method: str, path: str) -> bool:
        """Whether this fault answers `method path` now."""
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.until is not None and time.monotonic() >= self.until:
            return False
        return self.method in (None, method) and bool(self.pattern.search(path))


class FaultInjection(GitHubState):
    """Canned failures served before routing and authentication, first queued first."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._faults: list[Fault] = []

    def fail_next(
        self, pattern: str, count: int = 1, status: int = 502, *, method: str | None = None,
        body: Any = None,
    ) -> None:
        """The next `count` requests whose path matches the regex `pattern` get `status`."""
        self._queue(pattern, count, method, server_error(status, body))

    def outage(
        self, pattern: str, seconds: float, status: int = 503, *, method: str | None = None,
        reset: bool = False,
    ) -> None:
        """Every request whose path matches `pattern` fails for the next `seconds`: with
        `status` (a 5xx, as GitHub's front end answers during an incident), or with `reset`
        the connection is reset without an answer."""
        make = (lambda: Reply(drop=True)) if reset else server_error(status)
        with self.lock:
            self._faults.append(Fault(re.compile(pattern), method, None, make,
                                      until=time.monotonic() + seconds))

    def secondary_rate_limit(
        self, pattern: str, count: int = 1, *, retry_after: int = 60, status: int = 403,
        method: str | None = None,
    ) -> None:
        """The next `count` matching requests hit a secondary rate limit (`Retry-After`)."""
        def make() -> Reply:
            body = ApiError(status, SECONDARY_MESSAGE.format(rid=random_token("", 8)),
                            f"{DOCS}/overview/rate-limits-for-the-rest-api").body
            return Reply(status, body, {"Retry-After": str(retry_after)})

        self._queue(pattern, count, method, make)

    def primary_rate_limit(
        self, pattern: str, count: int = 1, *, reset_in: int = 60, status: int = 403,
        method: str | None = None,
    ) -> None:
        """The next `count` matching requests find the primary budget spent (403 or 429)."""
        def make() -> Reply:
            reset = int(time.time()) + reset_in
            message = f"API rate limit exceeded for installation ID {self._any_installation()}."
            limit = str(rate_limits.CORE_LIMIT)
            headers = {"X-RateLimit-Limit": limit, "X-RateLimit-Remaining": "0",
                       "X-RateLimit-Used": limit, "X-RateLimit-Reset": str(reset),
                       "X-RateLimit-Resource": "core"}
            body = ApiError(status, message, f"{DOCS}/overview/rate-limits-for-the-rest-api")
            return Reply(status, body.body, headers)

        self._queue(pattern, count, method, make)

    def clear_faults(self) -> None:
        """Drop every queued fault."""
        with self.lock:
            self._faults.clear()

    def _any_installation(self) -> int:
        return min(self.installations, default=0)

    def _queue(
        self, pattern: str, count: int, method: str | None, make: Callable[[], Reply]
    ) -> None:
        with self.lock:
            self._faults.append(Fault(re.compile(pattern), method, count, make))

    def _take_fault(self, method: str, path: str) -> Reply | None:
        for fault in self._faults:
            if fault.active(method, path):
                if fault.remaining is not None:
                    fault.remaining -= 1
                return fault.make()
        return None
