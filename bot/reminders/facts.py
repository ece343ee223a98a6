"""What the sweep reads about one pull request, and who it waits on: the pure decisions, with
no I/O (the app's own reminders are found by their hidden marker)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..markers import find_marked, is_bot_account
from ..storage import ReminderKind
from .schedule import parse_time

MAX_MENTIONS = 10
_REMINDER_MARKER = re.compile(r"<!-- alignbot:reminder period=(\S+) kind=(\S+) n=(\d+) -->")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
_TEAM = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def is_bot(user: Mapping[str, Any] | None) -> bool:
    """Apps and other bots: their actions are not human activity. A deleted user counts as
    no one."""
    return not user or is_bot_account(user)


@dataclass(frozen=True)
class Marker:
    period: str
    kind: ReminderKind
    count: int
    comment_id: int
    created_at: datetime


def reminder_marker(period: str, kind: ReminderKind, count: int) -> str:
    return f"<!-- alignbot:reminder period={period} kind={kind.value} n={count} -->"


def find_markers(comments: list[dict[str, Any]], bot_login: str) -> list[Marker]:
    """This app's reminders among a pull request's comments (other authors are ignored, so
    nobody can fake one)."""
    found = []
    for comment, match in find_marked(comments, bot_login, _REMINDER_MARKER):
        created = parse_time(comment.get("created_at"))
        if created and match.group(2) in ReminderKind._value2member_map_:
            found.append(Marker(match.group(1), ReminderKind(match.group(2)), int(match.group(3)),
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

    kind: ReminderKind
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
        return Waiting(ReminderKind.AUTHOR, mentions(author), reasons)
    requested = [u for u in facts.requested_users if u != facts.author] + facts.requested_teams
    if requested:
        return Waiting(ReminderKind.REVIEWERS, mentions(requested), requested=True)
    approvers = sorted(login for login, r in on_head.items() if r["state"] == "APPROVED")
    if approvers:
        return Waiting(ReminderKind.MERGE, mentions(maintainers), approvers=approvers)
    people = [o for o in owners() if o != facts.author] or \
        [m for m in maintainers if m != facts.author]
    return Waiting(ReminderKind.REVIEWERS, mentions(people))


def mentions(names: list[str]) -> list[str]:
    """``@login`` / ``@org/team`` for valid names only, once each, at most MAX_MENTIONS."""
    out: list[str] = []
    for name in names:
        name = name.lstrip("@")
        if (_LOGIN.match(name) or _TEAM.match(name)) and f"@{name}" not in out:
            out.append(f"@{name}")
    return out[:MAX_MENTIONS]

