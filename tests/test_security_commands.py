"""Attacks through slash-commands, end to end: a real `alignbot serve` and the GitHub test
server. A hijacked sticky comment, a flood of command lines, commands hidden in nested code,
a refused commenter who keeps trying, signed payloads of the wrong shape, and go-aheads
that would follow a moving head (a push between the comment and its job, an edit after a
push, a push in the comment's second, a force-push back, a giver who lost write access)."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from service import NUMBER, OWNER, REPO, SECRET, Service, open_pull

from alignbot.bot.demo import INSTALLATION, _files, wait_for
from alignbot.bot.output import MARKER
from alignbot.bot.testing.github import Issue

ROOT = Path(__file__).resolve().parent.parent

BOT = "alignbot[bot]"
MAINTAINER, OUTSIDER = "mia", "otto"
TIMEOUT = 60


@pytest.fixture()
def service(make_service: Any) -> Service:
    service: Service = make_service()
    return service


def seed(github: Any, config: bool = True) -> str:
    """demo-org/fastops (with or without its .github/alignbot.yml) and a member's pull request
    #1 that changes no op file, so its check needs no sandbox."""
    base = _files(ROOT / "examples" / "fastops")
    if not config:
        base = {path: data for path, data in base.items() if not path.startswith(".github/")}
    head = {**base, "NOTES": b"notes\n"}
    head_sha = open_pull(github, base, head, title="Notes")
    github.set_permission(OWNER, REPO, MAINTAINER, "write")
    github.set_permission(OWNER, REPO, OUTSIDER, "none")
    return head_sha


def comment(github: Any, service: Service, body: str, user: str) -> tuple[int, httpx.Response]:
    """``user`` comments ``body``; the signed webhook goes to the service."""
    made = github.add_comment(OWNER, REPO, NUMBER, body, user)
    payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=made.id)
    return made.id, service.deliver(github, "issue_comment", payload)


def bot_comments(github: Any) -> list[Any]:
    return [c for c in github.comments_on(OWNER, REPO, NUMBER) if c.user.login == BOT]


def align_jobs(service: Service) -> int:
    from alignbot.bot.queue import SqlJobQueue
    from alignbot.bot.storage import make_engine

    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        return len(SqlJobQueue(engine).list(kind="align"))
    finally:
        engine.dispose()


def settled(github: Any, comment_id: int) -> bool:
    """The command job of ``comment_id`` is done: it reacted, or a reply names the comment."""
    return bool(github.comments[comment_id].reactions) or any(
        f"<!-- alignbot:command comment:{comment_id}" in c.body for c in bot_comments(github))


LOOKALIKES = ["<!--  alignbot:sticky-comment -->", "<!-- alignbot:sticky-comment-->",
              "<!-- аlignbot:sticky-comment -->",  # a Cyrillic а
              "<!-- alignbot:sticky\u2011comment -->", "\u200b" + MARKER]


@pytest.mark.slow
@pytest.mark.parametrize("echoed", [MARKER, *LOOKALIKES])
def test_an_echoed_marker_never_makes_a_reply_the_sticky_comment(
        github_server: Any, service: Service, echoed: str) -> None:
    github = github_server
    seed(github)
    body = f"{MARKER}\n/align `{echoed}`\n\n/alignbot {echoed}"
    outsider_comment, response = comment(github, service, body, OUTSIDER)
    assert response.status_code == 202
    wait_for(lambda: settled(github, outsider_comment), TIMEOUT, "the refusal")
    time.sleep(1)
    replies = {c.id: c.body for c in bot_comments(github)}

    payload = github.webhook("pull_request.synchronize", OWNER, REPO, number=NUMBER)
    assert service.deliver(github, "pull_request", payload).status_code == 202
    wait_for(lambda: any(c.body.startswith(MARKER) for c in bot_comments(github)), TIMEOUT,
             "the sticky comment")
    (sticky,) = [c for c in bot_comments(github) if c.body.startswith(MARKER)]
    assert sticky.id not in replies  # a new comment, not a reply edited into one
    assert {c.id: c.body for c in bot_comments(github) if c.id in replies} == replies
    (reply,) = replies.values()
    assert reply.startswith(f"<!-- alignbot:command comment:{outsider_comment} -->")
    assert github.comments[outsider_comment].body == body  # nobody else's comment is touched


