"""bot/reminders/facts.py: who a pull request waits on."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from alignbot.bot.reminders import PullFacts, waiting_on
from alignbot.bot.storage import ReminderKind


def _facts(**changes: Any) -> PullFacts:
    base: dict[str, Any] = {
        "number": 1, "author": "alice", "author_is_bot": False,
        "created_at": datetime(2025, 1, 1, tzinfo=UTC), "head_sha": "h", "head_pushed_at": None,
        "head_by_bot": False, "requested_users": [], "requested_teams": [], "reviews": [],
        "comments": []}
    return PullFacts(**{**base, **changes})


def _review(login: str, state: str, commit: str = "h") -> dict[str, Any]:
    return {"user": {"login": login, "type": "User"}, "state": state, "commit_id": commit,
            "submitted_at": "2025-01-02T00:00:00Z"}


def test_who_a_pull_request_waits_on() -> None:
    none: Callable[[], list[str]] = list
    owners = lambda: ["own"]  # noqa: E731
    assert waiting_on(_facts(), lambda: ["ci"], owners, []).kind == ReminderKind.AUTHOR
    approved = _facts(reviews=[_review("r", "APPROVED")])
    assert waiting_on(approved, none, owners, ["m"]).mentions == ["@m"]
    stale_approval = _facts(reviews=[_review("r", "APPROVED", "old")])
    assert waiting_on(stale_approval, none, owners, ["m"]).mentions == ["@own"]
    dismissed = _facts(reviews=[_review("r", "CHANGES_REQUESTED"), _review("r", "DISMISSED")])
    assert waiting_on(dismissed, none, none, ["m", "alice"]).mentions == ["@m"]
    own = _facts(reviews=[_review("alice", "APPROVED")], requested_users=["alice", "bob"])
    assert waiting_on(own, none, owners, []).mentions == ["@bob"]
    bot = _facts(reviews=[{**_review("ci[bot]", "CHANGES_REQUESTED"),
                           "user": {"login": "ci[bot]", "type": "Bot"}}])
    assert waiting_on(bot, none, none, []).kind == ReminderKind.REVIEWERS
