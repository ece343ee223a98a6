"""bot/reminders.py and bot/scheduler.py: weekly reminders on stale pull requests and the
upstream digest, swept over the GitHub test server with a fake clock (nothing sleeps)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select

from bot.commands import CommandJob
from bot.config import Reminders
from bot.github import ApiOptions, GitHubApp
from bot.queue import JobRecord, JobState, SqlJobQueue
from bot.reminders import (
    WEEKDAYS,
    ApiLimits,
    Kind,
    PullFacts,
    Schedule,
    Skip,
    SweepHooks,
    SweepOptions,
    find_markers,
    owners_of,
    parse_codeowners,
    waiting_on,
)
from bot.scheduler import Lease, Scheduler
from bot.storage import (
    PR_SETTINGS,
    SENT,
    SWEEPS,
    UPSTREAM,
    Installation,
    make_engine,
    migrate,
    transaction,
)
from bot.testing.github import CheckRun, GitHubServer, Issue, Reply, Route

ORG, NAME, TRACKER, INSTALLATION = "org", "ops", "tracker", 4242
REPO = f"{ORG}/{NAME}"
BASE = "b" * 40
COMMENTS = r"^/repos/org/ops/issues/\d+/comments$"
CODEOWNERS = "# owners\nops/** @ops-owner\n/kernels/ @org/kernel-team\n"


def _sha(*parts: object) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


def _config(now: datetime, **reminders: Any) -> str:
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
    expected: dict[int, tuple[Kind, set[str]]] = field(default_factory=dict)

    @property
    def clock(self) -> Callable[[], datetime]:
        return lambda: self.now[0]

    def app(self) -> GitHubApp:
        return GitHubApp(self.server.app_id, self.server.private_key_pem, ApiOptions(
            base_url=self.server.url, seconds_between_writes=0, retries=0, max_wait=1))

    def scheduler(self, engine: Engine | None = None, **options: Any) -> Scheduler:
        hooks = options.pop("hooks", None)
        owner = options.pop("owner", None)
        limits = ApiLimits(**options.pop("limits", {}))
        return Scheduler(engine or self.engine, self.app(), options=SweepOptions(
            limits=limits, write_interval=0, **options), clock=self.clock, hooks=hooks,
            owner=owner, first_delay=0, sleep=lambda seconds: None)

    def at(self, moment: datetime) -> World:
        self.now[:] = [moment]
        return self

    # -- seeding ------------------------------------------------------------------------

    def pr(self, number: int, days: float, *, user: str = "alice", files: tuple[str, ...] = (
            "README.md",), labels: tuple[str, ...] = (), draft: bool = False,
            state: str = "open", expect: tuple[Kind, set[str]] | None = None) -> Issue:
        created = self.t0 - timedelta(days=days)
        head = _sha(number, "head")
        issue = self.server.add_pull(ORG, NAME, number, head, BASE, f"Change {number}", user,
                                     files=[{"filename": f} for f in files], labels=labels,
                                     draft=draft, state=state, created_at=created,
                                     updated_at=created)
        self.server.repo(ORG, NAME).commits[head].date = created
        if expect is not None:
            self.expected[number] = expect
        return issue

    def push(self, number: int, moment: datetime, *, by_bot: bool = False) -> None:
        sha = _sha(number, "push", moment.isoformat())
        self.server.push(ORG, NAME, number, sha, updated_at=moment)
        commit = self.server.repo(ORG, NAME).commits[sha]
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


def _install(engine: Engine) -> None:
    migrate(engine)
    with transaction(engine) as conn:
        conn.execute(insert(Installation.__table__).values(
            id=INSTALLATION, account_login=ORG, repositories=[REPO, f"{ORG}/{TRACKER}"]))


def _world(server: GitHubServer, engine: Engine, **reminders: Any) -> World:
    t0 = datetime.now(UTC).replace(microsecond=0)
    files = {".github/alignbot.yml": _config(t0, **reminders), ".github/CODEOWNERS": CODEOWNERS,
             "README.md": "ops\n", "ops/add.py": "add\n", "docs/guide.md": "guide\n"}
    server.add_installation(INSTALLATION, ORG)
    server.add_repo(ORG, NAME, INSTALLATION, files_by_ref={BASE: files})
    server.add_repo(ORG, TRACKER, INSTALLATION, files_by_ref={_sha("t"): {"README.md": "t\n"}})
    _install(engine)
    world = World(server, engine, t0)
    world.at(t0)
    return world


def _catalogue(w: World) -> None:
    """Dozens of pull requests; ``expect`` is the first week's reminder, if any."""
    t0, maint = w.t0, {"@maint1", "@maint2"}
    for n in (1, 2, 3):  # fresh
        w.pr(n, 2)
    for n in (4, 5):  # drafts
        w.pr(n, 20, draft=True)
    for n in (6, 7):  # approved on the head: a note to the maintainers
        w.pr(n, 12, expect=(Kind.MERGE, maint))
        w.review(n, "rev1", "APPROVED", t0 - timedelta(days=10))
    for n in (8, 9):  # changes requested on the head
        w.pr(n, 15, user="bob", expect=(Kind.AUTHOR, {"@bob"}))
        w.review(n, "rev1", "CHANGES_REQUESTED", t0 - timedelta(days=9))
    for n in (10, 11):  # failing checks
        w.pr(n, 9, user="carol", expect=(Kind.AUTHOR, {"@carol"}))
        w.failing_check(n)
    for n in (12, 13):  # reviews requested from a person and a team
        w.pr(n, 8, expect=(Kind.REVIEWERS, {"@rev2", "@org/core"}))
        w.server.request_reviewers(ORG, NAME, n, ["rev2"], ["core"])
    for n in (14, 15):  # no review; CODEOWNERS owns ops/
        w.pr(n, 10, files=("ops/add.py",), expect=(Kind.REVIEWERS, {"@ops-owner"}))
    for n in (16, 17):  # no review, no code owner: the maintainers
        w.pr(n, 30, expect=(Kind.REVIEWERS, maint))
    w.pr(18, 20, user="dave", files=("ops/add.py",), expect=(Kind.REVIEWERS, {"@ops-owner"}))
    w.review(18, "rev1", "CHANGES_REQUESTED", t0 - timedelta(days=19))
    w.push(18, t0 - timedelta(days=9))  # the author answered with a push: reviewers again
    for n in (19, 20):
        w.pr(n, 30, labels=("on-hold",))
    w.pr(21, 30, user="renovate-fan")
    w.pr(22, 30, files=("docs/guide.md",))  # only exempt paths
    w.pr(23, 30, files=("docs/guide.md", "ops/add.py"), expect=(Kind.REVIEWERS, {"@ops-owner"}))
    w.pr(24, 30)
    w.setting(24, snoozed_until=t0 + timedelta(days=3))
    w.pr(25, 30, expect=(Kind.REVIEWERS, maint))
    w.setting(25, snoozed_until=t0 - timedelta(days=1))  # the snooze is over
    w.pr(26, 30)
    w.setting(26, disabled=True)
    w.pr(27, 20, expect=(Kind.REVIEWERS, maint))  # only bots since: still stale
    w.server.user("ci-bot[bot]", "Bot")
    w.comment(27, "ci-bot[bot]", t0 - timedelta(days=9), "Coverage: 91%")
    w.push(27, t0 - timedelta(days=8), by_bot=True)
    w.pr(28, 30, state="closed")
    w.pr(29, 30)  # a person commented recently
    w.comment(29, "erin", t0 - timedelta(days=3))
    w.pr(30, 30, expect=(Kind.REVIEWERS, maint))  # a person's push 8 days ago: stale
    w.push(30, t0 - timedelta(days=8))
    for n in range(31, 37):  # more of the plain kind, to fill the listing
        w.pr(n, 7.5 + n / 10, expect=(Kind.REVIEWERS, maint))


