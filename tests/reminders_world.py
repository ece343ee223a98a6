"""Shared by tests/test_reminders_*.py: a repository with dozens of pull requests in every
state on the GitHub test server, a database, and the app's sweep jobs run through a real
``Worker`` and ``SqlJobQueue`` with a fake clock (nothing sleeps but the worker's retries)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select

from alignbot.bot.config import Reminders
from alignbot.bot.github import ApiOptions, GitHubApp
from alignbot.bot.reminders import (
    STALE_SWEEP,
    WEEKDAYS,
    ApiLimits,
    Schedule,
    SweepHooks,
    SweepJob,
    SweepOptions,
    SweepReport,
    run_inline,
)
from alignbot.bot.storage import (
    PR_SETTINGS,
    SENT,
    InstallationRow,
    ReminderKind,
    make_engine,
    migrate,
    transaction,
)
from alignbot.bot.testing.github import CheckRun, GitHubServer, Issue
from alignbot.bot.worker import RetryPolicy

# transient failures come back after RETRY_AFTER seconds of real time (the queue's clock)
RETRY_AFTER = 0.5

ORG, NAME, TRACKER, INSTALLATION = "org", "ops", "tracker", 4242
REPO = f"{ORG}/{NAME}"
BASE = "b" * 40
COMMENTS = r"^/repos/org/ops/issues/\d+/comments$"
CODEOWNERS = "# owners\nops/** @ops-owner\n/kernels/ @org/kernel-team\n"


def sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def config_text(now: datetime, **reminders: Any) -> str:
    """``.github/alignbot.yml`` whose weekly slot is the hour of ``now`` (the server stamps
    the app's own comments with the real time, so the fake clock starts at the real time)."""
    values = {"enabled": True, "weekday": WEEKDAYS[now.weekday()], "hour": now.hour,
              "stale_days": 7, "max_reminders": 3, "maintainers": ["maint1", "maint2"],
              "exempt_labels": ["on-hold"], "exempt_authors": ["renovate-fan"],
              "exempt_paths": ["docs/**"], **reminders}
    lines = [f"  {key}: {value if not isinstance(value, bool) else str(value).lower()}"
             if not isinstance(value, list) else f"  {key}: [{', '.join(value)}]"
             for key, value in values.items() if value is not None]
    return "candidate:\n  preset: torch\nreminders:\n" + "\n".join(lines) + \
        f"\nupstream:\n  tracking_repo: {ORG}/{TRACKER}\n"


@dataclass
class World:
    """A repository with dozens of pull requests in every state, a database, the app."""

    server: GitHubServer
    engine: Engine
    t0: datetime
    now: list[datetime] = field(default_factory=list)
    expected: dict[int, tuple[ReminderKind, set[str]]] = field(default_factory=dict)

    @property
    def clock(self) -> Callable[[], datetime]:
        return lambda: self.now[0]

    def app(self) -> GitHubApp:
        return GitHubApp(self.server.app_id, self.server.private_key_pem, ApiOptions(
            base_url=self.server.url, seconds_between_writes=0, retries=0, max_wait=1))

    def job(self, engine: Engine | None = None, *, hooks: SweepHooks | None = None,
            limits: dict[str, Any] | None = None, **options: Any) -> SweepJob:
        """The sweep jobs' handler, on the fake clock, never sleeping between writes."""
        return SweepJob(self.app(), engine or self.engine, SweepOptions(
            limits=ApiLimits(**(limits or {})), write_interval=0, **options),
            clock=self.clock, hooks=hooks or SweepHooks(), sleep=lambda seconds: None)

    def sweep(self, engine: Engine | None = None, *, force: bool = False,
              stale_after: timedelta = STALE_SWEEP, **options: Any) -> SweepReport:
        """One pass and its jobs, run by a real worker on the real queue."""
        return run_inline(engine or self.engine, self.job(engine, **options), force=force,
                          retry=RetryPolicy(base=RETRY_AFTER, cap=RETRY_AFTER, jitter=0),
                          stale_after=stale_after)

    def at(self, moment: datetime) -> World:
        self.now[:] = [moment]
        return self

    # -- seeding ------------------------------------------------------------------------

    def pr(self, number: int, days: float, *, user: str = "alice", files: tuple[str, ...] = (
            "README.md",), labels: tuple[str, ...] = (), draft: bool = False,
            state: str = "open", expect: tuple[ReminderKind, set[str]] | None = None) -> Issue:
        created = self.t0 - timedelta(days=days)
        head = sha(number, "head")
        issue = self.server.add_pull(ORG, NAME, number, head, BASE, f"Change {number}", user,
                                     files=[{"filename": f} for f in files], labels=labels,
                                     draft=draft, state=state, created_at=created,
                                     updated_at=created)
        self.server.repo(ORG, NAME).commits[head].date = created
        if expect is not None:
            self.expected[number] = expect
        return issue

    def push(self, number: int, moment: datetime, *, by_bot: bool = False) -> None:
        pushed = sha(number, "push", moment.isoformat())
        self.server.push(ORG, NAME, number, pushed, updated_at=moment)
        commit = self.server.repo(ORG, NAME).commits[pushed]
        commit.date = moment
        if by_bot:
            commit.author = self.server.user("pre-commit-ci[bot]", "Bot")

    def comment(self, number: int, who: str, moment: datetime, body: str = "Any news?") -> None:
        self.server.add_comment(ORG, NAME, number, body, who, created_at=moment)

    def review(self, number: int, who: str, state: str, moment: datetime,
               commit_id: str | None = None) -> None:
        self.server.add_review(ORG, NAME, number, who, state, submitted_at=moment,
                               commit_id=commit_id)

    def failing_check(self, number: int) -> None:
        pull = self.server.pull(ORG, NAME, number).pull
        assert pull is not None
        repo = self.server.repo(ORG, NAME)
        run = CheckRun(self.server.next_id(), repo, "ci / tests", pull.head_sha,
                       self.server.next_id(), status="completed", conclusion="failure")
        self.server.check_runs[run.id] = run

    def setting(self, number: int, *, snoozed_until: datetime | None = None,
                disabled: bool = False) -> None:
        with transaction(self.engine) as conn:
            conn.execute(insert(PR_SETTINGS).values(
                repo=REPO, number=number, snoozed_until=snoozed_until, disabled=disabled,
                updated_by="alice", updated_at=self.t0))

    # -- reading back -------------------------------------------------------------------

    def reminders(self, number: int | None = None) -> list[Any]:
        """The app's reminder comments (optionally on one pull request), oldest first."""
        found = []
        for (_, issue_number), issue in sorted(self.server.issues.items()):
            if issue.repo.full_name != REPO or number not in (None, issue_number):
                continue
            found += [c for c in self.server.comments_on(ORG, NAME, issue_number)
                      if c.user.login == "alignbot[bot]" and "alignbot:reminder" in c.body]
        return found

    def posted_numbers(self) -> list[int]:
        return sorted(c.issue_number for c in self.reminders())

    def rows(self) -> list[dict[str, Any]]:
        with transaction(self.engine) as conn:
            return [dict(r._mapping) for r in conn.execute(select(SENT).order_by(SENT.c.id))]


def install(engine: Engine) -> None:
    migrate(engine)
    with transaction(engine) as conn:
        conn.execute(insert(InstallationRow.__table__).values(
            id=INSTALLATION, account_login=ORG, repositories=[REPO, f"{ORG}/{TRACKER}"]))


def new_world(server: GitHubServer, engine: Engine, **reminders: Any) -> World:
    t0 = datetime.now(UTC).replace(microsecond=0)
    files = {".github/alignbot.yml": config_text(t0, **reminders), ".github/CODEOWNERS": CODEOWNERS,
             "README.md": "ops\n", "ops/add.py": "add\n", "docs/guide.md": "guide\n"}
    server.add_installation(INSTALLATION, ORG)
    server.add_repo(ORG, NAME, INSTALLATION, files_by_ref={BASE: files})
    server.add_repo(ORG, TRACKER, INSTALLATION, files_by_ref={sha("t"): {"README.md": "t\n"}})
    install(engine)
    world = World(server, engine, t0)
    world.at(t0)
    return world


def catalogue(w: World) -> None:
    """Dozens of pull requests; ``expect`` is the first week's reminder, if any."""
    t0, maint = w.t0, {"@maint1", "@maint2"}
    for n in (1, 2, 3):  # fresh
        w.pr(n, 2)
    for n in (4, 5):  # drafts
        w.pr(n, 20, draft=True)
    for n in (6, 7):  # approved on the head: a note to the maintainers
        w.pr(n, 12, expect=(ReminderKind.MERGE, maint))
        w.review(n, "rev1", "APPROVED", t0 - timedelta(days=10))
    for n in (8, 9):  # changes requested on the head
        w.pr(n, 15, user="bob", expect=(ReminderKind.AUTHOR, {"@bob"}))
        w.review(n, "rev1", "CHANGES_REQUESTED", t0 - timedelta(days=9))
    for n in (10, 11):  # failing checks
        w.pr(n, 9, user="carol", expect=(ReminderKind.AUTHOR, {"@carol"}))
        w.failing_check(n)
    for n in (12, 13):  # reviews requested from a person and a team
        w.pr(n, 8, expect=(ReminderKind.REVIEWERS, {"@rev2", "@org/core"}))
        w.server.request_reviewers(ORG, NAME, n, ["rev2"], ["core"])
    for n in (14, 15):  # no review; CODEOWNERS owns ops/
        w.pr(n, 10, files=("ops/add.py",), expect=(ReminderKind.REVIEWERS, {"@ops-owner"}))
    for n in (16, 17):  # no review, no code owner: the maintainers
        w.pr(n, 30, expect=(ReminderKind.REVIEWERS, maint))
    w.pr(18, 20, user="dave", files=("ops/add.py",),
         expect=(ReminderKind.REVIEWERS, {"@ops-owner"}))
    w.review(18, "rev1", "CHANGES_REQUESTED", t0 - timedelta(days=19))
    w.push(18, t0 - timedelta(days=9))  # the author answered with a push: reviewers again
    for n in (19, 20):
        w.pr(n, 30, labels=("on-hold",))
    w.pr(21, 30, user="renovate-fan")
    w.pr(22, 30, files=("docs/guide.md",))  # only exempt paths
    w.pr(23, 30, files=("docs/guide.md", "ops/add.py"),
         expect=(ReminderKind.REVIEWERS, {"@ops-owner"}))
    w.pr(24, 30)
    w.setting(24, snoozed_until=t0 + timedelta(days=3))
    w.pr(25, 30, expect=(ReminderKind.REVIEWERS, maint))
    w.setting(25, snoozed_until=t0 - timedelta(days=1))  # the snooze is over
    w.pr(26, 30)
    w.setting(26, disabled=True)
    w.pr(27, 20, expect=(ReminderKind.REVIEWERS, maint))  # only bots since: still stale
    w.server.user("ci-bot[bot]", "Bot")
    w.comment(27, "ci-bot[bot]", t0 - timedelta(days=9), "Coverage: 91%")
    w.push(27, t0 - timedelta(days=8), by_bot=True)
    w.pr(28, 30, state="closed")
    w.pr(29, 30)  # a person commented recently
    w.comment(29, "erin", t0 - timedelta(days=3))
    w.pr(30, 30, expect=(ReminderKind.REVIEWERS, maint))  # a person's push 8 days ago: stale
    w.push(30, t0 - timedelta(days=8))
    for n in range(31, 37):  # more of the plain kind, to fill the listing
        w.pr(n, 7.5 + n / 10, expect=(ReminderKind.REVIEWERS, maint))


def catalogued_world(github_server: GitHubServer, tmp_path: Path) -> World:
    """The ``world`` fixture of the test modules that use it."""
    engine = make_engine(f"sqlite:///{tmp_path / 'alignbot.db'}")
    w = new_world(github_server, engine)
    catalogue(w)
    return w


def check_week(w: World, expected: dict[int, tuple[ReminderKind, set[str]]], count: int) -> None:
    period = Schedule.of(Reminders(weekday=WEEKDAYS[w.t0.weekday()], hour=w.t0.hour)
                         ).period(w.now[0])
    for number, (kind, mentions) in expected.items():
        mine = [c for c in w.reminders(number)
                if f"period={period} kind={kind.value} n={count}" in c.body]
        assert len(mine) == 1, (number, [c.body for c in w.reminders(number)])
        body = mine[0].body
        assert set(re.findall(r"@[\w/-]+", body.split("\n\n")[0])) == mentions, (number, body)
        assert "/remind snooze 2w" in body and "/remind off" in body


