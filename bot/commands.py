"""Slash-commands in pull-request comments and reviews: parsed in the webhook, acted on in a
``command`` job (permissions, database state, GitHub calls), answered from templates/.

A command is a line that starts with ``/alignbot <command>`` or a short form (``/align``,
``/repro``, ``/upstream``, ``/track``, ``/remind``, ``/ok-to-test``, ``/help``) in a top-level
paragraph of the comment parsed as CommonMark; code (fenced, indented, inline), quotes, list
items, HTML blocks and comments hold none. The webhook handler only parses (it must not touch
the database or the network) and queues one job per comment or review with the command lines
that are new (for an edit: not in the previous body), at most ``MAX_COMMANDS`` of them.

The job handles each line in two steps. *Decide*: check permissions, change state (queue an
``align`` job, at most one per comment; trust a head, snooze reminders, file an issue) and
record the outcome with its rendered answer in ``command_replies``, keyed by (source, comment
or review id, line hash). *Deliver*: add the reactions and post ONE reply per comment or
review that holds every line's answer, found again by its author and the marker at its start
(``reply_marker``), so a redelivered webhook, an edit or a re-run job never acts or answers
twice. Someone without write access gets at most ``reply_limit`` replies per pull request
within its window; past it, a reaction only.
"""

from __future__ import annotations

import hashlib
import itertools
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
from markdown_it import MarkdownIt
from markdown_it.token import Token
from sqlalchemy import Engine, Row, delete, func, select, update

from checks.markdown import Trusted
from checks.report import environment

from .alignment import JOB_KIND as ALIGN_KIND
from .config import RepoConfig, Trust
from .engine_report import checked_finding, stored_findings
from .github import GitHubApp, transient_failures
from .markers import first_marked
from .output import COMMENT_LIMIT, fit, safe_title
from .queue import JobQueue, JobRecord, JobRequest
from .storage import (
    FILINGS,
    PR_SETTINGS,
    REPLIES,
    UPSTREAM,
    USES,
    insert_ignore,
    transaction,
    upsert,
    utcnow,
)
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
DEFAULT_TRACKER = "pytorch/pytorch"  # a repository without a readable config
MAX_BODY = 65_536  # GitHub's own limit on a comment's body
MAX_COMMANDS = 10  # command lines acted on per comment or review; the rest are ignored


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
    ONE_ALIGN = "one_align"  # a comment or review runs at most one check


class Budget(StrEnum):
    """What ``command_uses`` counts besides commands: replies to people without write
    access (refused or answered), so that nobody can make the app write many comments."""

    REPLY = "reply"


class Reaction(StrEnum):
    DONE = "+1"
    QUEUED = "eyes"
    NOT_ANSWERED = "confused"  # refused, and the reply budget is spent


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


_MARKDOWN = MarkdownIt("commonmark").disable("text_join")  # escapes stay distinguishable
_OP = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.*?\[\]-]{0,199}$")
_FINGERPRINT = re.compile(r"^[0-9a-fA-F]{12}$")
_ITEM_URL = re.compile(r"^https://github\.com/([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/"
                       r"([A-Za-z0-9_.-]{1,100})/(pull|issues)/([1-9][0-9]{0,9})/?$")
_DURATION = re.compile(r"^(?:(\d{1,3})w)?(?:(\d{1,3})d)?(?:(\d{1,4})h)?$")


def command_lines(body: str) -> list[str]:
    """The command lines of a comment, whitespace-normalised, in order, each once.

    The body is parsed as CommonMark: a command is a line of a top-level paragraph that starts
    with ``/alignbot`` or a short form as plain text; code (fenced, indented, inline), quotes,
    list items, HTML blocks and comments never hold one, and ``\\/align`` is not one either.
    """
    found: list[str] = []
    tokens = _MARKDOWN.parse(body[:MAX_BODY])
    for opening, inline in itertools.pairwise(tokens):
        if opening.type != "paragraph_open" or opening.level != 0 or inline.type != "inline":
            continue
        for text in _paragraph_lines(inline.children or []):
            words = text.split()
            if words and (words[0].lower() == PREFIX or words[0].lower() in SHORT_FORMS):
                found.append(" ".join(words))
    return list(dict.fromkeys(found))


