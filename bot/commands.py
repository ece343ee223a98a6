"""Slash-commands in pull-request comments and reviews: parsed in the webhook, acted on in a
``command`` job (permissions, database state, GitHub calls), answered from templates/.

A command is a line that starts with ``/alignbot <command>`` or a short form (``/align``,
``/repro``, ``/upstream``, ``/track``, ``/remind``, ``/ok-to-test``, ``/help``); lines in fenced or
indented code, inline code, ``>`` quotes and HTML comments are not. The webhook handler only
parses (it must not touch the database or the network) and queues one job per comment or
review with the command lines that are new (for an edit: not in the previous body).

The job handles each line in two steps. *Decide*: check permissions, change state (queue an
``align`` job, trust a head, snooze reminders, file an issue) and record the outcome with its
rendered reply in ``command_replies``, keyed by (source, comment or review id, line hash).
*Deliver*: add the reaction and post the reply, each found again (the row says what was done,
the reply carries a hidden marker) so a redelivered webhook, an edit or a re-run job never
acts or answers twice.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from typing import Any, cast

from github import Github, GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import (
    BigInteger,
    Connection,
    Engine,
    Index,
    Row,
    String,
    Table,
    Text,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapped, mapped_column

from checks.report import environment

from .alignment import JOB_KIND as ALIGN_KIND
from .config import RepoConfig, Trust
from .github import GitHubApp, transient_failures
from .models import Base, BigId, transaction, utcnow
from .output import COMMENT_LIMIT, fit, safe_title
from .queue import JOBS, JobQueue, JobRecord, JobRequest, JobState
from .reminders import UPSTREAM
from .trust import TRUSTED_ASSOCIATIONS, base_config, pr_trusted, record_ok
from .webhooks import Event, WebhookRouter, require

log = logging.getLogger(__name__)

JOB_KIND = "command"
PREFIX = "/alignbot"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
MAX_OPS = 20
MAX_DRAWS = 1000  # the configuration's own bound on `draws`
MAX_SEED = 2**32 - 1
MAX_SNOOZE = timedelta(days=365)


class Name(StrEnum):
    ALIGN = "align"
    REPRO = "repro"
    UPSTREAM = "upstream"
    TRACK = "track"
    REMIND = "remind"
    OK_TO_TEST = "ok-to-test"
    HELP = "help"


SHORT_FORMS = {f"/{name.value}": name for name in Name}


class Problem(StrEnum):
    """Why a command line was not understood (the reply template words each one)."""

    UNKNOWN_COMMAND = "unknown_command"
    UNEXPECTED_ARGUMENT = "unexpected_argument"
    MISSING_ARGUMENT = "missing_argument"
    BAD_NUMBER = "bad_number"
    BAD_OP = "bad_op"
    TOO_MANY_OPS = "too_many_ops"
    BAD_FINGERPRINT = "bad_fingerprint"
    BAD_DURATION = "bad_duration"
    BAD_URL = "bad_url"


class Refusal(StrEnum):
    """Why an understood command was not carried out (the reply template words each one)."""

    NEEDS_WRITE = "needs_write"
    NEEDS_AUTHOR_OR_WRITE = "needs_author_or_write"
    UNTRUSTED = "untrusted"
    RATE_LIMITED = "rate_limited"
    CLOSED = "closed"
    NO_REPORT = "no_report"
    UNKNOWN_FINDING = "unknown_finding"
    NO_REPRO = "no_repro"
    NO_DRAFT = "no_draft"
    NO_TRACKING_REPO = "no_tracking_repo"
    FOREIGN_TRACKING_REPO = "foreign_tracking_repo"
    FILING_FAILED = "filing_failed"
    TRUST_SKIP = "trust_skip"


# --------------------------------------------------------------------------- tables


class CommandReply(Base):
    """One command line that was handled: (source, source id, line hash) → its outcome.

    ``source`` is ``comment`` or ``review``; ``reaction`` and ``reply_body`` are what is
    owed to GitHub, ``reacted`` and ``reply_id`` say it was delivered. The row is written
    before anything is posted, so a redelivery, an edit or a re-run job only finishes the
    delivery and never acts again.
    """

    __tablename__ = "command_replies"

    source: Mapped[str] = mapped_column(String(16), primary_key=True)
    source_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    line_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    actor: Mapped[str] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(String(32))  # a Name, or "" when not understood
    accepted: Mapped[bool]
    reaction: Mapped[str | None] = mapped_column(String(16))
    reacted: Mapped[bool] = mapped_column(default=False)
    reply_body: Mapped[str | None] = mapped_column(Text)
    reply_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CommandUse(Base):
    """One rate-limited use of a command (``/align``) by ``login`` on ``repo#number``."""

    __tablename__ = "command_uses"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    login: Mapped[str] = mapped_column(String(64))
    command: Mapped[str] = mapped_column(String(32))
    used_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_command_uses_who", "repo", "number", "login", "command",
                            "used_at"),)


