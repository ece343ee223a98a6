"""bot/reminders/upstream.py: watched upstream items checked weekly, and the one digest comment
per tracking repository and week."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path

from reminders_world import (
    INSTALLATION,
    NAME,
    ORG,
    REPO,
    RETRY_AFTER,
    TRACKER,
    new_world,
    sha,
)
from sqlalchemy import Engine, insert, select

from alignbot.bot.commands import CommandJob
from alignbot.bot.lease import Lease
from alignbot.bot.queue import JobRecord, JobState, SqlJobQueue
from alignbot.bot.reminders.job import digest_lease_name
from alignbot.bot.storage import UPSTREAM, make_engine, transaction
from alignbot.bot.testing.github import GitHubServer, Issue


def _upstream_item(engine: Engine, url: str, repo: str, number: int, kind: str,
                   created: datetime) -> None:
    with transaction(engine) as conn:
        conn.execute(insert(UPSTREAM).values(
            url=url, repo=repo, number=number, kind=kind, registered_by="alice",
            pr_repo=REPO, pr_number=7, created_at=created))


def test_upstream_items_are_checked_weekly_and_listed_in_one_digest(
        github_server: GitHubServer, tmp_path: Path) -> None:
    server = github_server
    w = new_world(server, make_engine(f"sqlite:///{tmp_path / 'up.db'}"), enabled=False)
    t0, day = w.t0, timedelta(days=1)
    upstream = server.add_repo("pytorch", "pytorch")
    owner = server.user("someone")
    for number, updated, state in ((100, t0 - 20 * day, "open"), (101, t0 - 2 * day, "open")):
        server.issues[(upstream.id, number)] = Issue(
            upstream, number, server.next_id(), f"Bug {number}", "", owner, t0 - 30 * day,
            updated, state)
    server.add_pull("pytorch", "pytorch", 102, sha("u"), sha("ub"), created_at=t0 - 9 * day)
    server.update_pull("pytorch", "pytorch", 102, merged=True, updated_at=t0 - day)
    gh = "https://github.com"
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/issues/100", "pytorch/pytorch", 100,
                   "issue", t0 - 25 * day)
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/issues/101", "pytorch/pytorch", 101,
                   "issue", t0 - 10 * day)
    _upstream_item(w.engine, f"{gh}/pytorch/pytorch/pull/102", "pytorch/pytorch", 102,
                   "pr", t0 - 9 * day)
    _upstream_item(w.engine, f"{gh}/gone/away/issues/5", "gone/away", 5, "issue", t0 - 5 * day)

    report = w.sweep()
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
    w.at(t0 + 2 * day).sweep(force=True)
    (edited,) = server.comments_on(ORG, TRACKER, issue.number)
    assert edited.id == comment.id and "issues/101#x" in edited.body
    # the next week: a new comment in the same issue; resolved items are not listed again
    w.at(t0 + 7 * day).sweep()
    assert len(server.created_issues(ORG, TRACKER)) == 1
    first, second = server.comments_on(ORG, TRACKER, issue.number)
    assert second.id != first.id and "pull/102" not in second.body
    assert server.count("GET", r"^/repos/pytorch/pytorch/issues/\d+$") == 3 + 1 + 3


def test_an_item_registered_with_track_is_in_the_digest(github_server: GitHubServer,
                                                        tmp_path: Path) -> None:
    server = github_server
    w = new_world(server, make_engine(f"sqlite:///{tmp_path / 'track.db'}"), enabled=False)
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

    report = w.sweep()
    assert report.upstream_checked == 1
    (issue,) = server.created_issues(ORG, TRACKER)
    (digest,) = server.comments_on(ORG, TRACKER, issue.number)
    waiting = digest.body.split("Resolved upstream")[0]
    assert "pytorch/pytorch/issues/300" in waiting and "worth a ping" in waiting


def test_a_digest_being_written_by_another_sweep_is_waited_for(github_server: GitHubServer,
                                                               tmp_path: Path) -> None:
    """Sweeps of several repositories feed one digest and run as parallel jobs: the digest is
    written under the tracking repository's lease. A sweep that finds it held is retried by
    the worker and then writes the digest (its items were already checked)."""
    server = github_server
    w = new_world(server, make_engine(f"sqlite:///{tmp_path / 'busy.db'}"), enabled=False)
    server.add_repo("gone", "away")
    _upstream_item(w.engine, "https://github.com/gone/away/issues/5", "gone/away", 5, "issue",
                   w.t0 - timedelta(days=5))
    other = Lease(w.engine, "another-job", name=digest_lease_name(f"{ORG}/{TRACKER}"))
    assert other.acquire()
    first = w.sweep()
    ((repo, why),) = first.pending
    assert repo == REPO and "DigestBusy" in why and first.digests == []
    with transaction(w.engine) as conn:
        assert conn.execute(select(UPSTREAM.c.note)).scalar() == "could not be read (HTTP 404)"
    assert server.created_issues(ORG, TRACKER) == []
    other.release()
    time.sleep(RETRY_AFTER + 0.1)
    second = w.sweep()
    assert second.upstream_checked == 0 and len(second.digests) == 1
    (issue,) = server.created_issues(ORG, TRACKER)
    (digest,) = server.comments_on(ORG, TRACKER, issue.number)
    assert "gone/away/issues/5" in digest.body