@pytest.fixture()
def world(github_server: GitHubServer, tmp_path: Path) -> World:
    engine = make_engine(f"sqlite:///{tmp_path / 'alignbot.db'}")
    w = _world(github_server, engine)
    _catalogue(w)
    return w


def _check_week(w: World, expected: dict[int, tuple[Kind, set[str]]], count: int) -> None:
    period = Schedule.of(Reminders(weekday=WEEKDAYS[w.t0.weekday()], hour=w.t0.hour)
                         ).period(w.now[0])
    for number, (kind, mentions) in expected.items():
        mine = [c for c in w.reminders(number)
                if f"period={period} kind={kind.value} n={count}" in c.body]
        assert len(mine) == 1, (number, [c.body for c in w.reminders(number)])
        body = mine[0].body
        assert set(re.findall(r"@[\w/-]+", body.split("\n\n")[0])) == mentions, (number, body)
        assert "/remind snooze 2w" in body and "/remind off" in body


# --------------------------------------------------------------------------- the week


def test_a_simulated_week_reminds_exactly_the_stale_pull_requests_once(world: World) -> None:
    w, server = world, world.server
    report = w.scheduler().run_pass()
    assert sorted(n for _, n, _ in report.posted) == sorted(w.expected) == w.posted_numbers()
    _check_week(w, w.expected, 1)
    assert {row["number"]: row["kind"] for row in w.rows()} == {
        n: k.value for n, (k, _) in w.expected.items()}
    assert report.skipped[Skip.EXEMPT_LABEL] == 2 and report.skipped[Skip.SNOOZED] == 1
    assert report.skipped[Skip.EXEMPT_PATHS] == 1 and report.skipped[Skip.OFF] == 1
    assert report.skipped[Skip.EXEMPT_AUTHOR] == 1
    assert "for 2 weeks" in w.reminders(27)[0].body  # the bots' activity did not count
    # listing: one search page; details only for candidates; one write per reminder
    assert report.calls["search"] == 1 and report.calls["write"] == len(w.expected)
    assert server.count("POST", r"/labels$") == 0  # labels are off by default
    assert all(i.state == "open" for i in server.issues.values() if i.number != 28)
    assert server.count("PATCH") == 0 and server.errors == []

    # the same week again: nothing is due, nothing is read, nothing is posted
    before = len(server.requests)
    later = w.at(w.t0 + timedelta(hours=5)).scheduler().run_pass()
    assert later.posted == [] and len(server.requests) == before
    forced = w.scheduler().run_pass(force=True)  # even when forced to list again
    assert forced.posted == [] and w.posted_numbers() == sorted(w.expected)

    # a week of activity, then the next sweep
    t0, day = w.t0, timedelta(days=1)
    w.comment(12, "rev2", t0 + 2 * day, "Looking now")  # reviewer answered
    w.push(8, t0 + 3 * day)  # author pushed
    w.setting(16, snoozed_until=t0 + 15 * day)  # someone snoozed it
    w.pr(40, -1)  # opened at t0 + 1 day: not stale yet next week
    w.pr(41, 1)  # opened a day before t0: stale (8 days) next week
    second = {n: e for n, e in w.expected.items() if n not in (8, 12, 16)}
    # fresh last week (or snoozed until mid-week), stale now: their first reminder
    first = {n: (Kind.REVIEWERS, {"@maint1", "@maint2"}) for n in (1, 2, 3, 24, 29, 41)}
    week2 = w.at(t0 + 7 * day).scheduler().run_pass()
    assert sorted(n for _, n, _ in week2.posted) == sorted([*second, *first])
    _check_week(w, second, 2)
    _check_week(w, first, 1)
    assert week2.calls["search"] == 1
    assert all(len(w.reminders(n)) == 1 for n in (8, 12, 16))


