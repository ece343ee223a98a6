"""What the sweep posts, rendered from templates/: a reminder on a pull request, and the
upstream watch's issue and weekly digest comment."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from alignbot.checks.api import environment

from ..storage import ReminderKind, UpstreamState
from .facts import Waiting, reminder_marker
from .schedule import describe_wait

SNOOZE_EXAMPLE = "/remind snooze 2w"
PING_AFTER = timedelta(days=14)  # the digest suggests a ping after this long without activity
DIGEST_TITLE = "alignbot: upstream watch"
DIGEST_ISSUE_MARKER = "<!-- alignbot:upstream-digest -->"
DIGEST_MARKER = re.compile(r"<!-- alignbot:upstream-digest period=(\S+) -->")

_templates = functools.cache(environment)  # compiled once, not once per reminder

TEMPLATES = {ReminderKind.REVIEWERS: "reminder_reviewers.md.j2",
             ReminderKind.AUTHOR: "reminder_author.md.j2",
             ReminderKind.MERGE: "reminder_merge.md.j2",
             ReminderKind.ESCALATION: "reminder_escalation.md.j2"}


@dataclass
class Reminder:
    """One reminder to post, and everything its template shows."""

    number: int
    period: str
    kind: ReminderKind
    count: int
    waiting: Waiting
    waited: timedelta
    author: str
    stale_days: int
    max_reminders: int
    escalated_from: ReminderKind | None = None

    def body(self) -> str:
        return _templates().get_template(TEMPLATES[self.kind]).render(
            marker=reminder_marker(self.period, self.kind, self.count),
            mentions=self.waiting.mentions, reasons=self.waiting.reasons,
            requested=self.waiting.requested, approvers=self.waiting.approvers,
            waited=describe_wait(self.waited), author=self.author, count=self.count,
            max_reminders=self.max_reminders, stale_days=self.stale_days,
            snooze=SNOOZE_EXAMPLE, waiting_on=(self.escalated_from or self.kind).value)



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