def _paragraph_lines(children: list[Token]) -> list[str]:
    """The lines of a paragraph that start with a plain-text ``/``, as written (markup kept,
    HTML comments dropped)."""
    lines: list[list[Token]] = [[]]
    for child in children:
        if child.type in ("softbreak", "hardbreak"):
            lines.append([])
        else:
            lines[-1].append(child)
    return [_source(line) for line in lines
            if line and line[0].type == "text" and line[0].content.startswith("/")]


def _source(tokens: list[Token]) -> str:
    """Inline tokens as they were written, near enough for a command's arguments."""
    parts: list[str] = []
    links: list[Token] = []
    for token in tokens:
        if token.type == "code_inline":
            parts.append(f"{token.markup}{token.content}{token.markup}")
        elif token.type == "html_inline":
            parts.append("" if token.content.startswith("<!--") else token.content)
        elif token.type == "text":
            parts.append(token.content)
        elif token.type == "link_open":
            links.append(token)
            parts.append("<" if token.markup == "autolink" else "[")
        elif token.type == "link_close" and links:
            link = links.pop()
            parts.append(">" if link.markup == "autolink" else f"]({link.attrGet('href')})")
        else:  # escapes and entities (as written), emphasis markers, images' alt text
            parts.append(token.markup or token.content)
    return "".join(parts)


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
    """The ``command`` job for one comment or review: at most ``MAX_COMMANDS`` lines, and how
    many more there were (``ignored``; the reply says so)."""
    repo = require(event.payload, "repository", "full_name", kind=str)
    installation = require(event.payload, "installation", "id", kind=int)
    return JobRequest(kind=JOB_KIND, key=f"{repo}#{number}/{source}/{source_id}", payload={
        "installation_id": installation, "repo": repo, "number": number,
        "source": source, "source_id": source_id, "actor": actor,
        "created_at": created_at, "commands": lines[:MAX_COMMANDS],
        "ignored": max(0, len(lines) - MAX_COMMANDS), "delivery_id": event.delivery_id})


def _optional(mapping: dict[str, Any], key: str, kind: type) -> Any:
    """``mapping[key]`` if it is there and of ``kind``; None if it is missing or null;
    ``PayloadError`` if it is something else."""
    if mapping.get(key) is None:
        return None
    return require(mapping, key, kind=kind)


def on_issue_comment(event: Event) -> list[JobRequest]:
    """``issue_comment`` created or edited on a pull request: its new command lines."""
    comment = require(event.payload, "comment", kind=dict)
    issue = require(event.payload, "issue", kind=dict)
    sender = _optional(event.payload, "sender", dict)
    if "pull_request" not in issue or _is_bot(comment.get("user")) or _is_bot(sender):
        return []
    body = _optional(comment, "body", str) or ""
    if event.action == "edited":
        changes = _optional(event.payload, "changes", dict) or {}
        before = _optional(changes, "body", dict) or {}
        previous = _optional(before, "from", str)
        if previous is None:  # the edit did not touch the body
            return []
        lines = new_command_lines(body, previous)
    else:
        lines = command_lines(body)
    if not lines:
        return []
    # For an edit the sender wrote the new lines (a maintainer may edit others' comments).
    actor = (_optional(sender, "login", str) if sender else None) \
        or require(comment, "user", "login", kind=str)
    return [_request(event, "comment", require(comment, "id", kind=int),
                     require(issue, "number", kind=int), actor,
                     _optional(comment, "created_at", str), lines)]


def on_review(event: Event) -> list[JobRequest]:
    """``pull_request_review`` submitted: the command lines of the review's body."""
    review = require(event.payload, "review", kind=dict)
    if _is_bot(review.get("user")) or _is_bot(_optional(event.payload, "sender", dict)):
        return []
    lines = command_lines(_optional(review, "body", str) or "")
    if not lines:
        return []
    number = require(event.payload, "pull_request", "number", kind=int)
    return [_request(event, "review", require(review, "id", kind=int), number,
                     require(review, "user", "login", kind=str),
                     _optional(review, "submitted_at", str), lines)]


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
    reaction: Reaction | None = None
    template: str | None = None
    values: dict[str, Any] = field(default_factory=dict)