def test_escalation_after_the_configured_reminders_and_never_a_close(
        github_server: GitHubServer, tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'esc.db'}")
    w = _world(github_server, engine, max_reminders=2, escalate_to="org/leads")
    w.pr(1, 10, files=("ops/add.py",))
    w.pr(2, 10, user="bob")
    w.review(2, "rev1", "CHANGES_REQUESTED", w.t0 - timedelta(days=9))
    kinds: list[list[str]] = []
    for week in range(5):
        w.at(w.t0 + timedelta(days=7 * week)).scheduler().run_pass()
        kinds.append([m.kind.value for m in find_markers(
            [{"user": {"login": c.user.login}, "body": c.body, "id": c.id,
              "created_at": c.created_at.isoformat()} for c in w.reminders(1)], "alignbot[bot]")])
    assert kinds[-1] == [Kind.REVIEWERS, Kind.REVIEWERS, Kind.ESCALATION]
    assert [len(k) for k in kinds] == [1, 2, 3, 3, 3]
    escalation = w.reminders(1)[-1].body
    assert "@org/leads" in escalation and "waiting for a review" in escalation
    assert "@ops-owner" not in escalation.split("\n\n")[0]
    assert [c.body.count("n=3") for c in w.reminders(2)][-1] == 1  # the author's too
    # a person's comment starts a new run of reminders
    w.comment(1, "alice", w.t0 + timedelta(days=29))
    w.at(w.t0 + timedelta(days=42)).scheduler().run_pass()
    assert "n=1 -->" in w.reminders(1)[-1].body and len(w.reminders(1)) == 4
    assert all(i.state == "open" for i in github_server.issues.values())
    assert github_server.count("PATCH") == 0 and github_server.count("POST", "/labels") == 0


