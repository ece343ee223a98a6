"""Attacks through slash-commands, end to end: a real `alignbot serve` and the GitHub test
server. A hijacked sticky comment, a flood of command lines, commands hidden in nested code,
a refused commenter who keeps trying, signed payloads of the wrong shape, and go-aheads
that would follow a moving head (a push between the comment and its job, an edit after a
push, a push in the comment's second, a force-push back, a giver who lost write access)."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from service import NUMBER, OWNER, REPO, SECRET, Service, open_pull

from bot.demo import INSTALLATION, _files, wait_for
from bot.output import MARKER

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
    from bot.queue import SqlJobQueue
    from bot.storage import make_engine

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
    from bot.queue import JobState, SqlJobQueue
    from bot.storage import make_engine

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