def refused(reason: Refusal, **values: Any) -> Outcome:
    return Outcome(False, template="command_rejected.md.j2", values={"reason": reason, **values})


def line_hash(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:32]


def ignored_hash(count: int) -> str:
    """The ``command_replies`` key of the note that ``count`` lines past the cap were
    ignored."""
    return line_hash(f"\0ignored {count}")


def reply_marker(source: str, source_id: int) -> str:
    """The marker that starts the app's one reply to a comment or review."""
    return f"<!-- alignbot:command {source}:{source_id} -->"


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

    def find_reply(self) -> Any:
        """The app's reply to this comment or review (by its author and its marker at the
        start, among the comments posted since the command was written), or None."""
        since = self.payload.get("created_at")
        issue = self.repo.get_issue(self.number)
        listing = (issue.get_comments(since=datetime.fromisoformat(since)) if since
                   else issue.get_comments())
        return first_marked(listing, self.app.bot_login(),
                            reply_marker(self.source, self.source_id))


@dataclass
class CommandJob:
    """Runs one ``command`` job: decide each new command line once, then deliver the
    reactions and the comment's one reply (see the module docstring for why nothing is done
    twice)."""

    app: GitHubApp
    queue: JobQueue
    engine: Engine
    align_limit: RateLimit = field(default_factory=RateLimit)
    clock: Callable[[], datetime] = utcnow
    # replies per person without write access, per pull request: beyond it, a reaction only
    reply_limit: RateLimit = field(default_factory=lambda: RateLimit(5, timedelta(hours=1)))

    def __call__(self, job: JobRecord) -> dict[str, Any] | None:
        with transient_failures(self.app, job.payload["installation_id"]):
            return self._run(job)

    def _run(self, job: JobRecord) -> dict[str, Any]:
        request = Request(self.app, self.engine, job.payload)
        lines = list(job.payload["commands"])[:MAX_COMMANDS]
        ignored = int(job.payload.get("ignored") or 0)
        for line in lines:
            if self._handled(request, line_hash(line)) is None:
                self._decide(request, line)
        if ignored and self._handled(request, ignored_hash(ignored)) is None:
            self._note_ignored(request, ignored)
        reply_id = self._deliver(request)
        handled = []
        for line in lines:
            row = self._handled(request, line_hash(line))
            assert row is not None
            handled.append({"line": line, "command": row.command, "accepted": row.accepted,
                            "reply_id": row.reply_id})
        return {"commands": handled, "ignored": ignored, "reply_id": reply_id}

    # -- decide -------------------------------------------------------------------------

    def _handled(self, request: Request, digest: str) -> Row[Any] | None:
        with transaction(self.engine) as conn:
            return conn.execute(select(REPLIES).where(
                REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id,
                REPLIES.c.line_hash == digest)).first()

    def _rows(self, request: Request) -> list[Row[Any]]:
        """Every line handled for this comment or review, in the order it was decided."""
        with transaction(self.engine) as conn:
            return list(conn.execute(select(REPLIES).where(
                REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id)
                .order_by(REPLIES.c.created_at, REPLIES.c.line_hash)).all())

    def _decide(self, request: Request, line: str) -> None:
        parsed = parse_line(line)
        if isinstance(parsed, Malformed):
            outcome = Outcome(False, template="command_rejected.md.j2",
                              values={"reason": parsed.problem, "problem": parsed})
        else:
            outcome = self._execute(request, parsed)
        name = parsed.name
        if outcome.template is None and request.source == "review":
            outcome.template = "command_ack.md.j2"  # GitHub has no reactions on reviews
        body = None
        if outcome.template is not None:
            body = _render(outcome.template, **outcome.values, line=line, marker="",
                           name=name.value if name else None).strip()
        reaction = outcome.reaction
        if body is not None and not self._may_reply(request):
            body, reaction = None, reaction or Reaction.NOT_ANSWERED
        self._record(request, line_hash(line), name.value if name else "", outcome.accepted,
                     reaction, body)
        log.info("%s#%d: %s by %s: %s", request.repo_name, request.number, line,
                 request.actor, "accepted" if outcome.accepted else "refused")

    def _note_ignored(self, request: Request, count: int) -> None:
        body = _render("command_ignored.md.j2", count=count, limit=MAX_COMMANDS).strip()
        self._record(request, ignored_hash(count), "", False, None,
                     body if self._may_reply(request) else None)

    def _record(self, request: Request, digest: str, command: str, accepted: bool,
                reaction: str | None, body: str | None) -> None:
        values = {
            "source": request.source, "source_id": request.source_id, "line_hash": digest,
            "repo": request.repo_name, "number": request.number, "actor": request.actor,
            "command": command, "accepted": accepted,
            "reaction": reaction if request.source == "comment" else None,
            "reacted": False, "reply_body": body, "reply_id": None, "created_at": utcnow()}
        with transaction(self.engine) as conn:
            conn.execute(REPLIES.insert().values(**values))

    def _may_reply(self, request: Request) -> bool:
        """Whether this comment may get a reply: it already has one coming, the commenter
        has write access, or the commenter's reply budget on this pull request is not spent
        (counting one reply)."""
        if any(row.reply_body for row in self._rows(request)) or request.can_write:
            return True
        return self._use(request, Budget.REPLY, self.reply_limit) is None

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
        if any(row.command == Name.ALIGN.value and row.accepted
               for row in self._rows(request)):
            return refused(Refusal.ONE_ALIGN)
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
        return Outcome(True, Reaction.QUEUED, values={"queued": True})

    def _ok_to_test(self, request: Request, command: Command) -> Outcome:
        if not (request.can_write or (request.is_author and request.trusted)):
            return refused(Refusal.NEEDS_WRITE)
        if request.pr.state != "open":
            return refused(Refusal.CLOSED)
        trust = request.trust
        inside = request.pr.author_association in TRUSTED_ASSOCIATIONS
        if inside or trust.outside_contributors == "run":
            return Outcome(True, Reaction.DONE, values={"queued": False})
        if trust.outside_contributors == "skip":
            return refused(Refusal.TRUST_SKIP)
        head = request.pr.head.sha
        if not record_ok(self.engine, request.repo_name, request.number, head, request.actor):
            return Outcome(True, Reaction.DONE, values={"queued": False})
        self._enqueue_align(request, f"/ok-to-test by {request.actor}", {})
        return Outcome(True, Reaction.QUEUED, values={"queued": True})

    def _enqueue_align(self, request: Request, trigger: str, extra: dict[str, Any]) -> None:
        payload = {"installation_id": int(request.payload["installation_id"]),
                   "repo": request.repo_name, "number": request.number,
                   "head_sha": request.pr.head.sha, "trigger": trigger, **extra}
        self.queue.enqueue(JobRequest(kind=ALIGN_KIND, key=f"{request.repo_name}#"
                                      f"{request.number}", payload=payload, supersede=True))

    def _use(self, request: Request, name: Name | Budget, limit: RateLimit
             ) -> datetime | None:
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
        latest = latest_report(self.queue, request.repo_name, request.number)
        if latest is None:
            return refused(Refusal.NO_REPORT)
        head_sha, findings = latest
        for finding in findings:
            if finding.get("fingerprint") == fingerprint:
                tracker = (request.config.upstream.tracker if request.config is not None
                           else DEFAULT_TRACKER)
                return head_sha, _checked_links(finding, tracker)
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
        return Outcome(True, Reaction.DONE, "command_repro.md.j2",
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
            return Outcome(True, Reaction.DONE, "command_upstream.md.j2", values)
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
        return Outcome(True, Reaction.DONE, "command_upstream.md.j2",
                       {**values, "filed": filed})

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
            return Outcome(True, Reaction.DONE, values={"url": item.url})
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
            upsert(conn, PR_SETTINGS, {**keys, **values}, keys=list(keys), update=values)
        return Outcome(True, Reaction.DONE, values={"remind": command.remind,
                                           "until": values.get("snoozed_until")})

    def _help(self, request: Request, command: Command) -> Outcome:
        config = request.config
        return Outcome(True, Reaction.DONE, "command_help.md.j2", {
            "configured": config is not None,
            "tracking_repo": config.upstream.tracking_repo if config else None,
            "outside_contributors": request.trust.outside_contributors,
            "reminders": bool(config and config.reminders.enabled), "limit": self.align_limit})

    # -- deliver ------------------------------------------------------------------------

    def _deliver(self, request: Request) -> int | None:
        """Post what this comment's rows still owe GitHub: their reactions (each kind once)
        and the one reply that holds every line's answer; returns the reply's id."""
        rows = self._rows(request)
        keys = (REPLIES.c.source == request.source, REPLIES.c.source_id == request.source_id)
        given = {row.reaction for row in rows if row.reaction and row.reacted}
        for row in rows:
            if not row.reaction or row.reacted:
                continue
            if row.reaction not in given:
                try:
                    request.pr.get_issue_comment(row.source_id).create_reaction(row.reaction)
                except GithubException as exc:
                    if exc.status != 404:  # a deleted comment takes no reaction: nothing owed
                        raise
                given.add(row.reaction)
            with transaction(self.engine) as conn:
                conn.execute(update(REPLIES).where(
                    *keys, REPLIES.c.line_hash == row.line_hash).values(reacted=True))
        answered = [row for row in rows if row.reply_body]
        if not answered:
            return None
        if all(row.reply_id is not None for row in answered):
            return int(answered[0].reply_id)
        marker = reply_marker(request.source, request.source_id)
        body = fit(environment().get_template("command_reply.md.j2").render(
            # each part was rendered by a strict template when the line was decided
            marker=marker, parts=[Trusted(row.reply_body) for row in answered]),
            COMMENT_LIMIT, None)
        reply = request.find_reply()
        if reply is None:
            reply_id = int(request.pr.create_issue_comment(body).id)
        else:
            if reply.body != body:  # an edit added lines: the one reply answers them too
                reply.edit(body)
            reply_id = int(reply.id)
        with transaction(self.engine) as conn:
            conn.execute(update(REPLIES).where(*keys, REPLIES.c.reply_body.is_not(None))
                         .values(reply_id=reply_id))
        return reply_id


def _checked_links(finding: dict[str, Any], tracker: str = DEFAULT_TRACKER
                   ) -> dict[str, Any]:
    """The finding without the report's ``upstream_url`` (the report comes out of the sandbox
    that ran the pull request's code) and with ``new_issue_link``, the prefilled link the bot
    builds from ``tracker`` and the draft (``bot.engine_report.new_issue_link``)."""
    return checked_finding(finding, tracker)


def _render(template: str, **values: Any) -> str:
    return fit(environment().get_template(template).render(**values), COMMENT_LIMIT, None)


def _find_issue(request: Request, tracking: str, fingerprint: str, marker: str) -> Any:
    """An issue the app opened in ``tracking`` whose body has ``marker``, or None."""
    found = request.gh.search_issues(f"repo:{tracking} is:issue {fingerprint}")
    return first_marked(found, request.app.bot_login(), marker)


def latest_report(queue: JobQueue, repo: str, number: int
                  ) -> tuple[str, list[dict[str, Any]]] | None:
    """The head sha and findings of the latest completed ``align`` job with a report."""
    for job in queue.latest(ALIGN_KIND, f"{repo}#{number}"):
        report = (job.result or {}).get("report")
        findings = stored_findings(report) if isinstance(report, dict) else None
        if findings is not None:
            return str(job.payload.get("head_sha", "")), findings
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
        return insert_ignore(conn, UPSTREAM, values, keys=["url"])


def upstream_item(engine: Engine, url: str) -> Row[Any] | None:
    """The ``upstream_items`` row watching ``url``, or None."""
    with transaction(engine) as conn:
        return conn.execute(select(UPSTREAM).where(UPSTREAM.c.url == url)).first()


def reminder_settings(engine: Engine, repo: str, number: int) -> Row[Any] | None:
    """The ``pr_reminder_settings`` row of a pull request, or None (the defaults apply)."""
    with transaction(engine) as conn:
        return conn.execute(select(PR_SETTINGS).where(PR_SETTINGS.c.repo == repo,
                                                      PR_SETTINGS.c.number == number)).first()