class PrReminderSettings(Base):
    """Per-pull-request reminder settings that ``/remind`` changes; ``bot/reminders.py``
    reads them before it sends a reminder.

    - ``repo`` (``owner/name``) and ``number``: the pull request (the primary key).
    - ``snoozed_until``: no reminder before this moment (UTC, timezone-aware); None: not
      snoozed. ``/remind snooze 3d`` sets it, ``/remind on`` clears it.
    - ``disabled``: no reminders at all on this pull request (``/remind off``; ``/remind on``
      turns them back on). A missing row means the repository's defaults apply.
    - ``updated_by``: the login of whoever changed it last; ``updated_at``: when (UTC).
    """

    __tablename__ = "pr_reminder_settings"

    repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    number: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    snoozed_until: Mapped[datetime | None]
    disabled: Mapped[bool] = mapped_column(default=False)
    updated_by: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class UpstreamFiling(Base):
    """An issue alignbot opened in a tracking repository for one finding (``/upstream …
    file``): one per (tracking repository, fingerprint), whichever pull request asks again.
    ``issue_number`` is None while the issue is being opened."""

    __tablename__ = "upstream_filings"

    tracking_repo: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    issue_number: Mapped[int | None] = mapped_column(BigInteger)
    issue_url: Mapped[str | None] = mapped_column(String(1024))
    repo: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(BigInteger)
    filed_by: Mapped[str] = mapped_column(String(64))
    filed_at: Mapped[datetime] = mapped_column(default=utcnow)


REPLIES = cast(Table, CommandReply.__table__)
USES = cast(Table, CommandUse.__table__)
REMINDERS = cast(Table, PrReminderSettings.__table__)
FILINGS = cast(Table, UpstreamFiling.__table__)


def _upsert(conn: Connection, table: Table, keys: dict[str, Any], values: dict[str, Any]
            ) -> None:
    dialect_insert = postgresql_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = dialect_insert(table).values(**keys, **values)
    conn.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=values))


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Command:
    """One understood command line with its arguments."""

    name: Name
    line: str
    ops: tuple[str, ...] = ()
    n: int | None = None
    seed: int | None = None
    fingerprint: str | None = None
    file: bool = False
    remind: str | None = None  # "snooze" | "on" | "off"
    snooze: timedelta | None = None
    url: str | None = None  # /track: the canonical URL of the issue or pull request


@dataclass(frozen=True)
class Malformed:
    """A command line that was not understood; ``name`` when the command itself was."""

    line: str
    name: Name | None
    problem: Problem
    value: str = ""
    low: int = 0
    high: int = 0


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_OP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.*?\[\]-]{0,199}$")
_FINGERPRINT = re.compile(r"^[0-9a-fA-F]{12}$")
_ITEM_URL = re.compile(r"^https://github\.com/([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/"
                       r"([A-Za-z0-9_.-]{1,100})/(pull|issues)/([1-9][0-9]{0,9})/?$")
_DURATION = re.compile(r"^(?:(\d{1,3})w)?(?:(\d{1,3})d)?(?:(\d{1,4})h)?$")


def command_lines(body: str) -> list[str]:
    """The command lines of a comment, whitespace-normalised, in order, each once."""
    found: list[str] = []
    fence: str | None = None
    in_html_comment = False
    for raw in body.splitlines():
        if in_html_comment:
            in_html_comment = "-->" not in raw
            continue
        match = _FENCE.match(raw)
        if fence is not None:
            if match and match[1][0] == fence[0] and len(match[1]) >= len(fence) \
                    and not match[2].strip():
                fence = None
            continue
        if match and not (match[1][0] == "`" and "`" in match[2]):
            fence = match[1]
            continue
        if raw.startswith(("    ", "\t")):  # an indented code block
            continue
        text = raw.strip()
        if text.startswith("<!--"):
            in_html_comment = "-->" not in text
            continue
        if not text.startswith("/"):  # prose, `> quotes`, `inline code` and the rest
            continue
        first = text.split(maxsplit=1)[0].lower()
        if first == PREFIX or first in SHORT_FORMS:
            found.append(" ".join(text.split()))
    return list(dict.fromkeys(found))


def new_command_lines(body: str, previous: str | None) -> list[str]:
    """The command lines of an edited comment that its previous body did not have."""
    old = set(command_lines(previous or ""))
    return [line for line in command_lines(body) if line not in old]


