"""Weekly reminders on stale pull requests, and the weekly digest of watched upstream items.

One repository is swept once per *period*: the week that starts at its configured weekday and
hour (``reminders.weekday``/``hour``/``timezone`` in ``.github/alignbot.yml``). A sweep has
three phases, and its cursor is stored after every step that matters, so a sweep stopped by a
crash, a lost lease or a spent budget resumes where it stopped:

1. *listing*: the search API (``is:pr is:open draft:false updated:<=X``, newest first, 100 a
   page) below the staleness cutoff, with a keyset cursor on ``updated``. Paging by page number
   would skip pull requests: every reminder posted bumps its pull request out of the results.
2. *follow-ups*: pull requests this app reminded after the cutoff. The reminder itself made
   them look fresh to the search, so they are read one by one (they are few: the ones that
   got a reminder last week).
3. *upstream*: the repository's watched upstream issues and pull requests (``/upstream …
   file``, ``/track URL``) are read, and the digest in ``upstream.tracking_repo`` is updated.

Invariants:

- At most one reminder per pull request per period: ``reminders_sent`` is unique on (repo,
  number, period); the comment carries a hidden marker naming the period, looked for before
  posting; and a reminder about to be posted is journalled in the cursor (``posting``) and
  reconciled first on the next run, so a crash between the post and the record neither loses
  the record nor posts twice.
- The app never closes a pull request, and labels one only when ``reminders.labels`` is on.
- Every GitHub request is counted against the installation's hourly budget for this feature;
  running out raises :class:`BudgetExhausted` with the cursor saved.
"""

from __future__ import annotations

import base64
import functools
import logging
import re
import time as _time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any, cast
from zoneinfo import ZoneInfo

import requests
from github import Github, GithubException
from sqlalchemy import Engine, select, update
from sqlalchemy.engine import Connection

from checks.report import environment

from .config import CONFIG_PATH, ConfigError, Reminders, RepoConfig, glob_match, load_config
from .markers import find_marked
from .storage import (
    CALLS,
    INSTALLATIONS,
    PR_SETTINGS,
    SENT,
    SWEEPS,
    UPSTREAM,
    Kind,
    Phase,
    UpstreamState,
    transaction,
    upsert,
    utcnow,
)

log = logging.getLogger(__name__)

STALE_LABEL = "stale"
SNOOZE_EXAMPLE = "/remind snooze 2w"
MIN_GAP = timedelta(days=6)  # never two reminders closer than this, whatever the schedule
PAGE = 100
MAX_MENTIONS = 10
FAILING = frozenset({"failure", "timed_out", "action_required", "startup_failure"})
CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
PING_AFTER = timedelta(days=14)  # the digest suggests a ping after this long without activity
DIGEST_TITLE = "alignbot: upstream watch"
DIGEST_ISSUE_MARKER = "<!-- alignbot:upstream-digest -->"
_REMINDER_MARKER = re.compile(r"<!-- alignbot:reminder period=(\S+) kind=(\S+) n=(\d+) -->")
_DIGEST_MARKER = re.compile(r"<!-- alignbot:upstream-digest period=(\S+) -->")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_TEAM = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


class Skip(StrEnum):
    """Why a pull request got no reminder (counted in the sweep's report)."""

    DRAFT = "draft"
    CLOSED = "closed"
    EXEMPT_LABEL = "exempt-label"
    EXEMPT_AUTHOR = "exempt-author"
    EXEMPT_PATHS = "exempt-paths"
    OFF = "reminders-off"
    SNOOZED = "snoozed"
    SENT_THIS_PERIOD = "sent-this-period"
    TOO_SOON = "too-soon"
    ACTIVE = "active"
    RECOVERED = "recovered"
    ESCALATED = "escalated"
    MAX_REMINDERS = "max-reminders"
    UNREADABLE = "unreadable"


# --------------------------------------------------------------------------- time