@pytest.mark.slow
def test_fifty_align_lines_make_at_most_one_reply_and_one_job(
        github_server: Any, service: Service) -> None:
    github = github_server
    seed(github, config=False)  # an align job ends at once: no configuration at the head
    lines = "\n".join(f"/align op{index}" for index in range(50))
    refused, _ = comment(github, service, lines, OUTSIDER)
    wait_for(lambda: settled(github, refused), TIMEOUT, "the outsider's command job")
    time.sleep(1)
    assert len(bot_comments(github)) <= 1 and align_jobs(service) == 0

    accepted, _ = comment(github, service, lines, MAINTAINER)
    wait_for(lambda: settled(github, accepted) and any(
        c.body.startswith(f"<!-- alignbot:command comment:{accepted} -->")
        for c in bot_comments(github)), TIMEOUT, "the maintainer's command job")
    time.sleep(1)
    replies = [c for c in bot_comments(github)
               if c.body.startswith(f"<!-- alignbot:command comment:{accepted} -->")]
    assert len(replies) == 1 and align_jobs(service) == 1
    assert "40 more command lines in this comment were not acted on" in replies[0].body
    assert [r.content for r in github.comments[accepted].reactions] == ["eyes"]


@pytest.mark.slow
@pytest.mark.parametrize("body", [
    "- ````\n  /help\n  ````\n",
    "1. item\n\n   ```\n   /help\n   ```\n",
    "- > ```\n  > /help\n  > ```\n",
    "> quoted\n/help\n",
    "<div>\n/help\n</div>\n",
    "\\/help\n",
])
def test_commands_nested_in_code_quotes_and_lists_are_not_acted_on(
        github_server: Any, service: Service, body: str) -> None:
    github = github_server
    seed(github)
    made, response = comment(github, service, body, MAINTAINER)
    assert response.status_code == 200 and response.json()["status"] == "ignored"
    time.sleep(1)
    assert bot_comments(github) == [] and github.comments[made].reactions == []


@pytest.mark.slow
def test_a_refused_commenter_gets_a_few_replies_then_reactions(
        github_server: Any, service: Service) -> None:
    github = github_server
    seed(github)
    made = [comment(github, service, f"/align op{index}", OUTSIDER)[0] for index in range(30)]
    wait_for(lambda: all(settled(github, c) for c in made) or len(bot_comments(github)) > 5,
             TIMEOUT, "the outsider's command jobs")
    replies = bot_comments(github)
    assert 1 <= len(replies) <= 5
    assert all("needs write access" in reply.body for reply in replies)
    unanswered = [c for c in made if not any(
        r.body.startswith(f"<!-- alignbot:command comment:{c} -->") for r in replies)]
    assert len(unanswered) >= 25
    assert all([r.content for r in github.comments[c].reactions] == ["confused"]
               for c in unanswered)


@pytest.mark.slow
def test_a_signed_payload_of_the_wrong_shape_logs_one_line(
        github_server: Any, service: Service) -> None:
    github = github_server
    seed(github)
    made = github.add_comment(OWNER, REPO, NUMBER, "/help", OUTSIDER)
    for field, value in (("id", str(made.id)), ("body", 42), ("user", [OUTSIDER])):
        payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=made.id)
        payload["comment"][field] = value
        headers, body = github.delivery("issue_comment", payload, SECRET)
        delivery = headers["X-GitHub-Delivery"]
        response = httpx.post(f"{service.url}/webhook", content=body, headers=headers,
                              timeout=30)
        assert response.status_code == 200, response.text
        lines = [line for line in service.log_text().splitlines() if delivery in line]
        warnings = [line for line in lines if "WARNING" in line]
        assert len(warnings) == 1 and f"comment.{field}" in warnings[0], lines
    payload = github.webhook("issue_comment.created", OWNER, REPO, comment_id=made.id)
    payload["issue"] = [payload["issue"]]
    payload["installation"]["id"] = {"id": INSTALLATION}
    headers, body = github.delivery("issue_comment", payload, SECRET)
    response = httpx.post(f"{service.url}/webhook", content=body, headers=headers, timeout=30)
    assert response.status_code == 200
    assert "Traceback" not in service.log_text()
    assert bot_comments(github) == []


# -- a go-ahead binds to the commit it was written on ----------------------------------------


@dataclass
class Clock:
    """The GitHub test server's clock: it moves only when told (GitHub's times have whole
    seconds, so that is what a push and a comment are ordered by)."""

    now: datetime = dataclasses.field(
        default_factory=lambda: datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1))

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: int = 60) -> None:
        self.now += timedelta(seconds=seconds)