def parse_line(line: str) -> Command | Malformed:
    """Understand one command line (from ``command_lines``)."""
    words = line.split()
    head = words[0].lower()
    if head == PREFIX:
        if len(words) == 1:
            return Command(Name.HELP, line)
        try:
            name = Name(words[1].lower())
        except ValueError:
            return Malformed(line, None, Problem.UNKNOWN_COMMAND, words[1])
        args = words[2:]
    else:
        name, args = SHORT_FORMS[head], words[1:]
    parser = _PARSERS[name]
    return parser(line, args)


def _align(line: str, args: list[str]) -> Command | Malformed:
    ops: list[str] = []
    options: dict[str, int] = {}
    bounds = {"--n": (1, MAX_DRAWS), "--seed": (0, MAX_SEED)}
    words = iter(args)
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in bounds:
            value = value if equals else next(words, "")
            low, high = bounds[flag]
            if not value.isdigit() or not low <= int(value) <= high:
                return Malformed(line, Name.ALIGN, Problem.BAD_NUMBER, f"{flag} {value}".strip(),
                                 low, high)
            options[flag] = int(value)
        elif word.startswith("-"):
            return Malformed(line, Name.ALIGN, Problem.UNEXPECTED_ARGUMENT, word)
        elif not _OP.match(word):
            return Malformed(line, Name.ALIGN, Problem.BAD_OP, word)
        else:
            ops.append(word)
    if len(ops) > MAX_OPS:
        return Malformed(line, Name.ALIGN, Problem.TOO_MANY_OPS, high=MAX_OPS)
    return Command(Name.ALIGN, line, ops=tuple(dict.fromkeys(ops)), n=options.get("--n"),
                   seed=options.get("--seed"))


def _finding_args(name: Name, line: str, args: list[str], extra: tuple[str, ...]
                  ) -> Command | Malformed:
    if not args:
        return Malformed(line, name, Problem.MISSING_ARGUMENT, "FINGERPRINT")
    if not _FINGERPRINT.match(args[0]):
        return Malformed(line, name, Problem.BAD_FINGERPRINT, args[0])
    rest = args[1:]
    if len(rest) > 1 or (rest and rest[0].lower() not in extra):
        return Malformed(line, name, Problem.UNEXPECTED_ARGUMENT, " ".join(rest))
    return Command(name, line, fingerprint=args[0].lower(), file=bool(rest))


def _repro(line: str, args: list[str]) -> Command | Malformed:
    return _finding_args(Name.REPRO, line, args, ())


def _upstream(line: str, args: list[str]) -> Command | Malformed:
    return _finding_args(Name.UPSTREAM, line, args, ("file",))


@dataclass(frozen=True)
class ItemUrl:
    """A GitHub issue or pull request named by its URL."""

    url: str  # canonical: ``https://github.com/OWNER/REPO/(pull|issues)/N``
    repo: str  # ``OWNER/REPO``
    number: int
    kind: str  # "pr" | "issue"


def parse_item_url(text: str) -> ItemUrl | None:
    """``https://github.com/OWNER/REPO/pull/N`` or ``…/issues/N``, or None."""
    match = _ITEM_URL.match(text)
    if match is None or match[2] in (".", ".."):
        return None
    owner, name, path, number = match.groups()
    if int(number) > 2**31 - 1:  # ``upstream_items.number`` is an Integer
        return None
    return ItemUrl(f"https://github.com/{owner}/{name}/{path}/{int(number)}", f"{owner}/{name}",
                   int(number), "pr" if path == "pull" else "issue")


def _track(line: str, args: list[str]) -> Command | Malformed:
    if not args:
        return Malformed(line, Name.TRACK, Problem.MISSING_ARGUMENT, "URL")
    if len(args) > 1:
        return Malformed(line, Name.TRACK, Problem.UNEXPECTED_ARGUMENT, " ".join(args[1:]))
    item = parse_item_url(args[0])
    if item is None:
        return Malformed(line, Name.TRACK, Problem.BAD_URL, args[0])
    return Command(Name.TRACK, line, url=item.url)


def parse_duration(text: str) -> timedelta | None:
    """``3d``, ``2w``, ``12h``, ``1w2d``: a duration from one hour to a year, or None."""
    match = _DURATION.match(text.lower())
    if not text or match is None:
        return None
    weeks, days, hours = (int(part or 0) for part in match.groups())
    duration = timedelta(weeks=weeks, days=days, hours=hours)
    return duration if timedelta(hours=1) <= duration <= MAX_SNOOZE else None


