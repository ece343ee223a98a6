"""Who may run what: the trust data that the ``/ok-to-test`` gate (``bot/trust.py``) and the
slash-commands (``bot/commands/``) both read, kept out of either feature.

A pull request from outside the organisation and its collaborators runs only after a
maintainer's ``/ok-to-test`` (recorded in ``pr_ok_to_test``), unless the configuration on the
base branch says ``trust.outside_contributors: run`` (or ``skip``: never automatically).

A go-ahead binds to one commit: the head GitHub showed when the comment was written, never
the head when its job happens to run. Which head that was is read from what GitHub itself
told the App, with GitHub's own clock: every ``pull_request`` webhook (opened, synchronize,
reopened, ready for review) is kept in its ``align`` job's payload with the pull request's
``updated_at`` at that event and, for a push, the head it replaced (``head_seen``). A review
names its commit itself (``commit_id``). GitHub's times have whole seconds: a head seen in
the same second as the comment does not count as seen before it. Where the App's record has
a gap (a push it has not heard of yet), nothing is approved and the reply says why. A
go-ahead counts only while its giver still has write access to the repository.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from github import GithubException
from github.PullRequest import PullRequest
from github.Repository import Repository
from sqlalchemy import Engine, select

from .config import CONFIG_PATH, ConfigError, RepoConfig, Trust, load_config
from .github import FileUnreadable, read_text
from .jobs import ALIGN
from .storage import JOBS, OK_TO_TEST, insert_ignore, transaction, upsert, utcnow

log = logging.getLogger(__name__)

# author_association values of people inside the organisation or invited to the repository.
TRUSTED_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
# The collaborator permissions (GitHub's legacy ``permission``, and role names) that may run
# pull-request code.
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
# The keys of an ``align`` job's payload that record what its webhook said of the head.
SEEN_AT, SEEN_BEFORE = "head_seen_at", "head_before"


class Decision(StrEnum):
    RUN = "run"
    WAIT = "wait"  # until a maintainer's /ok-to-test
    SKIP = "skip"  # never automatically (trust.outside_contributors: skip)


class Unbound(StrEnum):
    """Why no head can be named as the one GitHub showed when a comment was written (the
    reply template words each one)."""

    NO_TIME = "no_time"  # the webhook gave no creation time
    UNSEEN = "unseen"  # the App saw no head of the pull request before the comment
    SAME_SECOND = "same_second"  # two heads were seen in the comment's last second
    GAP = "gap"  # the App's record of pushes has a hole around the comment
    MOVED = "moved"  # the head moved to a commit the App has not heard of yet


@dataclass(frozen=True)
class Hold:
    """Why the gate keeps a head from running: ``reason`` (the job's result) and, when
    ``title`` is set, the completed check run that says so on the head."""

    reason: str
    title: str | None = None
    summary: str = ""
    conclusion: str = "action_required"  # unlike neutral, never satisfies a required check


@dataclass(frozen=True)
class Sighting:
    """GitHub showed ``sha`` as the pull request's head at ``at`` (GitHub's clock); a push
    names the head it replaced (``before``). ``order``: the App's arrival order."""

    sha: str
    at: datetime
    before: str | None
    order: int