class Outsider:
    """An outside contributor's pull request #1 (it changes no op file, so a check needs no
    sandbox), opened and delivered; pushes and comments on the server's ``clock``."""

    def __init__(self, github: Any, service: Service) -> None:
        self.github, self.service, self.clock = github, service, Clock()
        github.clock = self.clock
        base = _files(ROOT / "examples" / "fastops")
        self.tree = {**base, "NOTES": b"notes 0\n"}
        self.heads = [open_pull(github, base, self.tree, title="Notes",
                                association="CONTRIBUTOR")]
        github.set_permission(OWNER, REPO, MAINTAINER, "write")
        self.deliver("pull_request", github.webhook("pull_request.opened", OWNER, REPO,
                                                    number=NUMBER))

    def deliver(self, event: str, payload: dict[str, Any]) -> None:
        assert self.service.deliver(self.github, event, payload).status_code in (200, 202)

    def push(self, sha: str | None = None, deliver: bool = True) -> tuple[str, dict[str, Any]]:
        """A push of a new commit (or of ``sha`` again: a force-push back); its webhook,
        delivered unless told not to."""
        if sha is None:
            self.tree = {**self.tree, "NOTES": f"notes {len(self.heads)}\n".encode()}
            sha = hashlib.sha1(str(sorted(self.tree.items())).encode()).hexdigest()
        self.github.push(OWNER, REPO, NUMBER, sha, tree=self.tree)
        self.heads.append(sha)
        payload = self.github.webhook("pull_request.synchronize", OWNER, REPO, number=NUMBER)
        if deliver:
            self.deliver("pull_request", payload)
        return sha, payload

    def comment(self, body: str, user: str = MAINTAINER, deliver: bool = True
                ) -> tuple[int, dict[str, Any]]:
        made = self.github.add_comment(OWNER, REPO, NUMBER, body, user)
        payload = self.github.webhook("issue_comment.created", OWNER, REPO, comment_id=made.id)
        if deliver:
            self.deliver("issue_comment", payload)
        return made.id, payload

    def run_of(self, sha: str) -> Any:
        """The check run of ``sha`` once it is completed (and its job is done)."""
        def done() -> bool:
            runs = self.github.check_runs_for(OWNER, REPO, sha)
            return bool(runs) and runs[0].status == "completed" and jobs_idle(self.service)
        wait_for(done, TIMEOUT, f"the check run of {sha[:12]}")
        (run,) = self.github.check_runs_for(OWNER, REPO, sha)
        return run

    def waiting(self, sha: str, approved: str | None) -> None:
        """``sha``'s check run waits for a go-ahead (and names the commit ``approved``)."""
        run = self.run_of(sha)
        text = f"{run.output.get('title')} {run.output.get('summary')}"
        assert run.conclusion == "action_required", text
        assert sha[:12] in text and "/ok-to-test" in text
        if approved:
            assert approved[:12] in text, text


def jobs_idle(service: Service) -> bool:
    from alignbot.bot.queue import JobState, SqlJobQueue
    from alignbot.bot.storage import make_engine

    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        return all(job.state not in (JobState.QUEUED, JobState.RUNNING)
                   for job in SqlJobQueue(engine).list())
    finally:
        engine.dispose()


def reply_to(github: Any, comment_id: int) -> str:
    wait_for(lambda: any(c.body.startswith(f"<!-- alignbot:command comment:{comment_id} -->")
                         for c in bot_comments(github)), TIMEOUT, "the reply")
    return next(c.body for c in bot_comments(github)
                if c.body.startswith(f"<!-- alignbot:command comment:{comment_id} -->"))


@pytest.mark.slow
def test_a_push_between_the_go_ahead_and_its_job_is_not_approved(
        github_server: Any, service: Service) -> None:
    pr = Outsider(github_server, service)
    seen = pr.heads[0]
    pr.waiting(seen, None)
    pr.clock.tick()
    comment_id, comment = pr.comment("/ok-to-test", deliver=False)  # written on `seen`
    pr.clock.tick()
    pushed, _ = pr.push()  # lands before the comment's job runs
    pr.deliver("issue_comment", comment)
    assert pushed[:12] in reply_to(github_server, comment_id)
    pr.waiting(pushed, approved=seen)  # never run: nobody saw it
    assert pr.run_of(seen).conclusion == "action_required"  # the head moved on: not run