def _remind(line: str, args: list[str]) -> Command | Malformed:
    if not args:
        return Malformed(line, Name.REMIND, Problem.MISSING_ARGUMENT, "snooze DURATION, off or on")
    action, rest = args[0].lower(), args[1:]
    if action == "snooze":
        if not rest:
            return Malformed(line, Name.REMIND, Problem.MISSING_ARGUMENT, "DURATION")
        duration = parse_duration(rest[0])
        if duration is None:
            return Malformed(line, Name.REMIND, Problem.BAD_DURATION, rest[0])
        rest = rest[1:]
    elif action not in ("on", "off"):
        return Malformed(line, Name.REMIND, Problem.UNEXPECTED_ARGUMENT, args[0])
    else:
        duration = None
    if rest:
        return Malformed(line, Name.REMIND, Problem.UNEXPECTED_ARGUMENT, " ".join(rest))
    return Command(Name.REMIND, line, remind=action, snooze=duration)


def _no_args(name: Name) -> Callable[[str, list[str]], Command | Malformed]:
    def parse(line: str, args: list[str]) -> Command | Malformed:
        if args and name is not Name.HELP:
            return Malformed(line, name, Problem.UNEXPECTED_ARGUMENT, " ".join(args))
        return Command(name, line)

    return parse


_PARSERS: dict[Name, Callable[[str, list[str]], Command | Malformed]] = {
    Name.ALIGN: _align, Name.REPRO: _repro, Name.UPSTREAM: _upstream, Name.TRACK: _track,
    Name.REMIND: _remind, Name.OK_TO_TEST: _no_args(Name.OK_TO_TEST),
    Name.HELP: _no_args(Name.HELP),
}


# --------------------------------------------------------------------------- webhook handlers


def _is_bot(user: Any) -> bool:
    if not isinstance(user, dict):
        return False
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


def _request(event: Event, source: str, source_id: int, number: int, actor: str,
             created_at: str | None, lines: list[str]) -> JobRequest:
    repo = require(event.payload, "repository", "full_name")
    installation = require(event.payload, "installation", "id")
    return JobRequest(kind=JOB_KIND, key=f"{repo}#{number}/{source}/{source_id}", payload={
        "installation_id": int(installation), "repo": repo, "number": int(number),
        "source": source, "source_id": int(source_id), "actor": actor,
        "created_at": created_at, "commands": lines, "delivery_id": event.delivery_id})


def on_issue_comment(event: Event) -> list[JobRequest]:
    """``issue_comment`` created or edited on a pull request: its new command lines."""
    comment = require(event.payload, "comment")
    issue = require(event.payload, "issue")
    sender = event.payload.get("sender")
    if "pull_request" not in issue or _is_bot(comment.get("user")) or _is_bot(sender):
        return []
    body = comment.get("body") or ""
    if event.action == "edited":
        before = ((event.payload.get("changes") or {}).get("body") or {}).get("from")
        if not isinstance(before, str):  # the edit did not touch the body
            return []
        lines = new_command_lines(body, before)
    else:
        lines = command_lines(body)
    if not lines:
        return []
    # For an edit the sender wrote the new lines (a maintainer may edit others' comments).
    actor = (sender or {}).get("login") or require(comment, "user", "login")
    return [_request(event, "comment", require(comment, "id"), require(issue, "number"), actor,
                     comment.get("created_at"), lines)]


def on_review(event: Event) -> list[JobRequest]:
    """``pull_request_review`` submitted: the command lines of the review's body."""
    review = require(event.payload, "review")
    if _is_bot(review.get("user")) or _is_bot(event.payload.get("sender")):
        return []
    lines = command_lines(review.get("body") or "")
    if not lines:
        return []
    number = require(event.payload, "pull_request", "number")
    return [_request(event, "review", require(review, "id"), number,
                     require(review, "user", "login"), review.get("submitted_at"), lines)]


def register(router: WebhookRouter) -> None:
    router.on("issue_comment", "created", "edited")(on_issue_comment)
    router.on("pull_request_review", "submitted")(on_review)


# --------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class RateLimit:
    """At most ``count`` uses per person, pull request and command within ``window``."""

    count: int = 3
    window: timedelta = timedelta(hours=1)


@dataclass
class Outcome:
    """What one command came to: a reaction and/or a reply from ``template``."""

    accepted: bool
    reaction: str | None = None  # "+1" (done) or "eyes" (a job was queued)
    template: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def refused(reason: Refusal, **values: Any) -> Outcome:
    return Outcome(False, template="command_rejected.md.j2", values={"reason": reason, **values})


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:32]


def reply_marker(source: str, source_id: int, digest: str) -> str:
    return f"<!-- alignbot:command {source}:{source_id}:{digest} -->"