@dataclass(frozen=True)
class Approval:
    """What the go-aheads of a pull request say of one head: ``by`` is who let it run (None:
    nobody who still may), ``others`` the heads approved instead (newest first, with their
    approvers), ``lost`` who approved it but has no write access any more."""

    by: str | None
    others: list[tuple[str, str]] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def head_seen(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``pull_request`` webhook says of the head, for its ``align`` job's payload: when
    GitHub showed it (``pull_request.updated_at``) and, for a push, the head before it."""
    pr = payload.get("pull_request")
    seen: dict[str, Any] = {}
    at = pr.get("updated_at") if isinstance(pr, dict) else None
    if isinstance(at, str) and parse_time(at) is not None:
        seen[SEEN_AT] = at
    before = payload.get("before")
    if isinstance(before, str) and before:
        seen[SEEN_BEFORE] = before
    return seen


def parse_time(text: str | None) -> datetime | None:
    """A GitHub timestamp as an aware datetime, or None when it is not one."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sightings(engine: Engine, repo: str, number: int) -> list[Sighting]:
    """Every head of ``repo#number`` a webhook showed, oldest first."""
    query = select(JOBS.c.id, JOBS.c.payload).where(
        JOBS.c.kind == ALIGN, JOBS.c.key == f"{repo}#{number}").order_by(JOBS.c.id)
    with transaction(engine) as conn:
        rows = list(conn.execute(query))
    found = []
    for job_id, payload in rows:
        at = parse_time((payload or {}).get(SEEN_AT))
        sha = (payload or {}).get("head_sha")
        if at is not None and isinstance(sha, str):
            before = payload.get(SEEN_BEFORE)
            found.append(Sighting(sha, at, before if isinstance(before, str) else None,
                                  int(job_id)))
    return sorted(found, key=lambda s: (s.at, s.order))


def head_at(seen: Iterable[Sighting], when: datetime | None, current: str) -> str | Unbound:
    """The head GitHub showed at ``when``: the newest head seen strictly before it, provided
    the record shows it still was the head then (the next head seen replaced it, or it still
    is ``current``); otherwise why it cannot be told."""
    if when is None:
        return Unbound.NO_TIME
    ordered = sorted(seen, key=lambda s: (s.at, s.order))
    earlier = [s for s in ordered if s.at < when]
    if not earlier:
        return Unbound.UNSEEN
    last = earlier[-1]
    if len({s.sha for s in earlier if s.at == last.at}) > 1:
        return Unbound.SAME_SECOND
    later = [s for s in ordered if s.at >= when]
    if not later:
        return last.sha if current == last.sha else Unbound.MOVED
    first = [s for s in later if s.at == later[0].at]
    if any(s.sha == last.sha or s.before == last.sha for s in first):
        return last.sha
    return Unbound.SAME_SECOND if later[0].at == when else Unbound.GAP


def record_ok(engine: Engine, repo: str, number: int, head_sha: str, login: str, *,
              replace: bool = False) -> bool:
    """Record an ``/ok-to-test`` of ``head_sha`` by ``login``; False if this head was already
    trusted (nothing changes). ``replace``: the recorded giver no longer counts (lost write
    access), so ``login``'s go-ahead takes the row."""
    keys = {"repo": repo, "number": number, "head_sha": head_sha}
    values = {"trusted_by": login, "created_at": utcnow()}
    with transaction(engine) as conn:
        if replace:
            upsert(conn, OK_TO_TEST, {**keys, **values}, keys=list(keys), update=values)
            return True
        return insert_ignore(conn, OK_TO_TEST, {**keys, **values}, keys=list(keys))


def approvals(engine: Engine, repo: str, number: int) -> list[tuple[str, str]]:
    """(head sha, approver) of every go-ahead of ``repo#number``, newest first."""
    with transaction(engine) as conn:
        rows = conn.execute(select(OK_TO_TEST.c.head_sha, OK_TO_TEST.c.trusted_by).where(
            OK_TO_TEST.c.repo == repo, OK_TO_TEST.c.number == number,
        ).order_by(OK_TO_TEST.c.created_at.desc(), OK_TO_TEST.c.id.desc()))
        return [(str(sha), str(login)) for sha, login in rows]


def is_ok(engine: Engine, repo: str, number: int, head_sha: str, carry_over: bool) -> bool:
    """Whether a go-ahead for this pull request at ``head_sha`` (or at any head) is recorded;
    ``approval`` also checks that its giver still has write access."""
    return any(carry_over or sha == head_sha for sha, _ in approvals(engine, repo, number))


def can_write(repo: Repository, login: str) -> bool:
    """Whether ``login`` has write access to ``repo`` now (a 404: not a collaborator)."""
    try:
        permission = repo.get_collaborator_permission(login)
    except GithubException as exc:
        if exc.status == 404:
            return False
        raise
    return permission in WRITE_PERMISSIONS


def approval(engine: Engine, repo: Repository, number: int, head_sha: str,
             carry_over: bool) -> Approval:
    """Who let ``head_sha`` run and still may (the newest such go-ahead), or why nobody."""
    recorded = approvals(engine, repo.full_name, number)
    lost = []
    for sha, login in recorded:
        if not (carry_over or sha == head_sha) or login in lost:
            continue
        if can_write(repo, login):
            return Approval(login)
        lost.append(login)
    return Approval(None, [(s, who) for s, who in recorded if s != head_sha][:3], lost)


def decide(association: str | None, trust: Trust, ok: bool) -> Decision:
    """Run, wait or skip a pull request whose author has this ``author_association``."""
    if association in TRUSTED_ASSOCIATIONS or trust.outside_contributors == "run":
        return Decision.RUN
    if trust.outside_contributors == "skip":
        return Decision.SKIP
    return Decision.RUN if ok else Decision.WAIT


def needs_ok(association: str | None, trust: Trust) -> bool:
    """Whether this pull request runs only on a maintainer's go-ahead."""
    return decide(association, trust, ok=False) is not Decision.RUN


def base_config(repo: Repository, pr: PullRequest) -> RepoConfig | None:
    """The configuration on the pull request's base branch, or None (missing, invalid, or
    one GitHub will not hand over as a file: too large, a link out of the repository).

    Trust and filing settings come from here, never from the head: a pull request must not be
    able to trust itself or send issues elsewhere by editing the file.
    """
    try:
        text = read_text(repo, CONFIG_PATH, pr.base.ref)
    except FileUnreadable as exc:
        log.info("%s: the base branch's %s; trust defaults apply", repo.full_name, exc)
        return None
    if text is None:
        return None
    try:
        return load_config(text)
    except ConfigError:
        log.info("%s: the base branch's %s is invalid; trust defaults apply",
                 repo.full_name, CONFIG_PATH)
        return None


def base_trust(repo: Repository, pr: PullRequest) -> Trust:
    config = base_config(repo, pr)
    return config.trust if config is not None else Trust()


def pr_trusted(engine: Engine, repo: Repository, pr: PullRequest, trust: Trust) -> bool:
    """Whether the pull request at its current head may run without a maintainer's word."""
    if not needs_ok(pr.author_association, trust):
        return True
    if trust.outside_contributors == "skip":
        return False
    return approval(engine, repo, pr.number, pr.head.sha, trust.carry_over_pushes).by is not None