@pytest.mark.slow
def test_a_go_ahead_edited_into_a_comment_after_a_push_approves_the_older_head(
        github_server: Any, service: Service) -> None:
    pr = Outsider(github_server, service)
    seen = pr.heads[0]
    pr.clock.tick()
    comment_id, _ = pr.comment("Looks fine.")
    pr.clock.tick()
    pushed, _ = pr.push()
    pr.waiting(pushed, None)
    pr.clock.tick()
    changes = github_server.edit_comment(comment_id, "Looks fine.\n/ok-to-test")
    pr.deliver("issue_comment", github_server.webhook(
        "issue_comment.edited", OWNER, REPO, comment_id=comment_id, changes=changes))
    reply = reply_to(github_server, comment_id)
    assert seen[:12] in reply and pushed[:12] in reply
    pr.waiting(pushed, approved=seen)


@pytest.mark.slow
def test_a_go_ahead_in_the_same_second_as_a_push_does_not_cover_it(
        github_server: Any, service: Service) -> None:
    pr = Outsider(github_server, service)
    seen = pr.heads[0]
    pr.clock.tick()
    pushed, _ = pr.push()
    comment_id, _ = pr.comment("/ok-to-test")  # the same second: it may not have been seen
    pr.waiting(pushed, approved=seen)
    assert pushed[:12] in reply_to(github_server, comment_id)
    pr.clock.tick()
    pr.comment("/ok-to-test")  # a second later it was
    run = pr.run_of(pushed)
    wait_for(lambda: pr.run_of(pushed).conclusion == "success", TIMEOUT, "the check")
    assert run.id == pr.run_of(pushed).id


@pytest.mark.slow
def test_a_force_push_back_runs_only_a_commit_that_was_approved(
        github_server: Any, service: Service) -> None:
    pr = Outsider(github_server, service)
    unseen = pr.heads[0]  # replaced before any maintainer looked
    pr.clock.tick()
    approved, _ = pr.push()
    pr.clock.tick()
    pr.comment("/ok-to-test")
    wait_for(lambda: pr.run_of(approved).conclusion == "success", TIMEOUT, "the check")
    pr.clock.tick()
    pr.push(unseen)  # force-pushed back to the commit nobody approved
    wait_for(lambda: len(github_server.check_runs_for(OWNER, REPO, unseen)) == 1
             and jobs_idle(service), TIMEOUT, "the gate")
    pr.waiting(unseen, approved=approved)
    pr.clock.tick()
    pr.push(approved)  # and to the approved one again: its code was let run
    wait_for(lambda: github_server.check_runs_for(OWNER, REPO, approved)[0].updates[-1]
             .get("conclusion") == "success" and len(
                 github_server.check_runs_for(OWNER, REPO, approved)[0].updates) > 2,
             TIMEOUT, "the check of the approved commit again")


@pytest.mark.slow
def test_a_go_ahead_stops_counting_when_its_giver_loses_write_access(
        github_server: Any, service: Service) -> None:
    pr = Outsider(github_server, service)
    head = pr.heads[0]
    pr.clock.tick()
    pr.comment("/ok-to-test")
    wait_for(lambda: pr.run_of(head).conclusion == "success", TIMEOUT, "the check")
    github_server.set_permission(OWNER, REPO, MAINTAINER, "read")  # left the team
    (run,) = github_server.check_runs_for(OWNER, REPO, head)
    pr.deliver("check_run", github_server.webhook("check_run.rerequested", OWNER, REPO,
                                                  check_run_id=run.id))
    wait_for(lambda: pr.run_of(head).conclusion == "action_required", TIMEOUT, "the gate")
    assert f"`{MAINTAINER}`" in pr.run_of(head).output["summary"]
    assert "no longer counts" in pr.run_of(head).output["summary"]
    github_server.set_permission(OWNER, REPO, "max", "maintain")
    pr.clock.tick()
    pr.comment("/ok-to-test", user="max")  # a maintainer who may: the same commit runs
    wait_for(lambda: pr.run_of(head).conclusion == "success", TIMEOUT, "the check again")


# -- tenancy: one installation never writes into, nor shows, another's ------------------------


RIVAL, RIVAL_INSTALLATION, RIVAL_MAINTAINER = "rival-org", 5151, "bea"
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/5"