class Request:
    """One job's pull request and commenter; GitHub and the base config are read lazily,
    once."""

    def __init__(self, app: GitHubApp, engine: Engine, payload: dict[str, Any]) -> None:
        self.app, self.engine, self.payload = app, engine, payload
        self.repo_name: str = payload["repo"]
        self.number: int = payload["number"]
        self.actor: str = payload["actor"]
        self.source: str = payload["source"]
        self.source_id: int = payload["source_id"]

    @cached_property
    def gh(self) -> Github:
        return self.app.client(self.payload["installation_id"])

    @cached_property
    def repo(self) -> Repository:
        return self.gh.get_repo(self.repo_name)

    @cached_property
    def pr(self) -> PullRequest:
        return self.repo.get_pull(self.number)

    @cached_property
    def config(self) -> RepoConfig | None:
        return base_config(self.repo, self.pr)

    @property
    def trust(self) -> Trust:
        return self.config.trust if self.config is not None else Trust()

    @cached_property
    def permission(self) -> str:
        try:
            return self.repo.get_collaborator_permission(self.actor)
        except GithubException as exc:
            if exc.status == 404:
                return "none"
            raise

    @property
    def can_write(self) -> bool:
        return self.permission in WRITE_PERMISSIONS

    @property
    def is_author(self) -> bool:
        return self.pr.user.login.lower() == self.actor.lower()

    @cached_property
    def trusted(self) -> bool:
        return pr_trusted(self.engine, self.repo, self.pr, self.trust)

    @cached_property
    def bot_replies(self) -> dict[str, int]:
        """Marker → comment id of the app's replies posted since the command was written."""
        since = self.payload.get("created_at")
        issue = self.repo.get_issue(self.number)
        listing = (issue.get_comments(since=datetime.fromisoformat(since)) if since
                   else issue.get_comments())
        login, found = self.app.bot_login(), {}
        for comment in listing:
            if comment.user.login == login:
                for marker in re.findall(r"<!-- alignbot:command [^>]* -->", comment.body or ""):
                    found[marker] = int(comment.id)
        return found


