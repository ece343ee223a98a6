"""bot/reminders/sweep.py: one repository's sweep, over the GitHub test server with a fake clock
(each pass's jobs run through a real worker and queue: ``reminders_world.py``)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from reminders_world import (
    COMMENTS,
    NAME,
    ORG,
    REPO,
    RETRY_AFTER,
    World,
    catalogued_world,
    check_week,
    new_world,
)
from sqlalchemy import select

from alignbot.bot.queue import SqlJobQueue
from alignbot.bot.reminders import Skip, SweepHooks, find_markers
from alignbot.bot.storage import SWEEPS, ReminderKind, make_engine, transaction
from alignbot.bot.testing.github import GitHubServer, Reply, Route

world = pytest.fixture(catalogued_world, name="world")


# --------------------------------------------------------------------------- the week


@pytest.mark.slow
def test_a_simulated_week_reminds_exactly_the_stale_pull_requests_once(world: World) -> None:
    w, server = world, world.server
    report = w.sweep()
    assert sorted(n for _, n, _ in report.posted) == sorted(w.expected) == w.posted_numbers()
    check_week(w, w.expected, 1)
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
    later = w.at(w.t0 + timedelta(hours=5)).sweep()
    assert later.posted == [] and len(server.requests) == before
    forced = w.sweep(force=True)  # even when forced to list again
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
    first = {n: (ReminderKind.REVIEWERS, {"@maint1", "@maint2"}) for n in (1, 2, 3, 24, 29, 41)}
    week2 = w.at(t0 + 7 * day).sweep()
    assert sorted(n for _, n, _ in week2.posted) == sorted([*second, *first])
    check_week(w, second, 2)
    check_week(w, first, 1)
    assert week2.calls["search"] == 1
    assert all(len(w.reminders(n)) == 1 for n in (8, 12, 16))


@pytest.mark.slow
def test_escalation_after_the_configured_reminders_and_never_a_close(
        github_server: GitHubServer, tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'esc.db'}")
    w = new_world(github_server, engine, max_reminders=2, escalate_to="org/leads")
    w.pr(1, 10, files=("ops/add.py",))
    w.pr(2, 10, user="bob")
    w.review(2, "rev1", "CHANGES_REQUESTED", w.t0 - timedelta(days=9))
    kinds: list[list[str]] = []
    for week in range(5):
        w.at(w.t0 + timedelta(days=7 * week)).sweep()
        kinds.append([m.kind.value for m in find_markers(
            [{"user": {"login": c.user.login}, "body": c.body, "id": c.id,
              "created_at": c.created_at.isoformat()} for c in w.reminders(1)], "alignbot[bot]")])
    assert kinds[-1] == [ReminderKind.REVIEWERS, ReminderKind.REVIEWERS, ReminderKind.ESCALATION]
    assert [len(k) for k in kinds] == [1, 2, 3, 3, 3]
    escalation = w.reminders(1)[-1].body
    assert "@org/leads" in escalation and "waiting for a review" in escalation
    assert "@ops-owner" not in escalation.split("\n\n")[0]
    assert [c.body.count("n=3") for c in w.reminders(2)][-1] == 1  # the author's too
    # a person's comment starts a new run of reminders
    w.comment(1, "alice", w.t0 + timedelta(days=29))
    w.at(w.t0 + timedelta(days=42)).sweep()
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
    w = new_world(github_server, make_engine(f"sqlite:///{tmp_path / 'l.db'}"), labels=True)
    w.pr(1, 10)
    w.pr(2, 2)
    w.sweep()
    assert github_server.pull(ORG, NAME, 1).labels == ["stale"]
    assert github_server.pull(ORG, NAME, 2).labels == []


class Crash(BaseException):
    """The process died here (no ``except Exception`` catches it: the job stays running)."""


def test_a_crash_between_post_and_record_neither_loses_nor_repeats(world: World) -> None:
    w, posts = world, []

    def die_on_third(repo: str, number: int, comment_id: int) -> None:
        posts.append(number)
        if len(posts) == 3:
            raise Crash

    with pytest.raises(Crash):
        w.sweep(hooks=SweepHooks(after_post=die_on_third))
    assert len(w.rows()) == 2 and len(w.reminders()) == 3
    # the dead process's job still runs as far as the queue knows: no second sweep of the
    # repository starts beside it
    stalled = w.sweep()
    assert stalled.posted == [] and (REPO, "running: None") in stalled.pending
    assert w.sweep().pending == stalled.pending  # not stale yet: it may still be running
    # what the next worker does at its start, or a pass once the job is stale
    report = w.at(w.t0 + timedelta(minutes=11)).sweep(stale_after=timedelta(0))
    assert report.recovered == [(REPO, posts[-1])]
    assert w.posted_numbers() == sorted(w.expected)
    assert sorted(r["number"] for r in w.rows()) == sorted(w.expected)
    check_week(w, w.expected, 1)


@pytest.mark.slow
def test_a_failed_post_is_retried_by_the_worker(world: World) -> None:
    w = world
    w.server.fail_next(COMMENTS, count=1, status=500, method="POST")
    first = w.sweep()
    ((repo, why),) = first.pending
    assert repo == REPO and why.startswith("queued:") and "500" in why
    assert first.posted == [] and w.rows() == [] and first.stopped == []
    with transaction(w.engine) as conn:
        cursor, error = conn.execute(select(SWEEPS.c.cursor, SWEEPS.c.error).where(
            SWEEPS.c.repo == REPO)).one()
    assert cursor["posting"] is not None  # journalled; reconciled by the retry
    assert "500" in error
    again = w.sweep()  # the worker's retry is not due yet, and no second job is queued
    assert again.posted == [] and again.pending == first.pending
    time.sleep(RETRY_AFTER + 0.1)
    w.sweep()
    assert w.posted_numbers() == sorted(w.expected)
    assert len(w.rows()) == len(w.expected)
    (job,) = [j for j in SqlJobQueue(w.engine).list() if j.key == REPO]
    assert job.retries == 1 and job.result is not None and job.result["posted"]


@pytest.mark.slow
def test_a_spent_budget_stops_the_sweep_and_the_next_hour_resumes_it(world: World) -> None:
    w, server = world, world.server
    passes, calls = 0, []
    while True:
        before = server.count(pattern=r"^/(repos|search)/")
        report = w.at(w.t0 + timedelta(hours=passes)).sweep(limits={"calls_per_hour": 40})
        calls.append(server.count(pattern=r"^/(repos|search)/") - before)
        passes += 1
        if report.repos_done or passes > 20:
            break
        assert "budget" in report.stopped[0][1]
    assert passes > 3 and max(calls) <= 40
    assert w.posted_numbers() == sorted(w.expected)
    assert sorted(r["number"] for r in w.rows()) == sorted(w.expected)
    check_week(w, w.expected, 1)


def test_github_s_hourly_write_limit_stops_and_resumes(world: World) -> None:
    w = world
    first = w.sweep(limits={"writes_per_hour": 4})
    assert len(first.posted) == 4 and "content-creating" in first.stopped[0][1]
    w.at(w.t0 + timedelta(hours=1)).sweep(limits={"writes_per_hour": 100})
    assert w.posted_numbers() == sorted(w.expected)


@pytest.mark.slow
def test_listing_pages_through_pull_requests_that_share_a_second(
        github_server: GitHubServer, tmp_path: Path) -> None:
    w = new_world(github_server, make_engine(f"sqlite:///{tmp_path / 'p.db'}"))
    # 120 updated in the same second (105 of them exempt, so never bumped out of the
    # results by a reminder), then 30 older ones: the cursor has to page within one second
    for n in range(1, 151):
        w.pr(n, 10 if n <= 120 else 10 + n / 100, labels=("on-hold",) if n <= 105 else ())
    report = w.sweep()
    assert w.posted_numbers() == list(range(106, 151))
    assert report.calls["search"] == 3 and report.skipped == {Skip.EXEMPT_LABEL: 105}