def _label_route(server: GitHubServer) -> None:
    """POST …/issues/{n}/labels, which the test server lacks, for the labels test."""
    def add_labels(call: Any) -> Reply:
        issue = server._api.issue(call)
        issue.labels += [n for n in call.json.get("labels", []) if n not in issue.labels]
        return Reply(200, [server._api.v.label(issue.repo, n) for n in issue.labels])

    server._api.routes.append(Route("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels",
                                    add_labels, permission="issues|pull_requests:write"))


def test_labels_only_when_configured(github_server: GitHubServer, tmp_path: Path) -> None:
    _label_route(github_server)
    w = _world(github_server, make_engine(f"sqlite:///{tmp_path / 'l.db'}"), labels=True)
    w.pr(1, 10)
    w.pr(2, 2)
    w.scheduler().run_pass()
    assert github_server.pull(ORG, NAME, 1).labels == ["stale"]
    assert github_server.pull(ORG, NAME, 2).labels == []


# --------------------------------------------------------------------------- crashes and replicas


class Crash(Exception):
    """The process died here."""


def test_a_crash_between_post_and_record_neither_loses_nor_repeats(world: World) -> None:
    w, posts = world, []

    def die_on_third(repo: str, number: int, comment_id: int) -> None:
        posts.append(number)
        if len(posts) == 3:
            raise Crash

    with pytest.raises(Crash):
        w.scheduler(hooks=SweepHooks(after_post=die_on_third), owner="dead").run_pass()
    assert len(w.rows()) == 2 and len(w.reminders()) == 3
    Lease(w.engine, "dead", clock=w.clock).acquire()  # the dead process still holds the lease
    assert w.scheduler().run_pass().busy
    report = w.at(w.t0 + timedelta(minutes=11)).scheduler().run_pass()
    assert report.recovered == [(REPO, posts[-1])]
    assert w.posted_numbers() == sorted(w.expected)
    assert sorted(r["number"] for r in w.rows()) == sorted(w.expected)
    _check_week(w, w.expected, 1)


def test_a_failed_post_is_retried_by_the_next_pass(world: World) -> None:
    w = world
    w.server.fail_next(COMMENTS, count=1, status=500, method="POST")
    first = w.scheduler().run_pass()
    assert len(first.stopped) == 1 and "500" in first.stopped[0][1]
    assert first.posted == [] and w.rows() == []
    with transaction(w.engine) as conn:
        cursor = conn.execute(select(SWEEPS.c.cursor)).scalar()
    assert cursor["posting"] is not None  # journalled; reconciled by the next pass
    assert w.scheduler().run_pass().posted == []  # not before error_retry
    w.at(w.t0 + timedelta(hours=1, seconds=1)).scheduler().run_pass()
    assert w.posted_numbers() == sorted(w.expected)
    assert len(w.rows()) == len(w.expected)