@dataclass
class CommandJob:
    """Runs one ``command`` job: decide each new command line once, then deliver its reaction
    and reply (see the module docstring for why nothing is done twice)."""

    app: GitHubApp
    queue: JobQueue
    engine: Engine
    align_limit: RateLimit = field(default_factory=RateLimit)
    clock: Callable[[], datetime] = utcnow

    def __call__(self, job: JobRecord) -> dict[str, Any] | None:
        with transient_failures(self.app, job.payload["installation_id"]):
            return self._run(job)

    def _run(self, job: JobRecord) -> dict[str, Any]:
        request = Request(self.app, self.engine, job.payload)
        handled = []
        for line in job.payload["commands"]:
            row = self._handled(request, line)
            if row is None:
                row = self._decide(request, line)
            self._deliver(request, row)
            handled.append({"line": line, "command": row.command, "accepted": row.accepted,
                            "reply_id": row.reply_id})
        return {"commands": handled}

    # -- decide -------------------------------------------------------------------------

    def _handled(self, request: Request, line: str) -> Row[Any] | None:
        with transaction(self.engine) as conn:
            return conn.execute(select(REPLIES).where(
                REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id,
                REPLIES.c.line_hash == line_hash(line))).first()

    def _decide(self, request: Request, line: str) -> Row[Any]:
        parsed = parse_line(line)
        if isinstance(parsed, Malformed):
            outcome = Outcome(False, template="command_rejected.md.j2",
                              values={"reason": parsed.problem, "problem": parsed})
        else:
            outcome = self._execute(request, parsed)
        name = parsed.name
        if outcome.template is None and request.source == "review":
            outcome.template = "command_ack.md.j2"  # GitHub has no reactions on reviews
        digest = line_hash(line)
        body = None
        if outcome.template is not None:
            body = _render(outcome.template, **outcome.values, line=line,
                           marker=reply_marker(request.source, request.source_id, digest),
                           name=name.value if name else None)
        values = {
            "source": request.source, "source_id": request.source_id, "line_hash": digest,
            "repo": request.repo_name, "number": request.number, "actor": request.actor,
            "command": name.value if name else "", "accepted": outcome.accepted,
            "reaction": outcome.reaction if request.source == "comment" else None,
            "reacted": False, "reply_body": body, "reply_id": None, "created_at": utcnow()}
        with transaction(self.engine) as conn:
            conn.execute(REPLIES.insert().values(**values))
        log.info("%s#%d: %s by %s: %s", request.repo_name, request.number, line,
                 request.actor, "accepted" if outcome.accepted else "refused")
        row = self._handled(request, line)
        assert row is not None
        return row

    def _execute(self, request: Request, command: Command) -> Outcome:
        actions: dict[Name, Callable[[Request, Command], Outcome]] = {
            Name.ALIGN: self._align, Name.REPRO: self._repro, Name.UPSTREAM: self._upstream,
            Name.TRACK: self._track, Name.REMIND: self._remind,
            Name.OK_TO_TEST: self._ok_to_test, Name.HELP: self._help,
        }
        return actions[command.name](request, command)

    def _align(self, request: Request, command: Command) -> Outcome:
        if request.pr.state != "open":
            return refused(Refusal.CLOSED)
        if not request.can_write:
            if not request.is_author:
                return refused(Refusal.NEEDS_WRITE)
            if not request.trusted:
                return refused(Refusal.UNTRUSTED)
        retry_at = self._use(request, Name.ALIGN, self.align_limit)
        if retry_at is not None:
            return refused(Refusal.RATE_LIMITED, limit=self.align_limit, retry_at=retry_at)
        extra: dict[str, Any] = {"ops": list(command.ops), "all_ops": not command.ops,
                                 "requested_by": request.actor}
        if command.n is not None:
            extra["n"] = command.n
        if command.seed is not None:
            extra["seed"] = command.seed
        if request.can_write:  # a maintainer's request runs even where the gate would wait
            extra["approved_by"] = request.actor
        self._enqueue_align(request, f"/align by {request.actor}", extra)
        return Outcome(True, "eyes", values={"queued": True})

    def _ok_to_test(self, request: Request, command: Command) -> Outcome:
        if not (request.can_write or (request.is_author and request.trusted)):
            return refused(Refusal.NEEDS_WRITE)
        if request.pr.state != "open":
            return refused(Refusal.CLOSED)
        trust = request.trust
        inside = request.pr.author_association in TRUSTED_ASSOCIATIONS
        if inside or trust.outside_contributors == "run":
            return Outcome(True, "+1", values={"queued": False})
        if trust.outside_contributors == "skip":
            return refused(Refusal.TRUST_SKIP)
        head = request.pr.head.sha
        if not record_ok(self.engine, request.repo_name, request.number, head, request.actor):
            return Outcome(True, "+1", values={"queued": False})
        self._enqueue_align(request, f"/ok-to-test by {request.actor}", {})
        return Outcome(True, "eyes", values={"queued": True})

    def _enqueue_align(self, request: Request, trigger: str, extra: dict[str, Any]) -> None:
        payload = {"installation_id": int(request.payload["installation_id"]),
                   "repo": request.repo_name, "number": request.number,
                   "head_sha": request.pr.head.sha, "trigger": trigger, **extra}
        self.queue.enqueue(JobRequest(kind=ALIGN_KIND, key=f"{request.repo_name}#"
                                      f"{request.number}", payload=payload, supersede=True))

    def _use(self, request: Request, name: Name, limit: RateLimit) -> datetime | None:
        """Count one use; if the limit is reached, count nothing and return when to retry."""
        now = self.clock()
        who = (USES.c.repo == request.repo_name, USES.c.number == request.number,
               USES.c.login == request.actor.lower(), USES.c.command == name.value)
        with transaction(self.engine) as conn:
            conn.execute(delete(USES).where(USES.c.used_at < now - max(limit.window,
                                                                       timedelta(days=1))))
            recent = conn.execute(select(func.count(), func.min(USES.c.used_at)).where(
                *who, USES.c.used_at > now - limit.window)).one()
            if recent[0] >= limit.count:
                return cast(datetime, recent[1]) + limit.window
            conn.execute(USES.insert().values(
                repo=request.repo_name, number=request.number, login=request.actor.lower(),
                command=name.value, used_at=now))
        return None

    def _finding(self, request: Request, fingerprint: str
                 ) -> tuple[str, dict[str, Any]] | Outcome:
        latest = latest_report(self.engine, request.repo_name, request.number)
        if latest is None:
            return refused(Refusal.NO_REPORT)
        head_sha, findings = latest
        for finding in findings:
            if finding.get("fingerprint") == fingerprint:
                return head_sha, _checked_links(finding)
        known = [str(f.get("fingerprint")) for f in findings]
        return refused(Refusal.UNKNOWN_FINDING, fingerprint=fingerprint, head_sha=head_sha,
                       known=known)

    def _repro(self, request: Request, command: Command) -> Outcome:
        assert command.fingerprint is not None
        found = self._finding(request, command.fingerprint)
        if isinstance(found, Outcome):
            return found
        head_sha, finding = found
        if not finding.get("repro"):
            return refused(Refusal.NO_REPRO, fingerprint=command.fingerprint)
        return Outcome(True, "+1", "command_repro.md.j2",
                       {"finding": finding, "head_sha": head_sha})

    def _upstream(self, request: Request, command: Command) -> Outcome:
        assert command.fingerprint is not None
        found = self._finding(request, command.fingerprint)
        if isinstance(found, Outcome):
            return found
        head_sha, finding = found
        if not finding.get("upstream_draft"):
            return refused(Refusal.NO_DRAFT, fingerprint=command.fingerprint,
                           verdict=finding.get("verdict") or "not triaged")
        values = {"finding": finding, "head_sha": head_sha, "filed": None}
        if not command.file:
            return Outcome(True, "+1", "command_upstream.md.j2", values)
        if not request.can_write:
            return refused(Refusal.NEEDS_WRITE)
        tracking = request.config.upstream.tracking_repo if request.config else None
        if tracking is None:
            return refused(Refusal.NO_TRACKING_REPO)
        owner = request.repo_name.split("/")[0]
        if tracking.split("/")[0].lower() != owner.lower():
            return refused(Refusal.FOREIGN_TRACKING_REPO, tracking=tracking, owner=owner)
        filed = self._file(request, tracking, finding)
        if isinstance(filed, Outcome):
            return filed
        if filed["url"]:  # watched weekly, listed in the digest (a re-run registers nothing new)
            register_upstream(self.engine, url=str(filed["url"]), repo=tracking,
                              number=int(filed["number"]), kind="issue",
                              registered_by=request.actor, pr_repo=request.repo_name,
                              pr_number=request.number, tracking_repo=tracking)
        return Outcome(True, "+1", "command_upstream.md.j2", {**values, "filed": filed})

    def _file(self, request: Request, tracking: str, finding: dict[str, Any]
              ) -> dict[str, Any] | Outcome:
        """The tracking issue for this finding: the one already opened, or a new one."""
        fingerprint = str(finding["fingerprint"])
        keys = (FILINGS.c.tracking_repo == tracking, FILINGS.c.fingerprint == fingerprint)
        with transaction(self.engine) as conn:
            row = conn.execute(select(FILINGS).where(*keys)).first()
            if row is None:
                conn.execute(FILINGS.insert().values(
                    tracking_repo=tracking, fingerprint=fingerprint, repo=request.repo_name,
                    number=request.number, filed_by=request.actor, filed_at=utcnow()))
        if row is not None and row.issue_number is not None:
            return {"repo": tracking, "number": row.issue_number, "url": row.issue_url,
                    "new": False}
        marker = f"<!-- alignbot:upstream {fingerprint} -->"
        title = safe_title(str(finding.get("upstream_title")
                               or f"{finding['kind']} at {finding['op']}"))
        body = _render("command_upstream_issue.md.j2", marker=marker, finding=finding,
                       source=request.repo_name, number=request.number)
        try:
            # a row without an issue: a job that stopped half-way may have opened it already
            issue = (_find_issue(request, tracking, fingerprint, marker) if row is not None
                     else None)
            if issue is None:
                issue = request.gh.get_repo(tracking).create_issue(title, body)
        except GithubException as exc:
            with transaction(self.engine) as conn:
                conn.execute(delete(FILINGS).where(*keys, FILINGS.c.issue_number.is_(None)))
            return refused(Refusal.FILING_FAILED, tracking=tracking, status=exc.status)
        with transaction(self.engine) as conn:
            conn.execute(update(FILINGS).where(*keys).values(issue_number=issue.number,
                                                             issue_url=issue.html_url))
        return {"repo": tracking, "number": issue.number, "url": issue.html_url, "new": True}

    def _track(self, request: Request, command: Command) -> Outcome:
        assert command.url is not None
        if not request.can_write:
            return refused(Refusal.NEEDS_WRITE)
        item = parse_item_url(command.url)
        assert item is not None
        tracking = request.config.upstream.tracking_repo if request.config else None
        if register_upstream(self.engine, url=item.url, repo=item.repo, number=item.number,
                             kind=item.kind, registered_by=request.actor,
                             pr_repo=request.repo_name, pr_number=request.number,
                             tracking_repo=tracking):
            return Outcome(True, "+1", values={"url": item.url})
        existing = upstream_item(self.engine, item.url)
        return Outcome(True, None, "command_track.md.j2",
                       {"url": item.url, "existing": dict(existing._mapping) if existing
                        else None})

    def _remind(self, request: Request, command: Command) -> Outcome:
        if not (request.is_author or request.can_write):
            return refused(Refusal.NEEDS_AUTHOR_OR_WRITE)
        now = self.clock()
        keys = {"repo": request.repo_name, "number": request.number}
        values: dict[str, Any] = {"updated_by": request.actor, "updated_at": now}
        if command.remind == "snooze":
            assert command.snooze is not None
            values["snoozed_until"] = now + command.snooze
        else:
            values.update(disabled=command.remind == "off", snoozed_until=None)
        with transaction(self.engine) as conn:
            _upsert(conn, REMINDERS, keys, values)
        return Outcome(True, "+1", values={"remind": command.remind,
                                           "until": values.get("snoozed_until")})

    def _help(self, request: Request, command: Command) -> Outcome:
        config = request.config
        return Outcome(True, "+1", "command_help.md.j2", {
            "configured": config is not None,
            "tracking_repo": config.upstream.tracking_repo if config else None,
            "outside_contributors": request.trust.outside_contributors,
            "reminders": bool(config and config.reminders.enabled), "limit": self.align_limit})

    # -- deliver ------------------------------------------------------------------------

    def _deliver(self, request: Request, row: Row[Any]) -> None:
        """Post what ``row`` still owes GitHub: its reaction and its reply."""
        keys = (REPLIES.c.source == row.source, REPLIES.c.source_id == row.source_id,
                REPLIES.c.line_hash == row.line_hash)
        if row.reaction and not row.reacted:
            try:
                request.pr.get_issue_comment(row.source_id).create_reaction(row.reaction)
            except GithubException as exc:
                if exc.status != 404:  # a deleted comment takes no reaction: nothing owed
                    raise
            with transaction(self.engine) as conn:
                conn.execute(update(REPLIES).where(*keys).values(reacted=True))
        if row.reply_body and row.reply_id is None:
            marker = reply_marker(row.source, row.source_id, row.line_hash)
            reply_id = request.bot_replies.get(marker)
            if reply_id is None:
                reply_id = int(request.pr.create_issue_comment(row.reply_body).id)
                request.bot_replies[marker] = reply_id
            with transaction(self.engine) as conn:
                conn.execute(update(REPLIES).where(*keys).values(reply_id=reply_id))