def two_tenants(github: Any, service: Service, tracking: str | None) -> None:
    """demo-org/fastops (pull request #1, ``upstream.tracking_repo: tracking``) and
    demo-org/tracker on the App's installation; rival-org's installation with its private
    rival-org/secret (pull request #3) and its public rival-org/tracker; pytorch/pytorch#5
    upstream. Both installations delivered, as GitHub sends them when the App is installed."""
    base = _files(ROOT / "examples" / "fastops")
    if tracking is not None:
        base[".github/alignbot.yml"] += f"  tracking_repo: {tracking}\n".encode()
    open_pull(github, base, {**base, "NOTES": b"notes\n"}, title="Notes")
    github.set_permission(OWNER, REPO, MAINTAINER, "write")
    github.add_repo(OWNER, "tracker", INSTALLATION, {"0" * 40: {"README.md": b"tracker\n"}})
    github.add_repo(OWNER, "elsewhere", None, {"1" * 40: {"README.md": b"not installed\n"}})
    github.add_installation(RIVAL_INSTALLATION, RIVAL)
    for name, private in (("secret", True), ("tracker", False)):
        github.add_repo(RIVAL, name, RIVAL_INSTALLATION, {"2" * 40: {"README.md": b"rival\n"}},
                        private=private)
    github.add_pull(RIVAL, "secret", 3, "3" * 40, "2" * 40, "Rival's work", RIVAL_MAINTAINER)
    github.set_permission(RIVAL, "secret", RIVAL_MAINTAINER, "write")
    upstream = github.add_repo("pytorch", "pytorch", None, {"4" * 40: {"README.md": b"pt\n"}})
    github.issues[(upstream.id, 5)] = Issue(
        upstream, 5, github.next_id(), "erf is off", "", github.user("someone"),
        datetime.now(UTC) - timedelta(days=9), datetime.now(UTC) - timedelta(days=9))
    for installation in (INSTALLATION, RIVAL_INSTALLATION):
        payload = github.webhook("installation.created", installation_id=installation)
        assert service.deliver(github, "installation", payload).status_code in (200, 202)


def say(github: Any, service: Service, owner: str, repo: str, number: int, body: str,
        user: str) -> int:
    """``user`` comments on ``owner/repo#number``; returns the comment's id once answered."""
    made = github.add_comment(owner, repo, number, body, user)
    payload = github.webhook("issue_comment.created", owner, repo, comment_id=made.id)
    assert service.deliver(github, "issue_comment", payload).status_code == 202
    wait_for(lambda: bool(github.comments[made.id].reactions) or (jobs_idle(service)
             and any(f"comment:{made.id} " in c.body for c in github.comments.values())),
             TIMEOUT, "the command's answer")
    wait_for(lambda: jobs_idle(service), TIMEOUT, "the command job")
    return made.id


def rival_writes(github: Any) -> list[str]:
    """Every write the App made into rival-org's repositories, but those of its own commands
    on rival-org/secret#3."""
    return [f"{method} {path}" for method, path, status in github.requests
            if (method != "GET" and f"/{RIVAL}/" in path and "/secret/issues/" not in path)
            or (method == "POST" and path.startswith("/repositories/"))]


def service_rows(service: Service, table: Any) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from alignbot.bot.storage import make_engine, transaction

    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:
        with transaction(engine) as conn:
            return [dict(row._mapping) for row in conn.execute(select(table))]
    finally:
        engine.dispose()


@pytest.mark.slow
def test_track_of_an_item_another_tenant_tracks_shows_nothing_of_theirs(
        github_server: Any, service: Service) -> None:
    from alignbot.bot.storage import UPSTREAM

    github = github_server
    two_tenants(github, service, f"{OWNER}/tracker")
    say(github, service, RIVAL, "secret", 3, f"/track {UPSTREAM_ISSUE}", RIVAL_MAINTAINER)
    for line in (f"/track {UPSTREAM_ISSUE}", f"/track {UPSTREAM_ISSUE.upper()}",
                 f"/track {UPSTREAM_ISSUE}/"):
        say(github, service, OWNER, REPO, NUMBER, line, MAINTAINER)
    ours = " ".join(c.body for c in github.comments_on(OWNER, REPO, NUMBER))
    for theirs in (RIVAL, "secret", RIVAL_MAINTAINER):
        assert theirs not in ours
    watches = sorted((row["pr_repo"], row["registered_by"], row["tracking_repo"])
                     for row in service_rows(service, UPSTREAM))
    assert watches == [(f"{OWNER}/{REPO}", MAINTAINER, f"{OWNER}/tracker"),
                       (f"{RIVAL}/secret", RIVAL_MAINTAINER, None)]


