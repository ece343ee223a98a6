"""Attacks through slash-commands, end to end: a real `alignbot serve` and the GitHub test
server. A hijacked sticky comment, a flood of command lines, commands hidden in nested code,
a refused commenter who keeps trying, and signed payloads of the wrong shape."""

from __future__ import annotations

import time
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
