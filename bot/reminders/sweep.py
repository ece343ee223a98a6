"""The sweep of one repository: one run of a ``reminder-sweep`` job.

A repository is swept once per *period*: the week that starts at its configured weekday and
hour (``reminders.weekday``/``hour``/``timezone`` in ``.github/alignbot.yml``). A sweep has
three phases, and its cursor is stored after every step that matters, so a sweep stopped by a
crash, an error or a spent budget resumes where it stopped:

1. *listing*: the search API (``is:pr is:open draft:false updated:<=X``, newest first, 100 a
   page) below the staleness cutoff, with a keyset cursor on ``updated``. Paging by page number
   would skip pull requests: every reminder posted bumps its pull request out of the results.
2. *follow-ups*: pull requests this app reminded after the cutoff. The reminder itself made
   them look fresh to the search, so they are read one by one (they are few: the ones that
   got a reminder last week).
3. *upstream*: the watched upstream items and the digest (``upstream.py``).

Invariants:

- At most one reminder per pull request per period: ``reminders_sent`` is unique on (repo,
  number, period); the comment carries a hidden marker naming the period, looked for before
  posting; and a reminder about to be posted is journalled in the cursor (``posting``) and
  reconciled first on the next run, so a crash between the post and the record neither loses
  the record nor posts twice. One repository is swept by one job at a time (``job.py``).
- The app never closes a pull request, and labels one only when ``reminders.labels`` is on.
- Every GitHub request is counted against the installation's hourly budget for this feature;
  running out raises :class:`ApiCallBudgetExhausted` with the cursor saved.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from github import GithubException

from ..config import CONFIG_PATH, ConfigError, Reminders, RepoConfig, glob_match, load_config
from ..storage import Phase, ReminderKind
from ..tenancy import Directory
from .api import PAGE, ApiLimits, SweepApi
from .codeowners import OwnerRule, codeowners_text, owners_of, parse_codeowners
from .facts import PullFacts, Waiting, find_markers, is_bot, mentions, waiting_on
from .render import Reminder
from .report import SweepReport
from .schedule import Schedule, parse_time, search_time
from .store import RepoState, Store
from .upstream import DigestLock, UpstreamWatch, no_lock

log = logging.getLogger(__name__)

STALE_LABEL = "stale"
MIN_GAP = timedelta(days=6)  # never two reminders closer than this, whatever the schedule
FAILING = frozenset({"failure", "timed_out", "action_required", "startup_failure"})


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



@dataclass
class SweepOptions:
    """Knobs of a sweep; the defaults are the service's."""

    limits: ApiLimits = field(default_factory=ApiLimits)
    write_interval: float = 1.0
    writes_per_minute: int = 80
    disabled_recheck: timedelta = timedelta(days=1)
    error_retry: timedelta = timedelta(hours=1)


@dataclass
class SweepHooks:
    """Test seams. ``after_post`` runs between a reminder's post and its record."""

    after_post: Callable[[str, int, int], None] | None = None



Guard = Callable[[], None]  # raises when the job running the sweep is no longer current


@dataclass
class RepoSweep:
    """The sweep of one repository: resumes the stored cursor, runs the phases, stores
    progress. Raises ApiCallBudgetExhausted (or a GitHub error) with the cursor saved."""

    store: Store
    state: RepoState
    api: SweepApi
    bot_login: str
    clock: Callable[[], datetime]
    guard: Guard
    report: SweepReport
    hooks: SweepHooks
    directory: Directory  # alignbot.bot.tenancy: what GitHub says of a repository before a write
    digest_lock: DigestLock = no_lock
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
            tracking = self.config.upstream.tracking_repo if self.config is not None else None
            UpstreamWatch(self.store, self.api, self.bot_login, self.clock, self.guard,
                          self.report, self.directory, self.digest_lock
                          ).run(self.state, tracking, self.schedule, slot)
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
        escalated = any(r["kind"] == ReminderKind.ESCALATION for r in rows) or \
            any(m.kind == ReminderKind.ESCALATION for m in run)
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
        reminder.escalated_from, reminder.kind = waiting.kind, ReminderKind.ESCALATION
        reminder.waiting = Waiting(ReminderKind.ESCALATION, mentions([rules.escalate_to]),
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
            self._codeowners = parse_codeowners(codeowners_text(self.api.get, self.repo))
        if not self._codeowners:
            return []
        return owners_of(self._codeowners, self._files(number))

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