def moved_tracker(github: Any) -> None:
    """demo-org/moved, transferred to rival-org (whose installation now holds it)."""
    github.add_repo(OWNER, "moved", INSTALLATION, {"5" * 40: {"README.md": b"moved\n"}})
    github.move_repo(OWNER, "moved", RIVAL, installation_id=RIVAL_INSTALLATION)


@pytest.mark.slow
@pytest.mark.parametrize(("tracking", "written"), [
    (f"{RIVAL}/tracker", None), (f"{OWNER}/moved", None), (f"{OWNER}/elsewhere", None),
    ("DEMO-ORG/Tracker", f"{OWNER}/tracker"),
])
def test_the_weekly_digest_is_written_only_into_the_installations_own_repository(
        github_server: Any, service: Service, tracking: str, written: str | None) -> None:
    from alignbot.bot.storage import SWEEPS

    github = github_server
    two_tenants(github, service, tracking)
    moved_tracker(github)
    say(github, service, OWNER, REPO, NUMBER, f"/track {UPSTREAM_ISSUE}", MAINTAINER)
    say(github, service, RIVAL, "secret", 3, f"/track {UPSTREAM_ISSUE}", RIVAL_MAINTAINER)
    sweep = subprocess.run([sys.executable, "-m", "alignbot.bot.cli", "remind-sweep", "--force"],
                           env=service.env, capture_output=True, text=True, timeout=300)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    assert "Traceback" not in sweep.stderr, sweep.stderr[-3000:]

    assert rival_writes(github) == []
    digests = {f"{issue.repo.full_name}": issue for repo in ("tracker", "elsewhere")
               for issue in github.created_issues(OWNER, repo)}
    state = {row["repo"]: row for row in service_rows(service, SWEEPS)}[f"{OWNER}/{REPO}"]
    if written is None:
        assert digests == {}
        assert state["error"].startswith("no digest: ") and "tracking_repo" in state["error"]
        return
    (issue,) = digests.values()
    assert issue.repo.full_name == written
    (digest,) = github.comments_on(OWNER, "tracker", issue.number)
    assert "pytorch/pytorch/issues/5" in digest.body and f"{OWNER}/{REPO}#1" in digest.body
    assert RIVAL not in digest.body and "secret" not in digest.body


@pytest.mark.slow
@pytest.mark.parametrize(("tracking", "filed", "said"), [
    (f"{RIVAL}/tracker", None, "is not `demo-org`'s"),
    (f"{OWNER}/moved", None, "is not `demo-org`'s"),
    (f"{OWNER}/elsewhere", None, "that alignbot is installed on"),
    ("Demo-Org/TRACKER", f"{OWNER}/tracker", "opened [demo-org/tracker#1]"),
])
def test_upstream_file_opens_issues_only_in_the_installations_own_repository(
        github_server: Any, service: Service, tracking: str, filed: str | None,
        said: str) -> None:
    from test_commands import REFERENCE_SUSPECT, REPORT

    from alignbot.bot.queue import JobState
    from alignbot.bot.storage import JOBS, make_engine, transaction, utcnow

    github = github_server
    two_tenants(github, service, tracking)
    moved_tracker(github)
    engine = make_engine(f"sqlite:///{service.folder / 'alignbot.db'}")
    try:  # a finished check whose report has a finding PyTorch looks wrong on
        with transaction(engine) as conn:
            conn.execute(JOBS.insert().values(
                kind="align", key=f"{OWNER}/{REPO}#{NUMBER}", payload={"head_sha": "f" * 40},
                state=JobState.DONE.value, attempts=1, result={"report": REPORT},
                created_at=utcnow(), updated_at=utcnow(), available_at=utcnow()))
    finally:
        engine.dispose()
    made = say(github, service, OWNER, REPO, NUMBER, f"/upstream {REFERENCE_SUSPECT} file",
               MAINTAINER)
    reply = reply_to(github, made)
    assert said in reply, reply
    assert rival_writes(github) == []
    opened = [issue for name in ("tracker", "elsewhere")
              for issue in github.created_issues(OWNER, name)]
    assert [issue.repo.full_name for issue in opened] == ([filed] if filed else [])