def _checked_links(finding: dict[str, Any]) -> dict[str, Any]:
    """The finding with its prefilled upstream link kept only if it points at GitHub: the
    report comes out of the sandbox that ran the pull request's code."""
    url = finding.get("upstream_url")
    if isinstance(url, str) and url.startswith("https://github.com/") and \
            not any(c.isspace() or c in "()<>" for c in url):
        return finding
    return {**finding, "upstream_url": None}


def _render(template: str, **values: Any) -> str:
    return fit(environment().get_template(template).render(**values), COMMENT_LIMIT, None)


def _find_issue(request: Request, tracking: str, fingerprint: str, marker: str) -> Any:
    """An issue the app opened in ``tracking`` whose body has ``marker``, or None."""
    login = request.app.bot_login()
    for issue in request.gh.search_issues(f"repo:{tracking} is:issue {fingerprint}"):
        if issue.user.login == login and marker in (issue.body or ""):
            return issue
    return None


def latest_report(engine: Engine, repo: str, number: int
                  ) -> tuple[str, list[dict[str, Any]]] | None:
    """The head sha and findings of the latest completed ``align`` job with a report."""
    query = (select(JOBS.c.payload, JOBS.c.result)
             .where(JOBS.c.kind == ALIGN_KIND, JOBS.c.key == f"{repo}#{number}",
                    JOBS.c.state == JobState.DONE.value)
             .order_by(JOBS.c.id.desc()).limit(50))
    with transaction(engine) as conn:
        rows = conn.execute(query).all()
    for payload, result in rows:
        report = (result or {}).get("report")
        if isinstance(report, dict) and isinstance(report.get("findings"), list):
            return str((payload or {}).get("head_sha", "")), report["findings"]
    return None