def test_two_schedulers_at_once_post_each_reminder_once(github_server: GitHubServer,
                                                        database_url: str) -> None:
    engines = [make_engine(database_url), make_engine(database_url)]
    w = _world(github_server, engines[0])
    _catalogue(w)
    start = threading.Barrier(2)
    reports: list[Any] = []

    def replica(engine: Engine, name: str) -> None:
        scheduler = w.scheduler(engine, owner=name, hooks=SweepHooks(
            after_post=lambda *_: threading.Event().wait(0.002)))
        start.wait()
        for _ in range(3):
            reports.append(scheduler.run_pass())

    threads = [threading.Thread(target=replica, args=(e, f"replica-{i}"))
               for i, e in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sum(r.busy for r in reports) >= 1
    assert sum(len(r.posted) for r in reports) == len(w.expected)
    assert w.posted_numbers() == sorted(w.expected)
    for engine in engines:
        engine.dispose()


def test_a_spent_budget_stops_the_sweep_and_the_next_hour_resumes_it(world: World) -> None:
    w, server = world, world.server
    passes, calls = 0, []
    while True:
        before = server.count(pattern=r"^/(repos|search)/")
        report = w.at(w.t0 + timedelta(hours=passes)).scheduler(
            limits={"calls_per_hour": 40}).run_pass()
        calls.append(server.count(pattern=r"^/(repos|search)/") - before)
        passes += 1
        if report.repos_done or passes > 20:
            break
        assert "budget" in report.stopped[0][1]
    assert passes > 3 and max(calls) <= 40
    assert w.posted_numbers() == sorted(w.expected)
    assert sorted(r["number"] for r in w.rows()) == sorted(w.expected)
    _check_week(w, w.expected, 1)


def test_the_lease_is_exclusive_until_it_expires(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lease.db'}")
    migrate(engine)
    now = [datetime(2025, 6, 2, 9, tzinfo=UTC)]
    a, b = (Lease(engine, name, ttl=timedelta(minutes=10), clock=lambda: now[0])
            for name in ("a", "b"))
    assert a.acquire() and not b.acquire() and a.holder() == "a"
    now[0] += timedelta(minutes=11)
    assert b.acquire() and not a.renew()
    b.release()
    assert a.acquire()


# --------------------------------------------------------------------------- upstream watch


def _upstream_item(engine: Engine, url: str, repo: str, number: int, kind: str,
                   created: datetime) -> None:
    with transaction(engine) as conn:
        conn.execute(insert(UPSTREAM).values(
            url=url, repo=repo, number=number, kind=kind, registered_by="alice",
            pr_repo=REPO, pr_number=7, created_at=created))


def test_upstream_items_are_checked_weekly_and_listed_in_one_digest(
        github_server: GitHubServer, tmp_path: Path) -> None:
    server = github_server
    w = _world(server, make_engine(f"sqlite:///{tmp_path / 'up.db'}"), enabled=False)
    t0, day = w.t0, timedelta(days=1)
    upstream = server.add_repo("pytorch", "pytorch")
    owner = server.user("someone")
    for number, updated, state in ((100, t0 - 20 * day, "open"), (101, t0 - 2 * day, "open")):
        server.issues[(upstream.id, number)] = Issue(
            upstream, number, server.next_id(), f"Bug {number}", "", owner, t0 - 30 * day,
            updated, state)
    server.add_pull("pytorch", "pytorch", 102, _sha("u"), _sha("ub"), created_at=t0 - 9 * day)
    server.update_pull("pytorch", "pytorch", 102, merged=True, updated_at=t0 - day)
    gh = "https://github.com"
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/issues/100", "pytorch/pytorch", 100,
                   "issue", t0 - 25 * day)
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/issues/101", "pytorch/pytorch", 101,
                   "issue", t0 - 10 * day)
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/pull/102", "pytorch/pytorch", 102,
                   "pr", t0 - 9 * day)
    _upstream_item(w.engine, f"{gh}/gone/away/issues/5", "gone/away", 5, "issue", t0 - 5 * day)

    report = w.scheduler().run_pass()
    assert report.upstream_checked == 4 and report.posted == []
    (issue,) = server.created_issues(ORG, TRACKER)
    assert issue.title == "alignbot: upstream watch"
    (comment,) = server.comments_on(ORG, TRACKER, issue.number)
    body = comment.body
    waiting = body.split("Resolved upstream")[0]
    assert "pytorch/issues/100" in waiting and "worth a ping" in waiting.split("issues/101")[0]
    assert "4 weeks" not in waiting and "3 weeks" in waiting  # waited since registration
    assert "gone/away/issues/5" in waiting and "could not be read (HTTP 404)" in waiting
    assert "pull/102`: merged" in body.split("Resolved upstream")[1]
    with transaction(w.engine) as conn:
        states = dict(conn.execute(select(UPSTREAM.c.number, UPSTREAM.c.state)).all())
    assert states == {100: "open", 101: "open", 102: "merged", 5: "open"}

    # registered mid-week: the same week's digest is edited in place
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/issues/101#x", "pytorch/pytorch", 101,
                   "issue", t0 + day)
    w.at(t0 + 2 * day).scheduler().run_pass(force=True)
    (edited,) = server.comments_on(ORG, TRACKER, issue.number)
    assert edited.id == comment.id and "issues/101#x" in edited.body
    # the next week: a new comment in the same issue; resolved items are not listed again
    w.at(t0 + 7 * day).scheduler().run_pass()
    assert len(server.created_issues(ORG, TRACKER)) == 1
    first, second = server.comments_on(ORG, TRACKER, issue.number)
    assert second.id != first.id and "pull/102" not in second.body
    assert server.count("GET", r"^/repos/pytorch/pytorch/issues/\d+$") == 3 + 1 + 3