def parse_time(text: str | None) -> datetime | None:
    """GitHub's ``2024-01-01T09:00:00Z`` as an aware UTC datetime."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def search_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


@dataclass(frozen=True)
class Schedule:
    """A weekly slot: weekday and hour in a time zone."""

    weekday: str = "monday"
    hour: int = 9
    timezone: str = "UTC"

    @classmethod
    def of(cls, reminders: Reminders) -> Schedule:
        return cls(reminders.weekday, reminders.hour, reminders.timezone)

    def latest(self, now: datetime) -> datetime:
        """The last slot at or before ``now`` (UTC)."""
        zone = ZoneInfo(self.timezone)
        local = now.astimezone(zone)
        day = local.date() - timedelta(days=(local.weekday() - WEEKDAYS.index(self.weekday)) % 7)
        if self._at(day) > now:
            day -= timedelta(days=7)
        return self._at(day)

    def following(self, slot: datetime) -> datetime:
        return self._at(self.period_day(slot) + timedelta(days=7))

    def period_day(self, slot: datetime) -> date:
        return slot.astimezone(ZoneInfo(self.timezone)).date()

    def period(self, now: datetime) -> str:
        """The key of the period ``now`` is in: the local date of its slot."""
        return self.period_day(self.latest(now)).isoformat()

    def _at(self, day: date) -> datetime:
        return datetime.combine(day, time(self.hour), tzinfo=ZoneInfo(self.timezone)
                                ).astimezone(UTC)


def describe_wait(waited: timedelta) -> str:
    days = max(0, waited.days)
    if days < 14:
        return "1 day" if days == 1 else f"{days} days"
    return f"{days // 7} weeks"


# --------------------------------------------------------------------------- GitHub access


class BudgetExhausted(Exception):
    """The installation's budget for this hour (ours or GitHub's) is spent: stop and resume
    later from the stored cursor."""


class LeaseLost(Exception):
    """Another sweeper holds the sweep lock now: stop at once, write nothing more."""


class Budget:
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
            raise BudgetExhausted(f"the reminder budget of {self.limit} requests this hour for "
                                  f"installation {self.installation_id} is spent")
        if write and self.written + self.pending_writes >= self.write_limit:
            self.flush()
            raise BudgetExhausted(f"{self.write_limit} content-creating requests this hour "
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
    ``per_minute`` in any minute (GitHub's secondary limit is 80 a minute)."""

    def __init__(self, interval: float = 1.0, per_minute: int = 80,
                 sleep: Callable[[float], None] = _time.sleep,
                 monotonic: Callable[[], float] = _time.monotonic) -> None:
        self.interval, self.per_minute, self.sleep, self.monotonic = (
            interval, per_minute, sleep, monotonic)
        self.recent: list[float] = []
        self.slept = 0.0

    def wait(self) -> None:
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