def register_upstream(engine: Engine, *, url: str, repo: str, number: int, kind: str,
                      registered_by: str, pr_repo: str, pr_number: int | None,
                      tracking_repo: str | None = None) -> bool:
    """Add an issue or pull request to the weekly upstream watch (``upstream_items``, see
    ``bot/reminders.py``); False, changing nothing, when ``url`` is already watched."""
    values = {"url": url, "repo": repo, "number": number, "kind": kind,
              "registered_by": registered_by, "pr_repo": pr_repo, "pr_number": pr_number,
              "tracking_repo": tracking_repo, "created_at": utcnow()}
    with transaction(engine) as conn:
        dialect_insert = (postgresql_insert if conn.dialect.name == "postgresql"
                          else sqlite_insert)
        result = conn.execute(dialect_insert(UPSTREAM).values(**values)
                              .on_conflict_do_nothing(index_elements=["url"]))
        return bool(result.rowcount)


def upstream_item(engine: Engine, url: str) -> Row[Any] | None:
    """The ``upstream_items`` row watching ``url``, or None."""
    with transaction(engine) as conn:
        return conn.execute(select(UPSTREAM).where(UPSTREAM.c.url == url)).first()


def reminder_settings(engine: Engine, repo: str, number: int) -> Row[Any] | None:
    """The ``pr_reminder_settings`` row of a pull request, or None (the defaults apply)."""
    with transaction(engine) as conn:
        return conn.execute(select(REMINDERS).where(REMINDERS.c.repo == repo,
                                                    REMINDERS.c.number == number)).first()
