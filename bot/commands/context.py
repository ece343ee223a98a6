"""What a command handler works with: the request (one comment's pull request and commenter,
read from GitHub lazily, once), what it may use of the job that runs it (``Services``), and
what it comes to (``Outcome``: a reaction and/or a reply, or a ``Refusal``).

A handler is a function ``(services, request, command) -> Outcome`` (``Handler``) that takes
its own command's record; the job (``bot/commands/job.py``) calls ``handlers.handle``, which
picks the handler by the record's type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from typing import Any, Protocol, TypeVar

from github import Github, GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine

from alignbot.checks.api import DEFAULT_TRACKER as DEFAULT_TRACKER  # where a config is unreadable
from alignbot.checks.api import environment

from ..config import RepoConfig, Trust
from ..github import GitHubApp
from ..markers import first_marked
from ..output import COMMENT_LIMIT, fit
from ..policy import (
    WRITE_PERMISSIONS,
    Unbound,
    base_config,
    head_at,
    parse_time,
    pr_trusted,
    sightings,
)
from ..queue import JobQueue
from ..tenancy import Tenant
from .parser import Command


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
    UNBOUND = "unbound"  # no head can be named as the one the comment was written on
    ONE_ALIGN = "one_align"  # a comment or review runs at most one check


class CountedUse(StrEnum):
    """What ``command_uses`` counts besides commands: replies to people without write
    access (refused or answered), so that nobody can make the app write many comments."""

    REPLY = "reply"


class Reaction(StrEnum):
    DONE = "+1"
    QUEUED = "eyes"
    NOT_ANSWERED = "confused"  # refused, and the reply budget is spent


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

    @property
    def tenant(self) -> Tenant:
        """Whom this command works for (``alignbot.bot.tenancy``): every repository it names is
        authorized against this."""
        return Tenant(int(self.payload["installation_id"]), self.repo_name)

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
    def written_head(self) -> str | Unbound:
        """The head GitHub showed when the comment or review was written: a review names its
        commit; a comment's is read from the heads the App saw before its ``created_at``
        (``policy.head_at``). A go-ahead applies to this commit only."""
        commit = self.payload.get("commit_id")
        if isinstance(commit, str) and commit:
            return commit
        return head_at(sightings(self.engine, self.repo_name, self.number),
                       parse_time(self.payload.get("created_at")), self.pr.head.sha)

    def find_reply(self) -> Any:
        """The app's reply to this comment or review (by its author and its marker at the
        start, among the comments posted since the command was written), or None."""
        since = self.payload.get("created_at")
        issue = self.repo.get_issue(self.number)
        listing = (issue.get_comments(since=datetime.fromisoformat(since)) if since
                   else issue.get_comments())
        return first_marked(listing, self.app.bot_login(),
                            reply_marker(self.source, self.source_id))



class Services(Protocol):
    """What a handler may use of the ``CommandJob`` that runs it (read-only)."""

    @property
    def queue(self) -> JobQueue: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def align_limit(self) -> RateLimit:
        """``/align``: uses per person and pull request."""
        ...

    @property
    def clock(self) -> Callable[[], datetime]: ...


C = TypeVar("C", bound=Command)

# a command's handler takes its own record: ``Handler[ReproCommand]``
Handler = Callable[[Services, Request, C], Outcome]


def render(template: str, **values: Any) -> str:
    """A reply (or part of one) from ``templates/``, within GitHub's limit on a comment."""
    return fit(environment().get_template(template).render(**values), COMMENT_LIMIT, None)