def test_an_item_registered_with_track_is_in_the_digest(github_server: GitHubServer,
                                                        tmp_path: Path) -> None:
    server = github_server
    w = _world(server, make_engine(f"sqlite:///{tmp_path / 'track.db'}"), enabled=False)
    upstream = server.add_repo("pytorch", "pytorch")
    server.issues[(upstream.id, 300)] = Issue(
        upstream, 300, server.next_id(), "Bug 300", "", server.user("someone"),
        w.t0 - timedelta(days=30), w.t0 - timedelta(days=20), "open")
    w.pr(7, 3)
    server.set_permission(ORG, NAME, "maint1", "write")
    url = "https://github.com/pytorch/pytorch/issues/300"
    comment = server.add_comment(ORG, NAME, 7, f"/track {url}", "maint1")
    now = w.t0
    job = CommandJob(w.app(), SqlJobQueue(w.engine), w.engine)
    result = job(JobRecord(0, "command", f"{REPO}#7/comment/{comment.id}", {
        "installation_id": INSTALLATION, "repo": REPO, "number": 7, "source": "comment",
        "source_id": comment.id, "actor": "maint1", "created_at": None,
        "commands": [f"/track {url}"]}, JobState.RUNNING, 1, None, None, now, now, now, "test"))
    assert result is not None and result["commands"][0]["accepted"]

    report = w.scheduler().run_pass()
    assert report.upstream_checked == 1
    (issue,) = server.created_issues(ORG, TRACKER)
    (digest,) = server.comments_on(ORG, TRACKER, issue.number)
    waiting = digest.body.split("Resolved upstream")[0]
    assert "pytorch/pytorch/issues/300" in waiting and "worth a ping" in waiting


# --------------------------------------------------------------------------- pure parts


def test_schedule_slots_follow_the_configured_weekday_hour_and_zone() -> None:
    paris = Schedule("monday", 9, "Europe/Paris")
    monday = datetime(2025, 6, 2, 7, 30, tzinfo=UTC)  # 09:30 in Paris
    assert paris.latest(monday) == datetime(2025, 6, 2, 7, tzinfo=UTC)
    assert paris.latest(monday - timedelta(hours=1)) == datetime(2025, 5, 26, 7, tzinfo=UTC)
    assert paris.period(monday) == "2025-06-02"
    assert paris.following(paris.latest(monday)) == datetime(2025, 6, 9, 7, tzinfo=UTC)
    winter = paris.latest(datetime(2025, 11, 3, 8, 30, tzinfo=UTC))  # after the clock change
    assert winter == datetime(2025, 11, 3, 8, tzinfo=UTC)