class Api:
    """GitHub for the sweep: JSON through PyGithub's requester (its retries, its base URL),
    every request counted against the budget, writes paced, search limits waited out."""

    def __init__(self, gh: Github, budget: Budget, pacer: WritePacer, limits: ApiLimits,
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
                raise BudgetExhausted("GitHub's search budget is spent for a while")
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
            raise BudgetExhausted(f"GitHub reports {self.core_remaining} requests left this "
                                  "hour for the installation; keeping them for other work")
        kind = "write" if verb != "GET" else "search" if "/search/" in url else "read"
        self.budget.spend(write=kind == "write")
        self.calls[kind] += 1
        try:
            headers, data = self.gh.requester.requestJsonAndCheck(
                verb, url, parameters=params, input=body)
        except GithubException as exc:
            if exc.status in (403, 429) and "rate limit" in str(exc.data or "").lower():
                raise BudgetExhausted(f"GitHub's rate limit: {exc.status}") from exc
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


# --------------------------------------------------------------------------- facts and decisions


def is_bot(user: Mapping[str, Any] | None) -> bool:
    """Apps and other bots: their actions are not human activity. A deleted user counts as
    no one."""
    if not user:
        return True
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


@dataclass(frozen=True)
class Marker:
    period: str
    kind: Kind
    count: int
    comment_id: int
    created_at: datetime


def reminder_marker(period: str, kind: Kind, count: int) -> str:
    return f"<!-- alignbot:reminder period={period} kind={kind.value} n={count} -->"


def find_markers(comments: list[dict[str, Any]], bot_login: str) -> list[Marker]:
    """This app's reminders among a pull request's comments (other authors are ignored, so
    nobody can fake one)."""
    found = []
    for comment, match in find_marked(comments, bot_login, _REMINDER_MARKER):
        created = parse_time(comment.get("created_at"))
        if created and match.group(2) in Kind._value2member_map_:
            found.append(Marker(match.group(1), Kind(match.group(2)), int(match.group(3)),
                                int(comment["id"]), created))
    return found


@dataclass
class PullFacts:
    """What the sweep read about one pull request."""

    number: int
    author: str
    author_is_bot: bool
    created_at: datetime
    head_sha: str
    head_pushed_at: datetime | None
    head_by_bot: bool
    requested_users: list[str]
    requested_teams: list[str]  # owner/slug
    reviews: list[dict[str, Any]]
    comments: list[dict[str, Any]]

    def last_human_activity(self) -> datetime:
        """The latest of: opening (by a person), a person's comment or review, a push by a
        person. The app's and other bots' actions do not count."""
        moments = [] if self.author_is_bot else [self.created_at]
        for item, key in [*((c, "created_at") for c in self.comments),
                          *((r, "submitted_at") for r in self.reviews)]:
            moment = parse_time(item.get(key))
            if moment is not None and not is_bot(item.get("user")):
                moments.append(moment)
        if self.head_pushed_at is not None and not self.head_by_bot:
            moments.append(self.head_pushed_at)
        return max(moments, default=self.created_at)

    def latest_reviews(self) -> dict[str, dict[str, Any]]:
        """Each person's review that decides their stance (comments alone change nothing; a
        dismissal clears it)."""
        latest: dict[str, dict[str, Any]] = {}
        for review in sorted(self.reviews, key=lambda r: r.get("submitted_at") or ""):
            login = (review.get("user") or {}).get("login")
            if is_bot(review.get("user")) or not login or login == self.author:
                continue
            if review.get("state") in ("APPROVED", "CHANGES_REQUESTED"):
                latest[login] = review
            elif review.get("state") == "DISMISSED":
                latest.pop(login, None)
        return latest


@dataclass
class Waiting:
    """Who the pull request waits on, whom to mention, and why."""

    kind: Kind
    mentions: list[str]
    reasons: list[str] = field(default_factory=list)
    requested: bool = False
    approvers: list[str] = field(default_factory=list)


def waiting_on(facts: PullFacts, failing_checks: Callable[[], list[str]],
               owners: Callable[[], list[str]], maintainers: list[str]) -> Waiting:
    """Failing checks or changes requested on the head → the author; review requests pending
    → those reviewers; approved on the head → the maintainers, to merge; otherwise (no review
    since the last push) → the code owners of the changed paths, or the maintainers."""
    latest = facts.latest_reviews()
    on_head = {login: r for login, r in latest.items() if r.get("commit_id") == facts.head_sha}
    failing = failing_checks()
    changes = sorted(login for login, r in on_head.items() if r["state"] == "CHANGES_REQUESTED")
    author = [] if facts.author_is_bot else [facts.author]
    if failing or changes:
        reasons = [f"checks failing: {', '.join(failing)}"] if failing else []
        reasons += [f"changes requested by {', '.join(changes)}"] if changes else []
        return Waiting(Kind.AUTHOR, _mentions(author), reasons)
    requested = [u for u in facts.requested_users if u != facts.author] + facts.requested_teams
    if requested:
        return Waiting(Kind.REVIEWERS, _mentions(requested), requested=True)
    approvers = sorted(login for login, r in on_head.items() if r["state"] == "APPROVED")
    if approvers:
        return Waiting(Kind.MERGE, _mentions(maintainers), approvers=approvers)
    people = [o for o in owners() if o != facts.author] or \
        [m for m in maintainers if m != facts.author]
    return Waiting(Kind.REVIEWERS, _mentions(people))


def _mentions(names: list[str]) -> list[str]:
    """``@login`` / ``@org/team`` for valid names only, once each, at most MAX_MENTIONS."""
    out: list[str] = []
    for name in names:
        name = name.lstrip("@")
        if (_LOGIN.match(name) or _TEAM.match(name)) and f"@{name}" not in out:
            out.append(f"@{name}")
    return out[:MAX_MENTIONS]


# --------------------------------------------------------------------------- CODEOWNERS


@dataclass(frozen=True)
class OwnerRule:
    pattern: re.Pattern[str]
    owners: tuple[str, ...]


def parse_codeowners(text: str) -> list[OwnerRule]:
    """GitHub's CODEOWNERS rules, in file order (the last matching rule wins). Email owners
    are dropped: they cannot be mentioned."""
    rules = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("\\#") else raw
        parts = line.split()
        if not parts:
            continue
        owners = tuple(o[1:] for o in parts[1:] if o.startswith("@"))
        rules.append(OwnerRule(_codeowners_regex(parts[0]), owners))
    return rules


def _codeowners_regex(pattern: str) -> re.Pattern[str]:
    """gitignore-style: a leading or inner ``/`` anchors at the root, otherwise the pattern
    matches at any depth; a match on a folder covers everything under it, except after a
    final ``/*`` (one level only)."""
    anchored = pattern.startswith("/") or "/" in pattern.strip("/")
    body = pattern.strip("/")
    parts = []
    for segment in body.split("/"):
        if segment == "**":
            parts.append(".*")
            continue
        piece = ""
        for char in segment:
            piece += "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
        parts.append(piece)
    regex = "/".join(parts)
    suffix = "" if body.endswith("/*") or (body == "*" and anchored) else "(?:/.*)?"
    return re.compile(("" if anchored else "(?:.*/)?") + regex + suffix)


def owners_of(rules: list[OwnerRule], paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        for rule in reversed(rules):
            if rule.pattern.fullmatch(path):
                found.extend(o for o in rule.owners if o not in found)
                break
    return found


# --------------------------------------------------------------------------- rendering


_templates = functools.cache(environment)  # compiled once, not once per reminder

TEMPLATES = {Kind.REVIEWERS: "reminder_reviewers.md.j2", Kind.AUTHOR: "reminder_author.md.j2",
             Kind.MERGE: "reminder_merge.md.j2", Kind.ESCALATION: "reminder_escalation.md.j2"}


@dataclass
class Reminder:
    """One reminder to post, and everything its template shows."""

    number: int
    period: str
    kind: Kind
    count: int
    waiting: Waiting
    waited: timedelta
    author: str
    stale_days: int
    max_reminders: int
    escalated_from: Kind | None = None

    def body(self) -> str:
        return _templates().get_template(TEMPLATES[self.kind]).render(
            marker=reminder_marker(self.period, self.kind, self.count),
            mentions=self.waiting.mentions, reasons=self.waiting.reasons,
            requested=self.waiting.requested, approvers=self.waiting.approvers,
            waited=describe_wait(self.waited), author=self.author, count=self.count,
            max_reminders=self.max_reminders, stale_days=self.stale_days,
            snooze=SNOOZE_EXAMPLE, waiting_on=(self.escalated_from or self.kind).value)


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepOptions:
    """Knobs of a sweep; the defaults are the service's."""

    limits: ApiLimits = field(default_factory=ApiLimits)
    write_interval: float = 1.0
    writes_per_minute: int = 80
    disabled_recheck: timedelta = timedelta(days=1)
    error_retry: timedelta = timedelta(hours=1)


@dataclass
class SweepReport:
    """What one pass did, for logs, the CLI and the tests."""

    posted: list[tuple[str, int, str]] = field(default_factory=list)  # repo, number, kind
    recovered: list[tuple[str, int]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    calls: Counter[str] = field(default_factory=Counter)
    repos_done: list[str] = field(default_factory=list)
    stopped: list[tuple[str, str]] = field(default_factory=list)  # repo, reason
    upstream_checked: int = 0
    digests: list[tuple[str, int]] = field(default_factory=list)  # tracking repo, comment id
    busy: bool = False
    write_wait: float = 0.0

    def summary(self) -> str:
        if self.busy:
            return "another sweep holds the lock; nothing done"
        calls = ", ".join(f"{n} {k}" for k, n in sorted(self.calls.items())) or "none"
        skipped = ", ".join(f"{n} {k}" for k, n in sorted(self.skipped.items())) or "none"
        lines = [f"reminders posted: {len(self.posted)} (recovered {len(self.recovered)})",
                 f"repositories finished: {len(self.repos_done)}",
                 f"GitHub requests: {calls}", f"skipped: {skipped}",
                 f"upstream items checked: {self.upstream_checked}; digests: "
                 f"{len(self.digests)}"]
        lines += [f"stopped {repo}: {why}" for repo, why in self.stopped]
        return "\n".join(lines)


@dataclass
class SweepHooks:
    """Test seams. ``after_post`` runs between a reminder's post and its record."""

    after_post: Callable[[str, int, int], None] | None = None


@dataclass
class RepoState:
    repo: str
    installation_id: int
    period: str | None = None
    phase: Phase = Phase.DONE
    cursor: dict[str, Any] = field(default_factory=dict)
    next_check_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    posted: int = 0
    error: str | None = None
    digest_issue: int | None = None

    def due(self, now: datetime) -> bool:
        return self.next_check_at is None or now >= self.next_check_at


class Store:
    """The feature's rows: sweep states, reminders sent, snooze settings, upstream items."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def state(self, repo: str, installation_id: int) -> RepoState:
        with transaction(self.engine) as conn:
            row = conn.execute(select(SWEEPS).where(SWEEPS.c.repo == repo)).first()
        if row is None:
            return RepoState(repo, installation_id)
        values = dict(row._mapping)
        values.pop("updated_at")
        values["phase"] = Phase(values["phase"])
        values["cursor"] = dict(values["cursor"] or {})
        values["installation_id"] = installation_id
        return RepoState(**values)

    def save(self, state: RepoState, conn: Connection | None = None) -> None:
        if conn is None:
            with transaction(self.engine) as own:
                self.save(state, own)
            return
        values = {**state.__dict__, "phase": state.phase.value, "updated_at": utcnow()}
        changes = {k: v for k, v in values.items() if k not in ("repo", "digest_issue")}
        upsert(conn, SWEEPS, values, keys=["repo"], update=changes)

    def digest_issue(self, repo: str) -> int | None:
        with transaction(self.engine) as conn:
            found = conn.execute(select(SWEEPS.c.digest_issue).where(SWEEPS.c.repo == repo))
            return found.scalar()

    def set_digest_issue(self, repo: str, installation_id: int, number: int) -> None:
        """Only this writes ``digest_issue`` (``save`` leaves it alone)."""
        values = {"repo": repo, "installation_id": installation_id, "phase": Phase.DONE.value,
                  "cursor": {}, "posted": 0, "digest_issue": number, "updated_at": utcnow()}
        with transaction(self.engine) as conn:
            upsert(conn, SWEEPS, values, keys=["repo"], update={"digest_issue": number})

    def record(self, state: RepoState, reminder: Reminder, comment_id: int,
               sent_at: datetime) -> None:
        """The reminder and the sweep's state (its journal entry cleared), in one
        transaction."""
        with transaction(self.engine) as conn:
            exists = conn.execute(select(SENT.c.id).where(
                SENT.c.repo == state.repo, SENT.c.number == reminder.number,
                SENT.c.period == reminder.period)).first()
            if exists is None:
                conn.execute(SENT.insert().values(
                    repo=state.repo, number=reminder.number, period=reminder.period,
                    sent_at=sent_at, kind=reminder.kind.value, comment_id=comment_id,
                    count=reminder.count))
            self.save(state, conn)

    def sent(self, repo: str, number: int | None = None) -> dict[int, list[dict[str, Any]]]:
        """Reminders sent in ``repo`` (one pull request's, with ``number``), oldest first."""
        query = select(SENT).where(SENT.c.repo == repo).order_by(SENT.c.sent_at, SENT.c.id)
        if number is not None:
            query = query.where(SENT.c.number == number)
        with transaction(self.engine) as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        out: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            out.setdefault(row["number"], []).append(row)
        return out

    def reminded_since(self, repo: str, since: datetime, after: int, period: str) -> list[int]:
        """Pull requests reminded at or after ``since`` but not yet in ``period``, numbered
        above ``after``."""
        this_period = select(SENT.c.number).where(SENT.c.repo == repo, SENT.c.period == period)
        query = (select(SENT.c.number).where(SENT.c.repo == repo, SENT.c.sent_at >= since,
                                             SENT.c.number > after,
                                             SENT.c.number.not_in(this_period))
                 .group_by(SENT.c.number).order_by(SENT.c.number))
        with transaction(self.engine) as conn:
            return [int(n) for n in conn.execute(query).scalars()]

    def settings(self, repo: str) -> dict[int, dict[str, Any]]:
        with transaction(self.engine) as conn:
            rows = conn.execute(select(PR_SETTINGS).where(PR_SETTINGS.c.repo == repo))
            return {int(r.number): dict(r._mapping) for r in rows}

    def upstream_due(self, pr_repo: str, since: datetime) -> list[dict[str, Any]]:
        """Open items of ``pr_repo`` not checked since ``since``."""
        query = select(UPSTREAM).where(
            UPSTREAM.c.pr_repo == pr_repo, UPSTREAM.c.state == UpstreamState.OPEN.value,
            (UPSTREAM.c.last_checked.is_(None)) | (UPSTREAM.c.last_checked < since),
        ).order_by(UPSTREAM.c.id)
        with transaction(self.engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def update_upstream(self, item_id: int, **values: Any) -> None:
        with transaction(self.engine) as conn:
            conn.execute(update(UPSTREAM).where(UPSTREAM.c.id == item_id).values(**values))

    def digest_items(self, tracking_repo: str) -> list[dict[str, Any]]:
        query = select(UPSTREAM).where(UPSTREAM.c.tracking_repo == tracking_repo
                                       ).order_by(UPSTREAM.c.created_at, UPSTREAM.c.id)
        with transaction(self.engine) as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def has_upstream(self, pr_repo: str) -> bool:
        with transaction(self.engine) as conn:
            return conn.execute(select(UPSTREAM.c.id).where(
                UPSTREAM.c.pr_repo == pr_repo).limit(1)).first() is not None

    def installation_of(self, repo: str) -> int | None:
        """The installation that holds ``repo``, from the ``installations`` table."""
        with transaction(self.engine) as conn:
            rows = conn.execute(select(INSTALLATIONS.c.id, INSTALLATIONS.c.repositories).where(
                INSTALLATIONS.c.deleted.is_(False), INSTALLATIONS.c.suspended.is_(False)))
            for installation_id, repositories in rows:
                if repo.lower() in {r.lower() for r in repositories or []}:
                    return int(installation_id)
        return None


Guard = Callable[[], None]  # renews the sweep lock; raises LeaseLost


@dataclass
class RepoSweep:
    """The sweep of one repository in one pass: resumes the stored cursor, runs the phases,
    stores progress. Raises BudgetExhausted or LeaseLost with the cursor saved."""

    store: Store
    state: RepoState
    api: Api
    bot_login: str
    clock: Callable[[], datetime]
    guard: Guard
    report: SweepReport
    hooks: SweepHooks
    digest_api: Callable[[str], tuple[Api, int] | None]  # tracking repo -> api, installation
    options: SweepOptions = field(default_factory=SweepOptions)
    config: RepoConfig | None = None
    schedule: Schedule = field(default_factory=Schedule)
    _sent: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    _settings: dict[int, dict[str, Any]] = field(default_factory=dict)
    _codeowners: list[OwnerRule] | None = None

    @property
    def repo(self) -> str:
        return self.state.repo

    @property
    def reminders(self) -> Reminders:
        assert self.config is not None
        return self.config.reminders

    # -- entry --------------------------------------------------------------------------

    def run(self, force: bool = False) -> None:
        now = self.clock()
        self.state.error = None
        posting = self.state.cursor.get("posting")
        if posting:  # first of all, even if a new period begins
            self._reconcile(posting)
        self.config = self._load_config()
        enabled = self.config is not None and self.config.reminders.enabled
        if not enabled and not self.store.has_upstream(self.repo):
            self.state.phase = Phase.DONE
            self.state.next_check_at = now + self.options.disabled_recheck
            self.store.save(self.state)
            return
        if not enabled and self.state.phase in (Phase.LISTING, Phase.FOLLOWUPS):
            self.state.phase = Phase.UPSTREAM  # turned off in the middle of a sweep
        if self.config is not None:
            self.schedule = Schedule.of(self.config.reminders)
        slot = self.schedule.latest(now)
        period = self.schedule.period_day(slot).isoformat()
        if self.state.period != period or (force and self.state.phase == Phase.DONE):
            self._start_period(period, now, enabled)
        elif self.state.phase == Phase.DONE:
            self.state.next_check_at = self.schedule.following(slot)
            self.store.save(self.state)
            return
        self._run_phases(slot)

    def _start_period(self, period: str, now: datetime, enabled: bool) -> None:
        cutoff = now - timedelta(days=self.reminders.stale_days) if enabled else now
        self.state.period, self.state.started_at, self.state.finished_at = period, now, None
        self.state.phase = Phase.LISTING if enabled else Phase.UPSTREAM
        self.state.posted = 0
        self.state.cursor = {"cutoff": cutoff.isoformat(),
                             "before": search_time(cutoff - timedelta(seconds=1)),
                             "page": 1, "seen": [], "after": 0, "posting": None}
        self.store.save(self.state)

    def _run_phases(self, slot: datetime) -> None:
        if self.state.phase in (Phase.LISTING, Phase.FOLLOWUPS):
            self._sent = self.store.sent(self.repo)
            self._settings = self.store.settings(self.repo)
        if self.state.phase == Phase.LISTING:
            self._listing()
        if self.state.phase == Phase.FOLLOWUPS:
            self._followups()
        if self.state.phase == Phase.UPSTREAM:
            self._upstream(slot)
        self.state.phase, self.state.finished_at = Phase.DONE, self.clock()
        self.state.next_check_at = self.schedule.following(slot)
        self.store.save(self.state)
        self.report.repos_done.append(self.repo)

    def _load_config(self) -> RepoConfig | None:
        try:
            content = self.api.get(f"/repos/{self.repo}/contents/{CONFIG_PATH}")
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if not isinstance(content, dict) or content.get("encoding") != "base64":
            return None
        text = base64.b64decode(content.get("content") or "").decode("utf-8", "replace")
        try:
            return load_config(text)
        except ConfigError as exc:
            self.state.error = f"{CONFIG_PATH} is invalid: {exc}"[:2000]
            log.info("%s: %s", self.repo, self.state.error)
            return None

    # -- phase 1: listing ---------------------------------------------------------------

    def _listing(self) -> None:
        cursor = self.state.cursor
        query = f"repo:{self.repo} is:pr is:open draft:false"
        while True:
            self.guard()
            result = self.api.search(f"{query} updated:<={cursor['before']}", "updated", "desc",
                                     cursor["page"])
            items = result.get("items") or []
            moved = False
            for item in items:
                number, updated = int(item["number"]), str(item["updated_at"])
                if updated == cursor["before"] and number in cursor["seen"]:
                    continue
                spent = self._consider(item)
                # passed only once considered: a sweep stopped inside it considers it again
                if updated != cursor["before"]:
                    cursor["before"], cursor["seen"], moved = updated, [], True
                cursor["seen"].append(number)
                if spent:
                    self.store.save(self.state)
            if len(items) < PAGE:
                break
            cursor["page"] = 1 if moved else cursor["page"] + 1
            self.store.save(self.state)
        self.state.phase = Phase.FOLLOWUPS
        self.store.save(self.state)

    # -- phase 2: follow-ups ------------------------------------------------------------

    def _followups(self) -> None:
        cutoff = datetime.fromisoformat(self.state.cursor["cutoff"])
        after, period = self.state.cursor["after"], self.state.period or ""
        for number in self.store.reminded_since(self.repo, cutoff, after, period):
            self._consider_number(number)
            self.state.cursor["after"] = number
            self.store.save(self.state)
        self.state.phase = Phase.UPSTREAM
        self.store.save(self.state)

    def _consider_number(self, number: int) -> None:
        self.guard()
        item = self.api.get(f"/repos/{self.repo}/issues/{number}")
        if item.get("state") != "open" or "pull_request" not in item:
            self.report.skipped[Skip.CLOSED] += 1
            return
        self._consider(item)

    # -- one pull request ---------------------------------------------------------------

    def _consider(self, item: dict[str, Any]) -> bool:
        """Remind one pull request if it needs it; False when the listing (and the database)
        alone settled it, without a request. A pull request GitHub refuses to describe (gone,
        or unprocessable) is skipped, so that it cannot hold the repository's sweep back;
        other errors stop the sweep, to be retried."""
        skip = self._quick_skip(item)
        if skip is not None:
            self.report.skipped[skip] += 1
            return False
        self.guard()
        try:
            self._consider_details(int(item["number"]))
        except GithubException as exc:
            if exc.status not in (404, 410, 422):
                raise
            log.warning("%s#%s: skipped, GitHub answered %s", self.repo, item["number"],
                        exc.status)
            self.report.skipped[Skip.UNREADABLE] += 1
        return True

    def _consider_details(self, number: int) -> None:
        pull = self.api.get(f"/repos/{self.repo}/pulls/{number}")
        if pull.get("state") != "open" or pull.get("draft"):
            self.report.skipped[Skip.CLOSED if pull.get("state") != "open" else Skip.DRAFT] += 1
            return
        facts = self._facts(pull)
        reminder = self._decide(facts)
        if isinstance(reminder, Skip):
            self.report.skipped[reminder] += 1
            return
        self._post(reminder)

    def _quick_skip(self, item: dict[str, Any]) -> Skip | None:
        """What the listing alone (and the database) can tell, before any request."""
        rules, now = self.reminders, self.clock()
        number = int(item["number"])
        if item.get("draft"):
            return Skip.DRAFT
        if {label.get("name") for label in item.get("labels") or []} & set(rules.exempt_labels):
            return Skip.EXEMPT_LABEL
        author = (item.get("user") or {}).get("login", "")
        if author.lower() in {a.lower() for a in rules.exempt_authors}:
            return Skip.EXEMPT_AUTHOR
        setting = self._settings.get(number)
        if setting and setting.get("disabled"):
            return Skip.OFF
        if setting and setting.get("snoozed_until") and setting["snoozed_until"] > now:
            return Skip.SNOOZED
        sent = self._sent.get(number, [])
        if any(row["period"] == self.state.period for row in sent):
            return Skip.SENT_THIS_PERIOD
        if sent and sent[-1]["sent_at"] > now - MIN_GAP:
            return Skip.TOO_SOON
        return None

    def _facts(self, pull: dict[str, Any]) -> PullFacts:
        number, head = int(pull["number"]), pull["head"]["sha"]
        comments = list(self.api.pages(f"/repos/{self.repo}/issues/{number}/comments"))
        reviews = list(self.api.pages(f"/repos/{self.repo}/pulls/{number}/reviews"))
        commit = self.api.get(f"/repos/{self.repo}/commits/{head}")
        committed = (commit.get("commit") or {}).get("committer") or {}
        author = pull.get("user") or {}
        return PullFacts(
            number=number, author=author.get("login", ""), author_is_bot=is_bot(author),
            created_at=parse_time(pull["created_at"]) or self.clock(), head_sha=head,
            head_pushed_at=parse_time(committed.get("date")),
            head_by_bot=commit.get("author") is not None and is_bot(commit.get("author")),
            requested_users=[u["login"] for u in pull.get("requested_reviewers") or []
                             if not is_bot(u)],
            requested_teams=[f"{self.repo.split('/')[0]}/{t['slug']}"
                             for t in pull.get("requested_teams") or []],
            reviews=reviews, comments=comments)

    def _decide(self, facts: PullFacts) -> Reminder | Skip:
        rules, now, period = self.reminders, self.clock(), self.state.period or ""
        last_human = facts.last_human_activity()
        waited = now - last_human
        if waited < timedelta(days=rules.stale_days):
            return Skip.ACTIVE
        markers = find_markers(facts.comments, self.bot_login)
        mine = [m for m in markers if m.period == period]
        if mine:  # posted before a crash, never recorded: record it now, post nothing
            reminder = Reminder(facts.number, period, mine[0].kind, mine[0].count,
                                Waiting(mine[0].kind, []), waited, facts.author,
                                rules.stale_days, rules.max_reminders)
            self.store.record(self.state, reminder, mine[0].comment_id, now)
            self.report.recovered.append((self.repo, facts.number))
            return Skip.RECOVERED
        if rules.exempt_paths and self._all_exempt(facts.number, rules.exempt_paths):
            return Skip.EXEMPT_PATHS
        rows = [r for r in self._sent.get(facts.number, []) if r["sent_at"] > last_human]
        run = [m for m in markers if m.created_at > last_human]
        count = max(len(rows), len(run))
        escalated = any(r["kind"] == Kind.ESCALATION for r in rows) or \
            any(m.kind == Kind.ESCALATION for m in run)
        waiting = waiting_on(facts, lambda: self._failing_checks(facts.head_sha),
                             lambda: self._owners(facts.number), rules.maintainers)
        reminder = Reminder(facts.number, period, waiting.kind, count + 1, waiting, waited,
                            facts.author, rules.stale_days, rules.max_reminders)
        if count < rules.max_reminders:
            return reminder
        if escalated:
            return Skip.ESCALATED
        if rules.escalate_to is None:
            return Skip.MAX_REMINDERS
        reminder.escalated_from, reminder.kind = waiting.kind, Kind.ESCALATION
        reminder.waiting = Waiting(Kind.ESCALATION, _mentions([rules.escalate_to]),
                                   waiting.reasons)
        return reminder

    def _files(self, number: int) -> list[str]:
        return [f["filename"] for f in
                self.api.pages(f"/repos/{self.repo}/pulls/{number}/files")]

    def _all_exempt(self, number: int, globs: list[str]) -> bool:
        files = self._files(number)
        return bool(files) and all(any(glob_match(p, g) for g in globs) for p in files)

    def _failing_checks(self, sha: str) -> list[str]:
        runs = self.api.get(f"/repos/{self.repo}/commits/{sha}/check-runs",
                            {"per_page": PAGE}).get("check_runs") or []
        return sorted({r["name"] for r in runs if r.get("conclusion") in FAILING})

    def _owners(self, number: int) -> list[str]:
        if self._codeowners is None:
            self._codeowners = parse_codeowners(self._codeowners_text())
        if not self._codeowners:
            return []
        return owners_of(self._codeowners, self._files(number))

    def _codeowners_text(self) -> str:
        for path in CODEOWNERS_PATHS:
            try:
                content = self.api.get(f"/repos/{self.repo}/contents/{path}")
            except GithubException as exc:
                if exc.status == 404:
                    continue
                raise
            if isinstance(content, dict) and content.get("encoding") == "base64":
                return base64.b64decode(content.get("content") or "").decode("utf-8", "replace")
        return ""

    # -- posting ------------------------------------------------------------------------

    def _post(self, reminder: Reminder) -> None:
        """Journal, post, record: a crash anywhere leaves either nothing posted (the journal
        entry is dropped on reconciliation, the pull request considered again) or a marked
        comment that reconciliation records."""
        self.guard()
        self.state.cursor["posting"] = {"number": reminder.number, "period": reminder.period}
        self.store.save(self.state)
        comment = self.api.post(f"/repos/{self.repo}/issues/{reminder.number}/comments",
                                {"body": reminder.body()})
        if self.hooks.after_post is not None:
            self.hooks.after_post(self.repo, reminder.number, int(comment["id"]))
        now = self.clock()
        self.state.cursor["posting"] = None
        self.state.posted += 1
        self.store.record(self.state, reminder, int(comment["id"]), now)
        self._sent.setdefault(reminder.number, []).append(
            {"period": reminder.period, "sent_at": now, "kind": reminder.kind.value})
        self.report.posted.append((self.repo, reminder.number, reminder.kind.value))
        if self.reminders.labels:
            self._label(reminder.number)

    def _label(self, number: int) -> None:
        try:
            self.api.post(f"/repos/{self.repo}/issues/{number}/labels",
                          {"labels": [STALE_LABEL]})
        except GithubException as exc:  # a label is a courtesy: the reminder is what counts
            log.warning("%s#%d: could not add the %r label: %s", self.repo, number,
                        STALE_LABEL, exc)

    def _reconcile(self, posting: dict[str, Any]) -> None:
        """Finish the reminder a crash interrupted: record it if its comment is there. If not,
        it was never posted, and the cursor, not yet past it, brings it up again."""
        number, period = int(posting["number"]), str(posting["period"])
        comments = list(self.api.pages(f"/repos/{self.repo}/issues/{number}/comments"))
        found = [m for m in find_markers(comments, self.bot_login) if m.period == period]
        self.state.cursor["posting"] = None
        if not found:
            self.store.save(self.state)
            return
        marker = found[0]
        reminder = Reminder(number, period, marker.kind, marker.count, Waiting(marker.kind, []),
                            timedelta(0), "", 0, 0)
        self.store.record(self.state, reminder, marker.comment_id, self.clock())
        self.report.recovered.append((self.repo, number))

    # -- phase 3: upstream --------------------------------------------------------------

    def _upstream(self, slot: datetime) -> None:
        tracking = self.config.upstream.tracking_repo if self.config is not None else None
        touched = False
        for item in self.store.upstream_due(self.repo, slot):
            self.guard()
            self._check_upstream(item, tracking)
            touched = True
        if tracking and touched:
            self._digest(tracking, slot)

    def _check_upstream(self, item: dict[str, Any], tracking: str | None) -> None:
        now = self.clock()
        values: dict[str, Any] = {"last_checked": now, "tracking_repo": tracking}
        try:
            data = self.api.get(f"/repos/{item['repo']}/issues/{item['number']}")
        except (GithubException, requests.RequestException) as exc:
            status = getattr(exc, "status", None)
            reason = f"HTTP {status}" if status else type(exc).__name__
            values["note"] = f"could not be read ({reason})"
            self.store.update_upstream(item["id"], **values)
            self.report.upstream_checked += 1
            return
        merged = (data.get("pull_request") or {}).get("merged_at")
        state = UpstreamState.MERGED if merged else (
            UpstreamState.OPEN if data.get("state") == "open" else UpstreamState.CLOSED)
        values.update(state=state.value, note=None,
                      last_activity=parse_time(data.get("updated_at")))
        self.store.update_upstream(item["id"], **values)
        self.report.upstream_checked += 1

    def _digest(self, tracking: str, slot: datetime) -> None:
        target = self.digest_api(tracking)
        if target is None:
            self.state.error = f"{tracking} (upstream.tracking_repo) is not installed"
            return
        api, installation_id = target
        period = self.schedule.period_day(slot).isoformat()
        body = render_digest(self.store.digest_items(tracking), period, slot, self.clock())
        issue = self.store.digest_issue(tracking)
        if issue is None:
            self.guard()
            created = api.post(f"/repos/{tracking}/issues", {
                "title": DIGEST_TITLE, "body": render_digest_issue()})
            issue = int(created["number"])
            self.store.set_digest_issue(tracking, installation_id, issue)
        path = f"/repos/{tracking}/issues/{issue}/comments"
        existing = None
        pages = api.pages(path, {"since": search_time(slot)})
        for comment, match in find_marked(pages, self.bot_login, _DIGEST_MARKER):
            if match.group(1) == period:
                existing = comment
        self.guard()
        if existing is None:
            comment = api.post(path, {"body": body})
        elif existing.get("body") != body:
            comment = api.patch(f"/repos/{tracking}/issues/comments/{existing['id']}",
                                {"body": body})
        else:
            comment = existing
        self.report.digests.append((tracking, int(comment["id"])))


def render_digest(items: list[dict[str, Any]], period: str, slot: datetime,
                  now: datetime) -> str:
    """The week's digest comment: items still waiting (oldest first), those resolved this
    week, and those that could not be read."""
    def row(item: dict[str, Any]) -> dict[str, Any]:
        activity = item.get("last_activity")
        quiet = now - activity if activity else None
        return {**item, "waited": describe_wait(now - item["created_at"]),
                "quiet": describe_wait(quiet) if quiet is not None else "unknown",
                "ping": quiet is None or quiet >= PING_AFTER}

    waiting = [row(i) for i in items if i["state"] == UpstreamState.OPEN]
    resolved = [row(i) for i in items if i["state"] != UpstreamState.OPEN
                and i.get("last_checked") and i["last_checked"] >= slot]
    return _templates().get_template("upstream_digest.md.j2").render(
        part="comment", marker=f"<!-- alignbot:upstream-digest period={period} -->",
        period=period, waiting=waiting, resolved=resolved, ping_days=PING_AFTER.days)


def render_digest_issue() -> str:
    return _templates().get_template("upstream_digest.md.j2").render(
        part="issue", marker=DIGEST_ISSUE_MARKER, period="", waiting=[], resolved=[],
        ping_days=PING_AFTER.days)
