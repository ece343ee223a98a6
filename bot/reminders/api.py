"""GitHub for the sweep: every request counted against the installation's hourly budget
(:class:`ApiCallBudget`, in the database), writes paced (:class:`WritePacer`), GitHub's own
limits watched; running out raises :class:`ApiCallBudgetExhausted` for the sweep to stop and
resume later."""

from __future__ import annotations

import re
import threading
import time as _time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from github import Github, GithubException
from sqlalchemy import Engine, select

from ..storage import CALLS, transaction, upsert

PAGE = 100
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class ApiCallBudgetExhausted(Exception):
    """The installation's budget for this hour (ours or GitHub's) is spent: stop and resume
    later from the stored cursor."""



class ApiCallBudget:
    """Requests and content-creating requests (writes) per installation per clock hour,
    counted in the database so that restarts and other replicas see them: counted in memory,
    flushed every few requests and after every write."""

    FLUSH_EVERY = 25

    def __init__(self, engine: Engine, installation_id: int, limit: int,
                 clock: Callable[[], datetime], write_limit: int = 500) -> None:
        self.engine, self.installation_id, self.clock = engine, installation_id, clock
        self.limit, self.write_limit = limit, write_limit
        self.hour: datetime | None = None
        self.used = self.written = 0  # flushed
        self.pending = self.pending_writes = 0

    def spend(self, write: bool = False) -> None:
        hour = self.clock().replace(minute=0, second=0, microsecond=0)
        if hour != self.hour:
            self.flush()
            self.hour = hour
            self.used, self.written = self._load(hour)
        if self.used + self.pending >= self.limit:
            self.flush()
            raise ApiCallBudgetExhausted(
                f"the reminder budget of {self.limit} requests this hour for "
                f"installation {self.installation_id} is spent")
        if write and self.written + self.pending_writes >= self.write_limit:
            self.flush()
            raise ApiCallBudgetExhausted(
                f"{self.write_limit} content-creating requests this hour "
                f"for installation {self.installation_id}: GitHub's limit")
        self.pending += 1
        self.pending_writes += int(write)
        if write or self.pending >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self.pending or self.hour is None:
            return
        values = {"installation_id": self.installation_id, "hour": self.hour,
                  "calls": self.pending, "writes": self.pending_writes}
        with transaction(self.engine) as conn:
            upsert(conn, CALLS, values, keys=["installation_id", "hour"],
                   update={"calls": CALLS.c.calls + self.pending,
                           "writes": CALLS.c.writes + self.pending_writes})
        self.used, self.written = self.used + self.pending, self.written + self.pending_writes
        self.pending = self.pending_writes = 0

    def _load(self, hour: datetime) -> tuple[int, int]:
        with transaction(self.engine) as conn:
            row = conn.execute(select(CALLS.c.calls, CALLS.c.writes).where(
                CALLS.c.installation_id == self.installation_id, CALLS.c.hour == hour)).first()
        return (0, 0) if row is None else (int(row.calls), int(row.writes))


class WritePacer:
    """Content-creating requests at least ``interval`` seconds apart and at most
    ``per_minute`` in any minute (GitHub's secondary limit is 80 a minute). One pacer serves
    every sweep job of a process: its threads wait their turn."""

    def __init__(self, interval: float = 1.0, per_minute: int = 80,
                 sleep: Callable[[float], None] = _time.sleep,
                 monotonic: Callable[[], float] = _time.monotonic) -> None:
        self.interval, self.per_minute, self.sleep, self.monotonic = (
            interval, per_minute, sleep, monotonic)
        self.recent: list[float] = []
        self.slept = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            self._wait()

    def _wait(self) -> None:
        now = self.monotonic()
        self.recent = [t for t in self.recent if now - t < 60]
        delay = 0.0
        if self.recent and self.interval:
            delay = self.recent[-1] + self.interval - now
        if len(self.recent) >= self.per_minute:
            delay = max(delay, self.recent[-self.per_minute] + 60 - now)
        if delay > 0:
            self.slept += delay
            self.sleep(delay)
        self.recent.append(self.monotonic())


@dataclass
class ApiLimits:
    """What a sweep may spend, per installation and hour: ``calls_per_hour`` requests of its
    own, ``writes_per_hour`` content-creating ones (GitHub's secondary limit is 500), and
    never GitHub's last ``reserve`` requests (the alignment checks need them too)."""

    calls_per_hour: int = 2000
    writes_per_hour: int = 500
    reserve: int = 500
    max_wait: float = 120.0


class SweepApi:
    """GitHub for the sweep: JSON through PyGithub's requester (its retries, its base URL),
    every request counted against the budget, writes paced, search limits waited out."""

    def __init__(self, gh: Github, budget: ApiCallBudget, pacer: WritePacer, limits: ApiLimits,
                 sleep: Callable[[float], None] = _time.sleep) -> None:
        self.gh, self.budget, self.pacer, self.limits, self.sleep = (
            gh, budget, pacer, limits, sleep)
        self.calls: Counter[str] = Counter()
        self.core_remaining: int | None = None
        self.search_reset: float | None = None  # epoch seconds, when the search budget is out

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._request("GET", path, params=dict(params or {}))[1]

    def pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """Every item of a list endpoint, 100 a page, following ``Link: rel="next"``."""
        url: str | None = path
        query: dict[str, Any] | None = {**(params or {}), "per_page": PAGE}
        while url is not None:
            headers, data = self._request("GET", url, params=query)
            yield from data
            found = _NEXT.search(headers.get("link", ""))
            url, query = (found.group(1) if found else None), None

    def search(self, query: str, sort: str, order: str, page: int) -> dict[str, Any]:
        if self.search_reset is not None:
            wait = self.search_reset - _time.time()
            if wait > self.limits.max_wait:
                raise ApiCallBudgetExhausted("GitHub's search budget is spent for a while")
            if wait > 0:
                self.sleep(wait)
            self.search_reset = None
        params = {"q": query, "sort": sort, "order": order, "per_page": PAGE, "page": page}
        return cast(dict[str, Any], self._request("GET", "/search/issues", params=params)[1])

    def post(self, path: str, body: dict[str, Any]) -> Any:
        self.pacer.wait()
        return self._request("POST", path, body=body)[1]

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        self.pacer.wait()
        return self._request("PATCH", path, body=body)[1]

    def _request(self, verb: str, url: str, *, params: dict[str, Any] | None = None,
                 body: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
        if self.core_remaining is not None and self.core_remaining < self.limits.reserve:
            raise ApiCallBudgetExhausted(
                f"GitHub reports {self.core_remaining} requests left this "
                "hour for the installation; keeping them for other work")
        kind = "write" if verb != "GET" else "search" if "/search/" in url else "read"
        self.budget.spend(write=kind == "write")
        self.calls[kind] += 1
        try:
            headers, data = self.gh.requester.requestJsonAndCheck(
                verb, url, parameters=params, input=body)
        except GithubException as exc:
            if exc.status in (403, 429) and "rate limit" in str(exc.data or "").lower():
                raise ApiCallBudgetExhausted(f"GitHub's rate limit: {exc.status}") from exc
            raise
        self._note_limits(headers)
        return headers, data

    def _note_limits(self, headers: Mapping[str, Any]) -> None:
        try:
            remaining = int(headers.get("x-ratelimit-remaining", ""))
            reset = float(headers.get("x-ratelimit-reset", ""))
        except ValueError:
            return
        if headers.get("x-ratelimit-resource") == "search":
            self.search_reset = reset if remaining <= 0 else None
        else:
            self.core_remaining = remaining