def test_codeowners_rules_last_match_wins() -> None:
    rules = parse_codeowners("* @everyone\n*.py @py\n/docs/ @docs dev@example.com\n"
                             "ops/* @ops\napps/ @apps\n")
    assert owners_of(rules, ["x/y.txt"]) == ["everyone"]
    assert owners_of(rules, ["a/b.py"]) == ["py"]
    assert owners_of(rules, ["docs/a/b.md"]) == ["docs"]
    assert owners_of(rules, ["ops/a.txt"]) == ["ops"]
    assert owners_of(rules, ["ops/deep/a.txt"]) == ["everyone"]
    assert owners_of(rules, ["src/apps/a.txt"]) == ["apps"]


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
    assert waiting_on(_facts(), lambda: ["ci"], owners, []).kind == Kind.AUTHOR
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
    assert waiting_on(bot, none, none, []).kind == Kind.REVIEWERS


def test_github_s_hourly_write_limit_stops_and_resumes(world: World) -> None:
    w = world
    first = w.scheduler(limits={"writes_per_hour": 4}).run_pass()
    assert len(first.posted) == 4 and "content-creating" in first.stopped[0][1]
    w.at(w.t0 + timedelta(hours=1)).scheduler(limits={"writes_per_hour": 100}).run_pass()
    assert w.posted_numbers() == sorted(w.expected)


def test_listing_pages_through_pull_requests_that_share_a_second(
        github_server: GitHubServer, tmp_path: Path) -> None:
    w = _world(github_server, make_engine(f"sqlite:///{tmp_path / 'p.db'}"))
    # 120 updated in the same second (105 of them exempt, so never bumped out of the
    # results by a reminder), then 30 older ones: the cursor has to page within one second
    for n in range(1, 151):
        w.pr(n, 10 if n <= 120 else 10 + n / 100, labels=("on-hold",) if n <= 105 else ())
    report = w.scheduler().run_pass()
    assert w.posted_numbers() == list(range(106, 151))
    assert report.calls["search"] == 3 and report.skipped == {Skip.EXEMPT_LABEL: 105}


def test_the_scheduler_thread_sweeps_and_stops(world: World) -> None:
    scheduler = world.scheduler()
    scheduler.interval = 0.05
    scheduler.start()
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while world.posted_numbers() != sorted(world.expected) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
    finally:
        assert scheduler.stop(timeout=10)
    assert world.posted_numbers() == sorted(world.expected)


def test_remind_sweep_command_runs_one_pass(github_server: GitHubServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    w = _world(github_server, make_engine(url))
    w.pr(1, 10)
    for key, value in {"APP_ID": str(github_server.app_id),
                       "PRIVATE_KEY": github_server.private_key_pem, "WEBHOOK_SECRETS": "s",
                       "GITHUB_API_URL": github_server.url, "DATABASE_URL": url,
                       "GITHUB_WRITE_INTERVAL": "0"}.items():
        monkeypatch.setenv(f"ALIGNBOT_{key}", value)
    assert main(["remind-sweep"]) == 0
    assert "reminders posted: 1" in capsys.readouterr().out
    assert w.posted_numbers() == [1]
    assert main(["remind-sweep", "--force"]) == 0 and w.posted_numbers() == [1]


def test_the_benchmark_runs_on_a_tiny_organisation(tmp_path: Path) -> None:
    import importlib.util
    import json
    import sys

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "reminders_sweep.py"
    spec = importlib.util.spec_from_file_location("reminders_sweep", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "figures.json"
    assert module.main(["--repos", "2", "--prs", "40", "--json", str(out)]) == 0
    (week,) = json.loads(out.read_text())["weeks"]
    assert week["reminders"] == 20 and week["writes"] == 20
    assert week["search"] == 2  # one page per repository
